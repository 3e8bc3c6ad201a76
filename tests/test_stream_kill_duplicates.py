"""A worker SIGKILLed mid-stream loses no claim, and the duplicates its restart publishes are at
most the turns whose offsets were not yet committed when it died (at-least-once, measured).

Why: the stream promises at-least-once with outputs delivered before the offset commit; the
duplicates a crash costs had never been counted. The committed offset is read from the broker
after the kill (a SIGKILLed process commits nothing more), so the bound is exact, not estimated.
A real Tansu broker and a real worker; the model-free stand-in Checker (tests/stream_standin.py)."""
from __future__ import annotations

import threading
import time
from collections import Counter

import orjson

import pytest

from schemas import ChatTurn, claim_id
from schemas.settings import load_settings
from streams.replay import TurnProducer
from streams.topics import ensure_topics
from streams.verdicts import TopicReader, VerdictLog, collect_verdicts, end_offsets
from streams.worker import WorkerProcess
from tests.waiting import wait_until

pytestmark = pytest.mark.broker

STANDIN = ["--pipeline", "tests.stream_standin:create"]
N = 40


def committed(settings, partition: int = 0) -> int:
    """The consumer group's committed offset of the turns topic (0 when none), read without joining."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=settings.kafka.bootstrap, group_id=settings.stream.app_id,
                      enable_auto_commit=False)
    try:
        return c.committed(TopicPartition(settings.kafka.topic_turns, partition)) or 0
    finally:
        c.close()


def explain(claims: set[str], conv_of: dict, offsets: dict, at_kill: int, log) -> str:
    """For a failure message: each extra duplicate's turn offset against the committed one, and the
    worker log's trace lines reading that offset (both workers write to `log`, the first one first)."""
    out = []
    for c in sorted(claims)[:5]:
        off = offsets[conv_of[c]]
        reads = [ln.strip()[-90:] for ln in open(log, errors="replace") if ln.rstrip().find(f"@{off} turn ") >= 0]
        out.append(f"{c}: offset {off} (committed {at_kill}), reads {reads}")
    starts = sum(1 for ln in open(log, errors="replace") if "dialcheck worker ready" in ln)
    return f"{'; '.join(out)}; worker starts logged: {starts}"


@pytest.mark.timeout(600)
# Failed in full-suite CI runs (never alone here): the restarted worker checked its whole backlog twice
# (31 of 31 turns), once from the turns kept queued before the seek (faust #596 patch) and once re-fetched
# after it; fixed by streams/kafka/internals.py point 4. trace_records lets a failure say which worker read what.
@pytest.mark.flaky(reruns=1)
def test_kill_mid_stream_duplicates_at_most_the_uncommitted_turns(fresh_broker, tmp_path):
    s = load_settings(kafka={"bootstrap": fresh_broker.bootstrap, "topic_partitions": 1, "topic_turns": "kd.turns",
                             "topic_verdicts": "kd.verdicts", "topic_deadletter": "kd.dead"},
                      stream={"app_id": "killdup", "status_interval_s": 1.0, "trace_records": True})
    ensure_topics(s)
    turns = [ChatTurn(f"kd-{i:02d}", f"kd-{i:02d}#r", "assistant", f"Claim number {i} is made.", check=True)
             for i in range(N)]
    ids = {claim_id(t.conversation_id, t.turn_id, t.text) for t in turns}
    offsets: dict[str, int] = {}
    start = end_offsets(s, s.kafka.topic_verdicts)
    vlog = VerdictLog()
    log = tmp_path / "worker.log"
    with WorkerProcess(s, log, extra_args=STANDIN) as first:
        first.wait_ready(180)

        def produce():
            with TurnProducer(s) as p:
                for t in turns:
                    offsets[t.conversation_id] = p.send_turn(t).get(timeout=30).offset
                    time.sleep(0.15)
        producer = threading.Thread(target=produce)
        producer.start()
        # kill once some turns are checked and at least one offset commit happened (else the bound is trivial)
        collect_verdicts(s, ids, 120, start=start, log=vlog, alive=first.alive, done=lambda lg: len(lg.verdicts) >= 10)
        wait_until(lambda: committed(s) >= 5, 60, "the worker never committed 5 offsets")
        first.kill9()
        killed_at = time.time()
        producer.join()
    at_kill = committed(s)  # the dead worker commits nothing more
    with WorkerProcess(s, log, extra_args=STANDIN) as second:
        second.wait_ready(180)
        collect_verdicts(s, ids, 180, start=start, log=vlog, alive=second.alive)
    assert ids <= vlog.verdicts.keys(), f"lost {len(ids - vlog.verdicts.keys())} claims"
    # the uncommitted batch: turns at or past the committed offset whose verdict was out before the kill
    conv_of = {v.claim_id: v.conversation_id for v in vlog.verdicts.values()}
    uncommitted_out = {c for c, v in vlog.verdicts.items()
                       if offsets[conv_of[c]] >= at_kill and v.created_at < killed_at}
    with TopicReader(s, s.kafka.topic_verdicts, start) as r:
        copies = Counter(orjson.loads(rec.value)["claim_id"] for rec in r.drain())
    duplicated = {c for c, n in copies.items() if n > 1}
    print(f"killed with {at_kill} of {N} turns committed and {len(uncommitted_out)} uncommitted turns answered: "
          f"{sum(copies.values()) - len(copies)} duplicates ({len(duplicated)} claims)")
    assert at_kill > 0  # a commit happened before the kill: the bound below is not trivial
    assert duplicated <= uncommitted_out, ("a turn below the committed offset was checked again: "
                                           + explain(duplicated - uncommitted_out, conv_of, offsets, at_kill, log))
    assert sum(copies.values()) - len(copies) <= len(uncommitted_out)  # at most one extra copy each
