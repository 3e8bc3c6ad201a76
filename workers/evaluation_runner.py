"""`dialcheck eval`: run the pipeline over a DialFact-format file per surface and protocol and
report the paper's metrics (method.md §6). The stream's `dialcheck verdicts --gold` reuses
`label_metrics`, so both report the same JSON."""
from __future__ import annotations

import time
from typing import Sequence

from .dialfact import DialFactRecord
from .evaluate import label_metrics, retrieval_metrics
from .pipeline import Pipeline
from .retrieval.dense import unique_docs


def surface_stats(verdicts) -> dict:
    n = len(verdicts) or 1
    rewritten = sum(v.surface.text != v.claim for v in verdicts)
    gated = [v.surface.gate for v in verdicts if v.surface.gate is not None]
    return {"rewritten_share": round(100 * rewritten / n, 2),
            "gate_candidates": len(gated),
            "gate_acceptance_rate": round(100 * sum(g.accepted for g in gated) / len(gated), 2) if gated else None,
            "status": {s: sum(v.status.state == s for v in verdicts) for s in ("ok", "degraded", "error")}}


def evaluate_labels(pipeline: Pipeline, records: Sequence[DialFactRecord], batch: int = 32) -> dict:
    t = time.perf_counter()
    items = [r.to_check_item(pipeline.protocol) for r in records]
    verdicts = []
    for s in range(0, len(items), batch):
        verdicts.extend(pipeline.check_many(items[s:s + batch]))
    out = label_metrics([r.label for r in records], [v.label for v in verdicts])
    out.update(surface_stats(verdicts))
    out["claims_per_second"] = round(len(records) / (time.perf_counter() - t), 2)
    return out


def evaluate_retrieval(pipeline: Pipeline, records: Sequence[DialFactRecord], batch: int = 32) -> dict:
    """Document-level retrieval metrics on factual claims with gold evidence:
    BM25 (+ context union) @180, dense re-scoring @10 and its top 1."""
    recs = [r for r in records if r.type_label == "factual" and r.evidence]
    gold = [{t for t, _ in r.evidence} for r in recs]
    stages: dict[str, list[list[str]]] = {"bm25": [], "dense": []}
    surfaces = []
    t = time.perf_counter()
    items = [r.to_check_item("ir") for r in recs]
    for s in range(0, len(items), batch):
        for res in pipeline.retrieve_many(items[s:s + batch]):
            stages["bm25"].append(unique_docs(res.get("bm25", [])))
            stages["dense"].append(unique_docs(res.get("dense", [])))
            surfaces.append(res["surface"])
    n = len(recs) or 1
    gated = [sf.gate for sf in surfaces if sf is not None and sf.gate is not None]
    return {
        "n": len(recs),
        "bm25": retrieval_metrics(gold, stages["bm25"], [180]),
        "dense": retrieval_metrics(gold, stages["dense"], [10]),
        "top1": retrieval_metrics(gold, stages["dense"], [1]),
        "rewritten_share": round(100 * sum(sf.text != r.response for sf, r in zip(surfaces, recs)) / n, 2),
        "gate_acceptance_rate": round(100 * sum(g.accepted for g in gated) / len(gated), 2) if gated else None,
        "queries_per_second": round(len(recs) / (time.perf_counter() - t), 2),
    }
