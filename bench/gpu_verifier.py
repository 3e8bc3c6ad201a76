"""GPU verifier run (not a test): train a larger NLI verifier, adopt it, print its yardstick — ONE JSON.

    python bench/gpu_verifier.py --device cuda --base DIR --work W --out $OUT/gpu_verifier.json
    python bench/gpu_verifier.py --device cpu --tiny --work W          # the wiring, on CPU, in minutes
    python bench/gpu_verifier.py --prepare --base DIR --work artifacts/gpu-verifier

Three steps, each through the real CLI and timed, each recording its own error instead of
stopping the run (bench/gpu_check.py's habit):
1. train: `dialcheck nli train --base-model BASE --device cuda` on our pairs (bf16 autocast;
   batch 128, lr 5e-5, 1 epoch over --max-pairs pairs: sized for ~6 minutes of an H200 with mpnet);
2. adopt: `dialcheck nli adopt` of the checkpoint (ONNX, temperature, card, the guarded decision
   refitted on the yardstick's sets);
3. yardstick: `dialcheck tune decision --lodo --model-dir ADOPTED --json` (the NLI pairs come from
   the pair cache step 2 filled, so this step is cheap).
`--tiny`: the shipped MiniLM base, 96 pairs, 4 claims per set — it says nothing about quality.
`--prepare`: the bundle for the device (base weights as fp16, data files), refused when it would
not travel (64 MiB).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
TRAVEL_LIMIT = 64 * 2**20


def step(out: dict, name: str, argv: list[str], env: dict, timeout: int) -> bool:
    t = time.perf_counter()
    try:
        r = subprocess.run([sys.executable, "-m", "dialcheck", *argv], capture_output=True, text=True,
                           env=env, cwd=str(REPO), timeout=timeout)
        out[name] = {"rc": r.returncode, "argv": argv, "stderr_tail": r.stderr[-1500:]}
        if r.returncode == 0 and argv[-1] == "--json":
            out[name]["result"] = json.loads(r.stdout)
        elif r.returncode == 0:
            out[name]["stdout_tail"] = r.stdout[-1500:]
    except Exception as e:  # noqa: BLE001 - a step reports its failure and the run goes on
        out[name] = {"error": f"{type(e).__name__}: {e}"}
    out[name + "_seconds"] = round(time.perf_counter() - t, 1)
    print(f"[gpu-verifier] {name}: rc {out[name].get('rc')} in {out[name + '_seconds']} s", file=sys.stderr, flush=True)
    return out[name].get("rc") == 0


def _default_data_dir() -> str:
    from schemas.settings import load_settings

    return str(load_settings().data.dir)


def write_pairs(data_dir: str, path: Path, n: int) -> int:
    """A seeded sample of n training pairs (never the validation split) as `dialcheck nli train --pairs-file` reads."""
    import random

    from lab.nli.data import training_pairs

    train, _, _ = training_pairs(data_dir)
    sample = random.Random(13).sample(train, min(n, len(train)))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for p in sample:
            f.write(json.dumps({"premise": p.premise, "hypothesis": p.hypothesis, "label": p.label, "source": p.source}) + "\n")
    return len(sample)


def prepare(base: Path, work: Path) -> int:
    """The device bundle: base weights (fp16 safetensors) + tokenizer + the data files; one line and
    exit 2 when it is over the 64 MiB that travels."""
    if not (base / "config.json").is_file():
        print(f"gpu_verifier: no checkpoint at {base} (see the header of bench/gpu_verifier.sh)", file=sys.stderr)
        return 2
    weights = sum(p.stat().st_size for p in base.glob("*.safetensors")) or sum(p.stat().st_size for p in base.glob("*.bin"))
    if weights // 2 > TRAVEL_LIMIT:  # fp16 halves fp32
        print(f"gpu_verifier: {base.name}'s weights are {weights / 2**20:.0f} MiB ({weights / 2**21:.0f} MiB as fp16): "
              f"over the {TRAVEL_LIMIT // 2**20} MiB the device's working tree may carry, and the device reaches "
              "nothing outside; choose a smaller base or bring the weights another way", file=sys.stderr)
        return 2
    import torch
    from transformers import AutoModel, AutoTokenizer

    if work.exists():
        shutil.rmtree(work)
    (work / "base").mkdir(parents=True)
    AutoModel.from_pretrained(str(base), dtype=torch.float16).save_pretrained(str(work / "base"))
    AutoTokenizer.from_pretrained(str(base)).save_pretrained(str(work / "base"))
    size = sum(p.stat().st_size for p in work.rglob("*") if p.is_file())
    print(f"{work}: {size / 2**20:.1f} MiB (the data files are not bundled yet: see docs/verifiers.md)")
    return 0 if size <= TRAVEL_LIMIT else 2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="", help="the base checkpoint dir (default: the shipped MiniLM base)")
    ap.add_argument("--work", default="/tmp/gpu-verifier")
    ap.add_argument("--out", default=os.environ.get("OUT", ".") + "/gpu_verifier.json")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--max-pairs", type=int, default=150_000)
    ap.add_argument("--pairs-file", default=None, help="training pairs JSONL (default: a sample written from --data-dir)")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--limit-per-set", type=int, default=None)
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--prepare", action="store_true")
    args = ap.parse_args()
    work = Path(args.work)
    if args.prepare:
        return prepare(Path(args.base), work)
    if args.tiny:
        args.max_pairs, args.batch_size, args.limit_per_set = 96, 16, args.limit_per_set or 4
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    if args.data_dir:
        env["DIALCHECK_DATA_DIR"] = str(Path(args.data_dir).resolve())
    out: dict = {"device": args.device, "base": args.base or "all-MiniLM-L6-v2 (shipped base)", "tiny": args.tiny,
                 "max_pairs": args.max_pairs, "limit_per_set": args.limit_per_set}
    try:
        import torch

        out["gpu"] = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    except Exception as e:  # noqa: BLE001
        out["gpu"] = f"torch: {e}"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    train = ["nli", "train", "--out-dir", str(work / "train"), "--device", args.device, "--max-pairs", str(args.max_pairs),
             "--batch-size", str(args.batch_size), "--epochs", "1", "--lr", "5e-5", "--warmup-ratio", "0.06",
             "--checkpoint-every", "100000", "--max-length", "128"]
    if args.base:
        train += ["--base-model", args.base]
    # --max-pairs applies to a pairs file only (lab/nli/train.py): a seeded sample of the training split
    pairs_file = Path(args.pairs_file) if args.pairs_file else work / "pairs.jsonl"
    if not args.pairs_file:
        write_pairs(args.data_dir or env.get("DIALCHECK_DATA_DIR") or _default_data_dir(), pairs_file, args.max_pairs)
    train += ["--pairs-file", str(pairs_file)]
    slack = 4 if args.tiny else 1  # CPU timeouts: a shared 2-core machine is slow, not stuck
    lim = (["--limit-per-set", str(args.limit_per_set)] if args.limit_per_set else []) + \
        (["--folds", "2"] if args.tiny else [])  # 4 claims per set cannot make 5 grouped folds
    adopted = work / "adopted"
    ok = step(out, "train", train, env, 400 * slack)
    ok = ok and step(out, "adopt", ["nli", "adopt", str(work / "train" / "model"), "--out", str(adopted), "--name",
                                    "verifier-h200" if not args.tiny else "verifier-tiny",
                                    *(["--valid-limit", "200"] if args.tiny else []), *lim,
                                    "--json"], env, 240 * slack)
    ok = ok and step(out, "yardstick", ["tune", "decision", "--lodo", "--model-dir", str(adopted), *lim, "--json"],
                     env, 240 * slack)
    if ok:
        rec = out["adopt"]["result"]
        out["summary"] = {"version": rec["version"], "validation_accuracy": rec["validation_accuracy"],
                          "temperature": rec["temperature"],
                          "lodo_guarded_macro_f1": {k: v.get("guarded", {}).get("macro_f1") for k, v in
                                                    out["yardstick"]["result"].get("left_out", {}).items()}}
        print(json.dumps(out["summary"], indent=1))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"[gpu-verifier] wrote {args.out}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
