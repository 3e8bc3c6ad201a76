"""Benchmark (not a test): grounded turns beside E2E turns through the one default Pipeline a worker
runs, in the same process, on the same DialFact records.

    python bench/bench_grounded.py [--limit 200] [--batch 16] [--knowledge-docs 8] [--json]

Three runs of the same replies, interleaved batch by batch (the order rotated every batch, so load
from other processes on a shared machine falls on each alike; bench/bench_pipeline.py's convention):
- "e2e": no evidence, the claim's passages retrieved from the index (what a worker does today);
- "grounded": the record's evidence as the turn's `evidence` (GivenPassage, source "turn"), no retrieval;
- "grounded_knowledge": the same, then `--knowledge-docs` passages of the conversation's knowledge
  (source "conversation": other records' evidence, as a help centre's articles would be), read
  after the turn's own, to the grounding limits, by streams/knowledge.py's `given_evidence`.
`ratio_to_e2e` = claims/s ÷ e2e's. Labels are not compared (the passages differ on purpose).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_pipeline import shown, stage_ms, windows_read  # noqa: E402
from schemas import ChatTurn  # noqa: E402
from schemas.evidence import EvidenceLimits  # noqa: E402
from schemas.items import CheckItem, GivenPassage, load_dialfact  # noqa: E402
from schemas.protocols import turn_verdicts  # noqa: E402
from schemas.settings import load_settings  # noqa: E402
from streams.replay import given_passages  # noqa: E402

RUNS = ("e2e", "grounded", "grounded_knowledge")


def knowledge_of(records, i: int, docs: int) -> list[GivenPassage]:
    """`docs` passages of other records (the next ones, wrapping), as a conversation's knowledge."""
    out: list[GivenPassage] = []
    j = i + 1
    while len(out) < docs and j < i + 1 + len(records):
        rec = records[j % len(records)]
        out += [replace(p, id=f"kb-{rec.id}-{k}", source="conversation") for k, p in enumerate(given_passages(rec))]
        j += 1
    return out[:docs]


def run_items(records, docs: int, limits: EvidenceLimits) -> dict[str, list[CheckItem]]:
    """The same replies as each run's CheckItems (the worker's: streams/turn_worker.py)."""
    from streams.knowledge import given_evidence

    out: dict[str, list[CheckItem]] = {name: [] for name in RUNS}
    for i, r in enumerate(records):
        def item(evidence):
            return CheckItem(r.id, f"{r.id}#response", list(r.context), r.response, evidence)

        turn = ChatTurn(r.id, f"{r.id}#response", "assistant", r.response, check=True, evidence=given_passages(r))
        out["e2e"].append(item(None))
        out["grounded"].append(item(given_evidence(turn, [], limits)[0]))
        out["grounded_knowledge"].append(item(given_evidence(turn, knowledge_of(records, i, docs), limits)[0]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=200, help="records with evidence (DialFact testsmall)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--knowledge-docs", type=int, default=8, help="conversation knowledge passages per turn")
    ap.add_argument("--data", default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from workers.pipeline import Pipeline

    settings = load_settings()
    every = [r for r in load_dialfact(args.data or settings.data.dialfact_sample) if r.evidence]
    records = every[:args.limit]
    limits = EvidenceLimits.of(settings.grounding)
    items = run_items(records, args.knowledge_docs, limits)
    pipe = Pipeline.from_settings(settings, protocol="e2e")  # a default worker's: models, index, warm-up
    for name in RUNS:  # each kind of turn once outside the timed set (lazy loads): not timed
        turn_verdicts(pipe.check_turns(run_items(every[-2:], args.knowledge_docs, limits)[name]))
    verdicts = {name: [] for name in RUNS}
    secs = dict.fromkeys(RUNS, 0.0)
    for b, s in enumerate(range(0, len(records), args.batch)):
        order = RUNS[b % len(RUNS):] + RUNS[:b % len(RUNS)]
        for name in order:
            t = time.perf_counter()
            verdicts[name].extend(turn_verdicts(pipe.check_turns(items[name][s:s + args.batch])))
            secs[name] += time.perf_counter() - t
    out = {"claims": len(records), "batch": args.batch, "knowledge_docs": args.knowledge_docs,
           "surface": pipe.surface, "nli": pipe.nli.version}
    for name in RUNS:
        vs = verdicts[name]
        sources = sorted({e.source or "?" for v in vs for e in v.evidence})
        out[name] = {"claims_per_second": round(len(vs) / secs[name], 3), "seconds": round(secs[name], 1),
                     "passages_per_claim": round(sum(len(it.gold_evidence or []) for it in items[name]) / len(vs), 2),
                     "windows_read_per_claim": round(sum(windows_read(v) for v in vs) / len(vs), 2),
                     "evidence_sources": sources, "badges_shown": sum(bool(shown(v)) for v in vs),
                     "stage_ms_per_claim": stage_ms(vs)}
    for name in RUNS:
        out[name]["ratio_to_e2e"] = round(out[name]["claims_per_second"] / out["e2e"]["claims_per_second"], 2)
    print(json.dumps(out, indent=1) if args.json else
          "; ".join(f"{name} {out[name]['claims_per_second']} claims/s (x{out[name]['ratio_to_e2e']})" for name in RUNS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
