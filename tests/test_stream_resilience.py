"""Worker crashes on a real Tansu broker: scale-out takeover after SIGKILL, and poison quarantine.

Why: more worker processes in one consumer group is how dialcheck grows; when one dies, another
must take its partitions with their context tables restored and lose no claim. A turn whose
pipeline call kills the process on every delivery must end in the dead-letter topic, not in a
crash loop.

Only the Kafka wiring is exercised, so the workers run the model-free stand-in Checker of
tests/stream_standin.py (tests/test_stream_kafka.py runs the real pipeline).
"""
from __future__ import annotations

import threading
import time

import pytest

from schemas import ChatTurn, claim_id
from schemas.settings import Settings, load_settings
from streams.turn_worker import partition_of
from streams.replay import TurnProducer
from streams.topics import ensure_topics
from streams.verdicts import VerdictLog, collect_verdicts, end_offsets, read_dead_letters
from streams.worker import WorkerProcess
from tests.stream_standin import context_digest
from tests.waiting import wait_until

pytestmark = pytest.mark.broker

STANDIN = ["--pipeline", "tests.stream_standin:create"]


def stream_settings(broker, prefix: str, **stream) -> Settings:
    s = load_settings(kafka={"bootstrap": broker.bootstrap, "topic_partitions": 4, "topic_turns": f"{prefix}.turns",
                             "topic_verdicts": f"{prefix}.verdicts", "topic_deadletter": f"{prefix}.dead"},
                      stream={"app_id": prefix, "status_interval_s": 1.0, **stream})
    ensure_topics(s)
    return s


def conversation(conv: str, n_ctx: int = 3) -> tuple[list[ChatTurn], ChatTurn]:
    ctx = [ChatTurn(conv, f"{conv}#c{i}", "user" if i % 2 == 0 else "assistant", f"{conv} context turn {i}.",
                    check=False) for i in range(n_ctx)]
    return ctx, ChatTurn(conv, f"{conv}#r", "assistant", f"{conv} makes a claim.", check=True)


# kafka-python 3.0.x's test-side poll() was seen to block forever about 1 run in 10 here (the worker
# uses aiokafka): the timeout turns such a hang into a failure and the one rerun gets a fresh broker
@pytest.mark.timeout(420)
@pytest.mark.flaky(reruns=1)
def test_sigkilled_worker_partitions_taken_over_with_context_and_no_claim_lost(fresh_broker, tmp_path):
    broker = fresh_broker
    s = stream_settings(broker, "scaleout")
    convs = [f"so-{i:02d}" for i in range(40)]
    turns = {c: conversation(c) for c in convs}
    expected = {claim_id(c, r.turn_id, r.text): (c, context_digest([t.text for t in ctx])) for c, (ctx, r) in turns.items()}
    start_v = end_offsets(s, s.kafka.topic_verdicts)
    with WorkerProcess(s, tmp_path / "a.log", extra_args=STANDIN) as a, \
            WorkerProcess(s, tmp_path / "b.log", extra_args=STANDIN) as b:
        a.wait_ready(180)
        b.wait_ready(180)

        def split() -> bool:
            pa, pb = a.owned_partitions() or set(), b.owned_partitions() or set()
            return bool(pa) and bool(pb) and not pa & pb and pa | pb == {0, 1, 2, 3}
        wait_until(split, 90, "the two workers never split the 4 partitions", step=0.5)
        b_parts = b.owned_partitions()
        # 1. every conversation's context, processed (the table and its changelog hold it)
        with TurnProducer(s) as producer:
            for ctx, _ in turns.values():
                for t in ctx:
                    producer.send_turn(t)
        wait_until(lambda: sum(w.last_status()["events"] for w in (a, b)) >= 3 * len(convs), 90,
                   "context turns not processed", step=0.5)
        # 2. the claims, at a steady rate; SIGKILL b once a few verdicts are out
        vlog = VerdictLog()

        def produce_claims():
            with TurnProducer(s) as p:
                for c in convs:
                    p.send_turn(turns[c][1])
                    p.flush()
                    time.sleep(0.1)
        producer_thread = threading.Thread(target=produce_claims)
        producer_thread.start()
        collect_verdicts(s, set(expected), 120, start=start_v, log=vlog, done=lambda lg: len(lg.verdicts) >= 5)
        b.kill9()
        killed_at = time.time()
        producer_thread.join()
        collect_verdicts(s, set(expected), 180, start=start_v, log=vlog, alive=a.alive)
        assert set(expected) <= vlog.verdicts.keys(), f"lost: {len(set(expected) - vlog.verdicts.keys())} claims"
        wrong = [c for c, (_, d) in expected.items() if vlog.verdicts[c].model_versions["context_sha1"] != d]
        assert not wrong, f"{len(wrong)} claims checked against a wrong (unrestored) context"
        taken_over = [c for c, (conv, _) in expected.items()
                      if partition_of(conv.encode(), 4) in b_parts and vlog.received_at[c] > killed_at]
        assert taken_over, "no claim of the killed worker's partitions was answered after the kill"
        wait_until(lambda: a.owned_partitions() == {0, 1, 2, 3}, 30, "survivor does not own all partitions", step=0.5)
        assert a.alive()


def culprit_between_good(prefix: str, name: str, text: str):
    """Two good conversations and, between them, one whose checked turn says `text` (a stand-in
    instruction); also the claim ids the good ones must get verdicts for."""
    (g1c, g1), (cc, c), (g2c, g2) = (conversation(f"{prefix}-good-1"), conversation(f"{prefix}-{name}"),
                                     conversation(f"{prefix}-good-2"))
    c = ChatTurn(c.conversation_id, c.turn_id, "assistant", text)
    good = {claim_id(t.conversation_id, t.turn_id, t.text) for t in (g1, g2)}
    return (g1c, g1), (cc, c), (g2c, g2), good


def send_around(s: Settings, g1c, g2c, g1, culprit, g2):
    """The good conversations' context, then the culprit between their checked turns; where the
    culprit landed (its record metadata: partition, offset)."""
    with TurnProducer(s) as producer:
        futures = {t.turn_id: producer.send_turn(t) for t in [*g1c, *g2c, g1, culprit, g2]}
        producer.flush()
        return futures[culprit.turn_id].get(timeout=30)


# Seen to stall once (stop 33, full suite on 2 busy cores): after the first crash the restarted worker
# restored its context (turns=12) and was assigned every partition but received no event for 12
# minutes, the symptom of faust #596 that streams/kafka/internals.py patches; the unbounded loop below then
# hung the suite. Bounded like its siblings (a stall fails within minutes) with their one rerun on a
# fresh broker; the stall itself is not explained yet (issue note).
@pytest.mark.timeout(600)
@pytest.mark.flaky(reruns=1)
def test_turn_that_kills_the_worker_every_time_is_dead_lettered_as_poison(fresh_broker, tmp_path):
    broker = fresh_broker
    s = stream_settings(broker, "poison", poison_attempts=2)
    start_v = end_offsets(s, s.kafka.topic_verdicts)
    start_d = end_offsets(s, s.kafka.topic_deadletter)
    (g1c, g1), (kc, kill), (g2c, g2), good = culprit_between_good("po", "kill", "STANDIN-KILL this worker")
    log = tmp_path / "worker.log"
    w = WorkerProcess(s, log, extra_args=STANDIN)
    crashes = 0
    try:
        w.start().wait_ready(180)
        with TurnProducer(s) as producer:
            for t in [*g1c, *kc, *g2c, g1, kill, g2]:
                producer.send_turn(t)
        deadline = time.time() + 300
        while True:
            dead = [d for d in read_dead_letters(s, start_d) if d.reason.startswith("poison")]
            if dead:
                break
            assert time.time() < deadline, f"no poison dead letter within 300 s after {crashes} crash(es)"
            if not w.alive():
                crashes += 1
                assert crashes <= 3, "crash loop: the poison turn was never quarantined"
                # not wait_ready: a restarted worker can take the poison turn before its ready line is
                # out (seen on a loaded machine: killed before ready); the loop counts that exit too
                w = WorkerProcess(s, log, extra_args=STANDIN).start()
            time.sleep(1)
        assert crashes == 2 and dead[0].reason.startswith("poison: 2 failed attempts")
        assert dead[0].code == "poison"  # the machine code beside the human reason (schemas.Reason)
        assert dead[0].value == kill.to_json() and len(dead) == 1
        vlog = collect_verdicts(s, good, 120, start=start_v, alive=w.alive)
        assert good <= vlog.verdicts.keys()
        assert claim_id(kill.conversation_id, kill.turn_id, kill.text) not in vlog.verdicts
        time.sleep(2.5)
        assert w.alive() and w.last_status()["poison"] == 1
    finally:
        w.stop()


def committed(s: Settings) -> dict[int, int]:
    from kafka import KafkaAdminClient

    from streams.kafka_config import kafka_python_kwargs

    admin = KafkaAdminClient(**kafka_python_kwargs(s))
    try:
        offsets = admin.list_group_offsets(s.stream.app_id).get(s.stream.app_id, {})
        return {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == s.kafka.topic_turns}
    finally:
        admin.close()


# Seen to hang about 1 run in 4 in session 5: a restarted worker was assigned every partition but
# received no redelivered event (status events=0 for minutes). Explained in session 6: Faust cleared
# the redelivered batch from its queues when the flow resumed after recovery while its read offset had
# passed it (faust-streaming #596, patched in streams/kafka/internals.py); 6 of 6 runs passed after the
# patch. The loop stays bounded (a hang fails within minutes) and the one rerun stays as a safety net.
@pytest.mark.timeout(600)
@pytest.mark.flaky(reruns=1)
def test_undeliverable_verdict_stops_the_worker_without_commit_then_is_quarantined(fresh_broker, tmp_path):
    """A verdict larger than the producer's request size fails every send: after the retries the
    worker exits (75) without committing, the batch is redelivered (its good turns get their
    verdicts), and the attempt count makes the culprit a poison dead letter instead of a loop."""
    broker = fresh_broker
    s = stream_settings(broker, "sendfail", poison_attempts=2, send_retries=2, send_backoff_s=0.1)
    start_v = end_offsets(s, s.kafka.topic_verdicts)
    start_d = end_offsets(s, s.kafka.topic_deadletter)
    (g1c, g1), (_, huge), (g2c, g2), good = culprit_between_good("sf", "huge", "STANDIN-HUGE verdict")
    log = tmp_path / "worker.log"
    w = WorkerProcess(s, log, extra_args=STANDIN)
    exits = []
    try:
        w.start().wait_ready(180)
        huge_md = send_around(s, g1c, g2c, g1, huge, g2)
        deadline = time.time() + 300
        while True:
            if [d for d in read_dead_letters(s, start_d) if d.reason.startswith("poison")]:
                break
            assert time.time() < deadline, f"no poison dead letter within 300 s; worker exits so far: {exits}"
            if not w.alive():
                exits.append(w.proc.returncode)
                if len(exits) == 1:
                    assert "stopping without commit" in w.log_text()
                    assert committed(s).get(huge_md.partition, -1) <= huge_md.offset
                assert len(exits) <= 3, "crash loop"
                # not wait_ready: a restarted worker can take the poison turn before its ready line is
                # out (seen on a loaded machine: killed before ready); the loop counts that exit too
                w = WorkerProcess(s, log, extra_args=STANDIN).start()
            time.sleep(1)
        assert exits and set(exits) == {75}
        vlog = collect_verdicts(s, good, 120, start=start_v, alive=w.alive)
        assert good <= vlog.verdicts.keys() and w.alive()
    finally:
        w.stop()


@pytest.mark.timeout(420)
@pytest.mark.flaky(reruns=1)
def test_step_whose_handling_raises_is_dead_lettered_and_commits_move_past_it(fresh_broker, tmp_path):
    """Never a silent stall: when the worker's own handling of a step raises (here a pipeline result
    that is not a verdict), the step's undelivered turns get an `internal` dead letter, the step is
    acknowledged, the committed offset moves past the culprit, later turns get verdicts, and the
    status line counts it (`handle_failures`). Before, nothing was acked and the partition's commits
    stayed behind the culprit while the worker looked healthy."""
    broker = fresh_broker
    s = stream_settings(broker, "handlefail")
    start_v = end_offsets(s, s.kafka.topic_verdicts)
    start_d = end_offsets(s, s.kafka.topic_deadletter)
    (g1c, g1), (_, broken), (g2c, g2), good = culprit_between_good("hf", "broken", "STANDIN-BROKEN result")
    w = WorkerProcess(s, tmp_path / "worker.log", extra_args=STANDIN)
    try:
        w.start().wait_ready(180)
        md = send_around(s, g1c, g2c, g1, broken, g2)

        def internal():
            return [d for d in read_dead_letters(s, start_d) if d.code == "internal"]

        wait_until(lambda: bool(internal()), 120, "no internal dead letter")
        dead = internal()
        assert dead[0].value == broken.to_json() and dead[0].reason.startswith("internal error: AttributeError")
        vlog = collect_verdicts(s, good, 120, start=start_v, alive=w.alive)
        assert good <= vlog.verdicts.keys()
        wait_until(lambda: committed(s).get(md.partition, -1) > md.offset, 60,
                   "the committed offset did not move past the step that raised")
        wait_until(lambda: w.last_status().get("handle_failures") == 1, 30, "handle_failures not counted")
        assert w.alive() and "dead-lettered as internal" in w.log_text() and len(internal()) == 1
    finally:
        w.stop()
