"""A quiet stream run: DialFact records one at a time through a broker and a real `dialcheck worker`,
each record's verdict awaited before the next record is sent.

Why one at a time: the latency a chat app sees for one turn (produce → verdict) without queueing
behind other claims. `dialcheck demo` and bench/bench_stream.py send many claims at once or at an
offered rate, so their percentiles also hold waiting for the batches before a claim. Two warm-up
records (not measured, other records than the measured ones, so no cache holds a measured claim)
go first. Each measured claim gives two numbers: the verdict's own `latency_ms` (the producer's
`ts` to the verdict's publication, stamped by the worker: what /metrics and the page show) and
the arrival time at this consumer minus the send time (one reader stays open for the whole run).
"""
from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from schemas.items import response_claim_id
from schemas.settings import Settings

from .broker import kafka_for
from .replay import TurnProducer, replay
from .topics import ensure_topics
from .verdicts import VerdictFollower, end_offsets
from .worker import WorkerProcess

WARM_PREFIX = "warm-"


@dataclass
class SequentialRun:
    claim_ids: list[str] = field(default_factory=list)        # measured claims, in send order
    latency_ms: dict[str, float] = field(default_factory=dict)  # the verdict's own latency_ms
    arrival_s: dict[str, float] = field(default_factory=dict)   # arrival here − send time
    verdicts: dict = field(default_factory=dict)                # claim id → Verdict
    worker_ready_s: float = 0.0
    seconds: float = 0.0
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)   # os.getloadavg() before / after
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)


def run_sequential(settings: Settings, records: Sequence, warm_records: Sequence = (), pipeline: str | None = None,
                   timeout_s: float = 120.0, ready_timeout_s: float = 600.0,
                   progress: Callable[[int], None] | None = None) -> SequentialRun:
    """Embedded broker (unless one is configured) and one worker child (default checker, or the
    hidden `--pipeline` spec); `records` sent one at a time. A verdict missing after `timeout_s`
    raises with the worker log's tail. `progress(i)` after each measured record."""
    import os

    out = SequentialRun(load_before=os.getloadavg())
    work = Path(tempfile.mkdtemp(prefix="dialcheck-seq-"))
    t0 = time.monotonic()
    try:
        with kafka_for(settings, log_path=str(work / "broker.log")) as s:
            ensure_topics(s)
            start = end_offsets(s, s.kafka.topic_verdicts)
            with WorkerProcess(s, work / "worker.log", extra_args=["--pipeline", pipeline] if pipeline else []) as worker:
                t_ready = time.monotonic()
                worker.wait_ready(timeout_s=ready_timeout_s)
                out.worker_ready_s = round(time.monotonic() - t_ready, 1)
                with VerdictFollower(s, start) as follower, TurnProducer(s) as producer:
                    log = follower.log
                    plan = [(r, WARM_PREFIX) for r in warm_records] + [(r, "") for r in records]
                    for i, (rec, prefix) in enumerate(plan):
                        cid = response_claim_id(rec, prefix)
                        sent = replay(s, [rec], prefix=prefix, producer=producer).sent_at[cid]
                        if not follower.wait(lambda lg: cid in lg.verdicts, time.monotonic() + timeout_s, worker.alive):
                            raise RuntimeError(f"no verdict for {rec.id} within {timeout_s:g} s (worker alive: "
                                               f"{worker.alive()}); worker log tail:\n{worker.log_text()[-3000:]}")
                        if prefix:
                            continue
                        v = log.verdicts[cid]
                        out.claim_ids.append(cid)
                        out.verdicts[cid] = v
                        out.arrival_s[cid] = log.received_at[cid] - sent
                        if v.latency_ms is not None:
                            out.latency_ms[cid] = float(v.latency_ms)
                        if progress:
                            progress(i - len(warm_records))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out.seconds = round(time.monotonic() - t0, 1)
    out.load_after = os.getloadavg()
    return out
