"""Benchmark (not a test): ONNX Runtime session options for the NLI model, same process, same pairs.

    python bench/bench_ort.py [--pairs 192] [--rounds 2] [--json]

Each configuration (graph optimisation level x intra-op threads) gets its own session; rounds
alternate the order so a noisy neighbour hurts all of them alike. Ratios are against the
default (`all`, threads 0 = one per core). Probabilities must agree within 1e-4 across options.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from schemas.items import load_dialfact  # noqa: E402
from schemas.settings import load_settings  # noqa: E402

CONFIGS = [("all", 0), ("all", 1), ("all", 2), ("extended", 0), ("basic", 0), ("disable", 0)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=192)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from workers.models.onnx_nli import OnnxNLI

    s = load_settings()
    recs = load_dialfact(s.data.dialfact_sample)
    pairs = [(text, r.response) for r in recs for _, text in r.evidence][: args.pairs]
    prem, hyp = [p for p, _ in pairs], [h for _, h in pairs]
    models = {cfg: OnnxNLI(s.models.nli_model_dir, threads=cfg[1], graph_optimization=cfg[0], workers=1) for cfg in CONFIGS}
    ref = models[CONFIGS[0]].predict(prem[:8], hyp[:8])
    secs = {cfg: 0.0 for cfg in CONFIGS}
    for r in range(args.rounds):
        for cfg in (CONFIGS if r % 2 == 0 else CONFIGS[::-1]):
            m = models[cfg]
            assert np.abs(m.predict(prem[:8], hyp[:8]) - ref).max() < 1e-4, cfg
            t = time.perf_counter()
            m.predict(prem, hyp)
            secs[cfg] += time.perf_counter() - t
    base = secs[CONFIGS[0]]
    out = [{"graph_optimization": g, "threads": th, "pairs_per_s": round(len(pairs) * args.rounds / secs[(g, th)], 1),
            "vs_default": round(base / secs[(g, th)], 2)} for g, th in CONFIGS]
    print(json.dumps(out, indent=1) if args.json else "\n".join(
        f"{o['graph_optimization']:<9} threads={o['threads']}  {o['pairs_per_s']:>7} pairs/s  x{o['vs_default']}" for o in out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
