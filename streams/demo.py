"""`dialcheck demo`: the whole streaming path on one machine, start to finish, then a summary.

Embedded broker (unless one is configured) → `dialcheck worker` child process → replay of N
DialFact records plus a few deliberately bad events → verdicts collected and deduplicated, dead
letters counted → metrics against the records' gold labels. Everything it started, it stops.
"""
from __future__ import annotations

import collections
import tempfile
import time
from pathlib import Path

from schemas.settings import Settings

from .broker import kafka_for
from .replay import TurnProducer, iter_claim_ids, load_records, replay
from .topics import ensure_topics
from .verdicts import collect_verdicts, end_offsets, read_dead_letters, score
from .worker import WorkerProcess

# (key, value) pairs that must each land in the dead-letter topic
DEMO_BAD_EVENTS: list[tuple[bytes | None, bytes]] = [
    (b"demo-bad-1", b'{"conversation_id": "demo-bad-1", "turn_id": "t1", "speaker": "assistant", "text": '),
    (b"demo-bad-2", b'{"conversation_id": "demo-bad-2", "turn_id": "t1", "speaker": "assistant", "text": "   "}'),
]


def run_demo(settings: Settings, data: str, n_records: int, pipeline: str | None = None,
             bad_events: bool = True, progress: bool = False, work_dir: str | None = None,
             timeout_s: float | None = None) -> dict:
    records = load_records(data, n_records)
    expected = set(iter_claim_ids(records))
    bad = DEMO_BAD_EVENTS if bad_events else []
    work = Path(work_dir or tempfile.mkdtemp(prefix="dialcheck-demo-"))
    t0 = time.monotonic()
    with kafka_for(settings, log_path=str(work / "broker.log")) as s:
        ensure_topics(s)
        v_start, d_start = end_offsets(s, s.kafka.topic_verdicts), end_offsets(s, s.kafka.topic_deadletter)
        with WorkerProcess(s, work / "worker.log", extra_args=["--pipeline", pipeline] if pipeline else []) as worker:
            with TurnProducer(s) as producer:
                replay(s, records, rate=0, progress=progress, producer=producer)
                for key, value in bad:
                    producer.send_raw(key, value)
            vlog = collect_verdicts(s, expected, timeout_s or 180 + 10 * len(records), start=v_start,
                                    alive=worker.alive)
            dead = read_dead_letters(s, d_start)
            deadline = time.monotonic() + 30
            while len(dead) < len(bad) and worker.alive() and time.monotonic() < deadline:
                time.sleep(1)
                dead = read_dead_letters(s, d_start)
            worker_alive = worker.alive()
            log_tail = worker.log_text()[-2000:]
        broker = "embedded" if not settings.kafka.bootstrap else s.kafka.bootstrap
    got = {k: v for k, v in vlog.verdicts.items() if k in expected}
    summary = {
        "records": len(records), "claims": len(expected), "verdicts": len(got),
        "missing": len(expected - got.keys()), "duplicates_dropped": vlog.duplicates,
        "off_schema_verdicts": len(vlog.schema_errors), "unreadable_verdicts": vlog.invalid,
        "deadletter": len(dead), "deadletter_expected": len(bad),
        "deadletter_reasons": [d.reason for d in dead],
        "status": dict(collections.Counter(v.status.state for v in got.values())),
        "metrics": score(got, records), "broker": broker, "elapsed_s": round(time.monotonic() - t0, 1),
        "work_dir": str(work),
    }
    summary["ok"] = summary["missing"] == 0 and summary["deadletter"] == len(bad)
    if not summary["ok"]:
        summary["worker_alive"] = worker_alive
        summary["worker_log_tail"] = log_tail
    return summary
