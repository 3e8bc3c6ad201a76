"""`dialcheck eval`: run the pipeline over DialFact-format records per surface and protocol.

Why rows first: each claim becomes a run-file row (lab.evaluation.scoring.verdict_row / ir row), and the
metrics are computed from those rows by `lab.evaluation.scoring.score_run`, the function
`dialcheck score` calls on the file, so eval and score cannot drift apart."""
from __future__ import annotations

import time
from dataclasses import asdict
from typing import Callable, Sequence

from schemas.items import DialFactRecord
from schemas.secrets import Scrubber

from .scoring import ir_records, verdict_row
from schemas.protocols import turn_verdicts
from workers.pipeline import Pipeline
from workers.retrieval.dense import unique_docs


def label_rows(pipeline: Pipeline, records: Sequence[DialFactRecord], batch: int = 32,
               progress: Callable[[int], None] | None = None) -> tuple[list[dict], float]:
    """One row per record (FV / E2E), and the seconds it took. `progress(n)` after each batch of n."""
    scrub = Scrubber.from_settings(pipeline.settings)
    t = time.perf_counter()
    items = [r.to_check_item(pipeline.protocol) for r in records]
    verdicts = []
    for s in range(0, len(items), batch):
        verdicts.extend(turn_verdicts(pipeline.check_turns(items[s:s + batch])))
        if progress:
            progress(len(items[s:s + batch]))
    secs = time.perf_counter() - t
    # a run file is a publish boundary: what dialcheck wrote (status reasons quote backends) is scrubbed here
    rows = [scrub.row({"protocol": pipeline.protocol, "surface_mode": pipeline.surface,
                       **verdict_row(v.to_dict(), r.id)}) for r, v in zip(records, verdicts)]
    return rows, secs


def ir_rows(pipeline: Pipeline, records: Sequence[DialFactRecord], batch: int = 32,
            progress: Callable[[int], None] | None = None) -> tuple[list[dict], float]:
    """One row per IR query (factual claims with gold evidence): ranked, de-duplicated document ids
    of BM25 (+ context union) and of dense re-scoring, the surface and its gate decision."""
    from schemas import claim_id

    recs = ir_records(records)
    scrub = Scrubber.from_settings(pipeline.settings)
    t = time.perf_counter()
    items = [r.to_check_item("ir") for r in recs]
    results = []
    ir = pipeline if pipeline.protocol == "ir" else pipeline.with_options(protocol="ir")
    for s in range(0, len(items), batch):
        results.extend(t.states[0] for t in ir.check_turns(items[s:s + batch]))
        if progress:
            progress(len(items[s:s + batch]))
    secs = time.perf_counter() - t
    versions = pipeline.model_versions()
    rows = []
    for r, it, res in zip(recs, items, results):
        bm25, dense = (res.retrieval.bm25, res.retrieval.dense) if res.retrieval else ([], [])
        rows.append(scrub.row({"protocol": "ir", "surface_mode": pipeline.surface, "record_id": r.id,
                     "conversation_id": it.conversation_id, "turn_id": it.turn_id,
                     "claim_id": claim_id(it.conversation_id, it.turn_id, it.claim), "claim": it.claim,
                     "surface": asdict(res.ir_surface), "bm25_docs": unique_docs(bm25),
                     "dense_docs": unique_docs(dense), "evidence_ids": [p.id for p in dense],
                     "problems": [list(p) for p in res.problems], "model_versions": versions}))  # problems quote backends
    return rows, secs
