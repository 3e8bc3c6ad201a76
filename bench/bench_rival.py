"""Benchmark (not a test): what the rival queries cost end to end, on claims that have a one-filler
relation and on claims that do not, in one process.

    python bench/bench_rival.py [--repeat 3] [--json]

Two Pipelines over the same NLI model, encoder and index (the settings' embedded index): "without"
(`retrieval.rival_queries` off) and "with" (on; the shipped decision checks rivals). The claims are
the everyday and true-claim probes' (lab/probes: 70 everyday facts, 40 of them with a relation the
rival reads) and, as the traffic most chat is, 60 DialFact testsmall replies with their context
(few state a capital or an author). Each batch runs under both, order flipped every repeat, so load
from other processes falls on both alike. Reported: claims/s each, their ratio, the searches the
rival stage sent, and how many labels differ (the rival's REFUTES: on purpose)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from schemas.items import CheckItem, load_dialfact  # noqa: E402
from schemas.protocols import turn_verdicts  # noqa: E402
from schemas.settings import load_settings  # noqa: E402


def probe_items() -> list[CheckItem]:
    rows = []
    for name in ("everyday_facts.jsonl", "true_claims.jsonl"):
        rows += [json.loads(ln) for ln in (REPO / "lab" / "probes" / name).read_text().splitlines() if ln.strip()]
    return [CheckItem("probe", f"p{i}", [], r["claim"]) for i, r in enumerate(rows)]


def dialfact_items(settings, limit: int) -> list[CheckItem]:
    return [r.to_check_item("e2e") for r in load_dialfact(settings.data.dialfact_sample)[:limit]]


def main(argv=None) -> int:
    from workers.models.factory import load_models
    from workers.pipeline import Pipeline
    from workers.retrieval.factory import load_searcher

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dialfact", type=int, default=60, help="DialFact testsmall replies (default 60)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    # no hit or probability cache: the second run of a batch would read the first's
    base = load_settings(perf={"search_cache_entries": 0, "cache_entries": 0})
    nli, encoder = load_models(base)
    searcher = load_searcher(base, encoder)
    pipes = {mode: Pipeline(base.updated(retrieval={"rival_queries": mode}), nli, encoder, searcher, "e2e")
             for mode in ("off", "on")}
    sets = {"probes": probe_items(), "dialfact": dialfact_items(base, args.dialfact)}
    for p in pipes.values():  # warm: models, spaCy, caches alike
        p.check_turns(sets["probes"][:4])
    report = {}
    for name, items in sets.items():
        seconds = {m: 0.0 for m in pipes}
        labels = {}
        for r in range(args.repeat):
            for mode in (("off", "on") if r % 2 == 0 else ("on", "off")):
                t = time.perf_counter()
                results = pipes[mode].check_turns(items)
                seconds[mode] += time.perf_counter() - t
                labels[mode] = [v.label for v in turn_verdicts(results)]
                if mode == "on":
                    queried = sum("rival_query" in st.notes for res in results for st in res.states)
        n = len(items) * args.repeat
        rate = {m: round(n / s, 2) for m, s in seconds.items()}
        report[name] = {"claims": len(items), "claims_per_second_without": rate["off"],
                        "claims_per_second_with": rate["on"], "ratio_with_to_without": round(rate["on"] / rate["off"], 3),
                        "rival_queries": queried,
                        "labels_differing": sum(a != b for a, b in zip(labels["off"], labels["on"]))}
    print(json.dumps(report, indent=1) if args.json else "\n".join(f"{k}: {v}" for k, v in report.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
