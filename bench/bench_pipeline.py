"""Benchmark (not a test): the pipeline with the verdict-preserving optimisations off and on, in
the same process, on the same records, with the same loaded models.

    python bench/bench_pipeline.py [--protocol e2e] [--surface r4g] [--limit 300] [--batch 16] [--json]
                                   [--variant-nli artifacts/nli-int8-static]

"off" is settings section `perf` with batch_query_encoding=false and cache_entries=0 (the path of
the last release); "on" is the default. Both pipelines share the loaded NLI model, encoder and
index, so the ratio isolates the optimisations. Labels must be identical; the ratio is
claims/s on ÷ off. Per-stage milliseconds per claim come from the verdicts' timings.
`model_seconds` is the time spent inside the NLI model's `predict` and the encoder's `encode`;
`ceiling_speedup` = off seconds ÷ on's model seconds, the speed-up if everything around the model
calls cost nothing: the bound on what verdict-preserving changes can reach on this machine.

`--variant-nli DIR` adds a third run, "variant": "on" with another NLI artifact (e.g. the static
int8 one from `dialcheck nli quantize`). It changes verdicts, so it is reported beside, never
inside, the identical-label ratio: its speed-up over "off" and how many labels differ.
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from schemas import TIMING_META_KEYS  # noqa: E402
from schemas.items import load_dialfact  # noqa: E402
from schemas.settings import load_settings  # noqa: E402
from schemas.protocols import turn_verdicts


class Timed:
    """A model with the seconds spent inside `method` counted: the run's model arithmetic, which
    no verdict-preserving change can remove (the rest is what the optimisations can cut)."""

    def __init__(self, inner, method: str):
        self.inner, self.seconds = inner, 0.0
        call = getattr(inner, method)

        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t

        setattr(self, method, timed)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def run(pipeline, items, batch: int) -> tuple[list, float]:
    t = time.perf_counter()
    verdicts = []
    for s in range(0, len(items), batch):
        verdicts += turn_verdicts(pipeline.check_turns(items[s:s + batch]))
    return verdicts, time.perf_counter() - t


def stage_ms(verdicts) -> dict[str, float]:
    total: collections.Counter = collections.Counter()
    for v in verdicts:
        total.update({k: x for k, x in v.timings_ms.items() if k not in TIMING_META_KEYS})
    return {k: round(x / max(len(verdicts), 1), 1) for k, x in total.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--protocol", default="e2e", choices=["e2e", "fv"])
    ap.add_argument("--surface", default="r4g")
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--data", default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--variant-nli", default=None, help="another NLI artifact dir, measured as 'variant'")
    args = ap.parse_args()

    from workers.models.factory import load_models
    from workers.pipeline import Pipeline
    from workers.retrieval.factory import load_searcher

    base = load_settings()
    nli, encoder = load_models(base)
    nli, encoder = Timed(nli, "predict"), Timed(encoder, "encode")
    searcher = load_searcher(base, encoder) if args.protocol == "e2e" else None
    every = load_dialfact(args.data or base.data.dialfact_sample)
    records, warm = every[:args.limit], [r.to_check_item(args.protocol) for r in every[-2:]]
    items = [r.to_check_item(args.protocol) for r in records]
    modes = {"off": base.updated(perf={"batch_query_encoding": False, "cache_entries": 0}), "on": base}
    pipes = {name: Pipeline(s, nli, encoder, searcher, args.protocol, args.surface) for name, s in modes.items()}
    if args.variant_nli:
        from workers.models.onnx_nli import load_local_nli

        modes["variant"] = base
        pipes["variant"] = Pipeline(base, Timed(load_local_nli(args.variant_nli), "predict"), encoder, searcher,
                                    args.protocol, args.surface)
    for p in pipes.values():  # warm-up on records outside the timed set's caches: not timed
        turn_verdicts(p.check_turns(warm))
    out = {"protocol": args.protocol, "surface": args.surface, "claims": len(items), "batch": args.batch}
    labels = {}
    from workers.surfaces.pronouns import set_parse_cache

    for name, pipe in pipes.items():
        set_parse_cache(0)  # a fresh (or no) parse cache for each run
        set_parse_cache(modes[name].perf.cache_entries)
        models = (pipe.nli, encoder)
        before = sum(m.seconds for m in models)
        verdicts, secs = run(pipe, items, args.batch)
        in_models = sum(m.seconds for m in models) - before
        labels[name] = [v.label for v in verdicts]
        out[name] = {"claims_per_second": round(len(items) / secs, 3), "seconds": round(secs, 1),
                     "model_seconds": round(in_models, 1), "stage_ms_per_claim": stage_ms(verdicts)}
    out["speedup"] = round(out["on"]["claims_per_second"] / out["off"]["claims_per_second"], 2)
    # the most any verdict-preserving change could give: "on" with nothing left but its model calls
    out["ceiling_speedup"] = round(out["off"]["seconds"] / max(out["on"]["model_seconds"], 1e-9), 2)
    out["identical_labels"] = labels["on"] == labels["off"]
    out["label_differences"] = sum(a != b for a, b in zip(labels["on"], labels["off"]))
    if args.variant_nli:
        out["variant"].update(nli=args.variant_nli, speedup_over_off=round(
            out["variant"]["claims_per_second"] / out["off"]["claims_per_second"], 2),
            label_differences_from_on=sum(a != b for a, b in zip(labels["variant"], labels["on"])))
    print(json.dumps(out, indent=1) if args.json else
          f"{args.protocol} {args.surface}: off {out['off']['claims_per_second']} claims/s, on "
          f"{out['on']['claims_per_second']} claims/s, x{out['speedup']} (ceiling x{out['ceiling_speedup']}: model "
          f"calls only), identical labels: {out['identical_labels']}")
    return 0 if out["identical_labels"] else 1


if __name__ == "__main__":
    sys.exit(main())
