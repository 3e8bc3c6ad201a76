"""The stream worker against a real Tansu broker and a real worker process, with the real Pipeline.

One broker and one worker process for the module (model loading is the slow part); the tests run
in file order and the crash test replaces the worker with a fresh one.

Why each test: stream and batch must give the same labels for the same input (one pipeline, two
transports); at-least-once plus claim-id dedup must lose nothing across `kill -9`; the context
table must come back from its changelog; bad input must go to the dead-letter topic, not wedge
the worker or drop its neighbours; a grounded turn (replay --protocol fv) must be checked against
its own passages exactly as `eval --protocol fv` checks the record.
"""
from __future__ import annotations

import os
import threading
import time

import pytest

from schemas.settings import Settings, load_settings
from dialcheck.wiring import DEFAULT_CHECKER, load_checker
from streams.replay import TurnProducer, iter_claim_ids, load_records, record_turns, replay
from streams.verdicts import VerdictLog, collect_verdicts, end_offsets, read_dead_letters
from streams.worker import WorkerProcess
from schemas.protocols import turn_verdicts

pytestmark = pytest.mark.broker

DATA = load_settings().data.dialfact_sample
# a stand-in factory may be named for developing the wiring; CI uses the real pipeline
PIPELINE = os.environ.get("DIALCHECK_TEST_STREAM_PIPELINE", DEFAULT_CHECKER)
N_MAIN, N_CRASH_CTX, N_CRASH, N_BAD_GOOD = 50, 5, 15, 3



@pytest.fixture(scope="module")
def records():
    # disjoint slices so each test's claims are its own
    recs = load_records(DATA, N_MAIN + N_CRASH_CTX + N_CRASH + N_BAD_GOOD)
    return {"main": recs[:N_MAIN], "crash_ctx": recs[N_MAIN:N_MAIN + N_CRASH_CTX],
            "crash": recs[N_MAIN + N_CRASH_CTX:N_MAIN + N_CRASH_CTX + N_CRASH],
            "bad_good": recs[N_MAIN + N_CRASH_CTX + N_CRASH:]}


@pytest.fixture(scope="module")
def settings_kafka(broker_settings):
    # trace_records: a lost claim's failure message can quote what the worker read, delivered and acked
    s = broker_settings(stream={"status_interval_s": 1.0, "trace_records": True})
    if PIPELINE == DEFAULT_CHECKER and s.retrieval.backend == "embedded":
        from workers.retrieval.build import ensure_index
        ensure_index(s)
    return s


@pytest.fixture(scope="module")
def batch_verdicts(settings_kafka, records):
    """The Kafka-free path: the same Pipeline, called directly on every record this module streams."""
    pipeline = load_checker(settings_kafka, PIPELINE)
    recs = [r for group in records.values() for r in group]
    verdicts = turn_verdicts(pipeline.check_turns([r.to_check_item("e2e") for r in recs]))
    return {v.claim_id: v for v in verdicts}


@pytest.fixture(scope="module")
def worker(settings_kafka, tmp_path_factory, batch_verdicts):
    holder = {"log": tmp_path_factory.mktemp("worker") / "worker.log"}
    holder["w"] = WorkerProcess(settings_kafka, holder["log"], extra_args=["--pipeline", PIPELINE]).start()
    holder["w"].wait_ready(timeout_s=300)
    yield holder
    holder["w"].stop()


def wait_committed(settings: Settings, end: dict[int, int], timeout_s: float = 60.0) -> None:
    """Until the worker's consumer group has committed chat.turns up to `end` (partition → offset)."""
    from kafka import KafkaAdminClient

    from streams.kafka_config import kafka_python_kwargs

    admin = KafkaAdminClient(**kafka_python_kwargs(settings))
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            committed = {tp.partition: om.offset for tp, om in
                         admin.list_group_offsets(settings.stream.app_id)[settings.stream.app_id].items()
                         if tp.topic == settings.kafka.topic_turns}
            if all(committed.get(p, -1) >= off for p, off in end.items()):
                return
            time.sleep(0.5)
    finally:
        admin.close()
    raise TimeoutError(f"consumer group did not commit up to {end}")


def where_lost(settings: Settings, missing: set[str], records: list, worker_log) -> str:
    """For a failure message: is each missing claim's turn on chat.turns, its verdict on
    chat.verdicts (read again from the beginning), and what did the worker log about it? Tells a
    worker that dropped an input from a reader that missed an output."""
    from streams.verdicts import TopicReader

    with TopicReader(settings, settings.kafka.topic_verdicts) as r:
        on_topic = {v.claim_id for v in (VerdictLog().add_raw(rec.value) for rec in r.drain()) if v} & missing
    turn_ids = {f"{rec.id}#response": cid for rec in records for cid in iter_claim_ids([rec]) if cid in missing}
    with TopicReader(settings, settings.kafka.topic_turns) as r:
        sent = [(rec.partition, rec.offset) for rec in r.drain() if any(t.encode() in rec.value for t in turn_ids)]
    logged = [ln[:300] for ln in open(worker_log, errors="replace") if any(t in ln for t in turn_ids)][-10:]
    return (f"verdict on chat.verdicts from the beginning: {sorted(on_topic)}; response turns on chat.turns at "
            f"(partition, offset) {sent}; worker log lines naming them: {logged}")


def assert_same_as_batch(got: dict, batch: dict, ids: list[str]) -> None:
    assert set(ids) <= got.keys(), f"missing verdicts: {sorted(set(ids) - got.keys())[:5]}"
    diff = [(i, got[i].label, batch[i].label) for i in ids if got[i].label != batch[i].label]
    assert not diff, f"{len(diff)} labels differ between stream and batch: {diff[:5]}"
    surf = [(i, got[i].surface.text, batch[i].surface.text) for i in ids if got[i].surface.text != batch[i].surface.text]
    assert not surf, f"{len(surf)} checked surfaces differ (context?): {surf[:3]}"


def test_replay_gives_one_verdict_per_claim_with_batch_labels(settings_kafka, worker, records, batch_verdicts):
    recs = records["main"]
    expected = iter_claim_ids(recs)
    start = end_offsets(settings_kafka, settings_kafka.kafka.topic_verdicts)
    stats = replay(settings_kafka, recs, rate=0)
    assert stats.records == N_MAIN
    vlog = collect_verdicts(settings_kafka, set(expected), timeout_s=600, start=start, alive=worker["w"].alive)
    assert sorted(vlog.verdicts) == sorted(expected)  # exactly one per claim id after dedup, nothing else
    assert not vlog.schema_errors and not vlog.invalid
    assert_same_as_batch(vlog.verdicts, batch_verdicts, expected)


BAD_EVENTS = [  # (key, value, expected reason fragment)
    (b"bad-1", b'{"conversation_id": "bad-1", "turn_id": "t", "speaker": "assistant", "text": "x"', "malformed JSON"),
    (b"bad-2", b'{"conversation_id": "bad-2", "turn_id": "t", "speaker": "assistant"}', "text"),
    (b"bad-3", b'{"conversation_id": "bad-3", "turn_id": "t", "speaker": 7, "text": "x"}', "speaker"),
    (b"bad-4", b'{"conversation_id": "bad-4", "turn_id": "t", "speaker": "bot", "text": "x", "check": "yes"}', "check"),
    (b"bad-5", b'{"conversation_id": "bad-5", "turn_id": "t", "speaker": "bot", "text": "caf\xe9"}', "invalid UTF-8"),
    (b"bad-6", b'{"conversation_id": "bad-6", "turn_id": "t", "speaker": "bot", "text": "   "}', "empty text"),
    (b"bad-7", b'{"conversation_id": "bad-7", "turn_id": "t", "speaker": "bot", "text": "' + b"a" * 4001 + b'"}',
     "too long"),
    (b"bad-8", b'[1, 2, 3]', "schema"),
    (b"bad-9", b'{"conversation_id": "bad-9", "turn_id": "t", "speaker": "bot", "text": "x", "extra": 1}',
     "Additional properties"),
    (b"wrong-key", b'{"conversation_id": "bad-10", "turn_id": "t", "speaker": "bot", "text": "x"}', "does not match"),
    (None, b'{"conversation_id": "bad-11", "turn_id": "t", "speaker": "bot", "text": "x"}', "missing key"),
    (b"bad-12", None, "null value"),
]


def test_bad_input_goes_to_deadletter_and_loses_nothing_else(settings_kafka, worker, records, batch_verdicts):
    good = records["bad_good"]
    start_v = end_offsets(settings_kafka, settings_kafka.kafka.topic_verdicts)
    start_d = end_offsets(settings_kafka, settings_kafka.kafka.topic_deadletter)
    sent = {}  # (key, value) of each bad event -> the broker's acknowledgement (partition, offset)
    with TurnProducer(settings_kafka) as producer:
        for i, rec in enumerate(good):  # good turns interleaved with the bad ones, same partitions too
            for t in record_turns(rec):
                producer.send_turn(t)
            for key, value, _ in BAD_EVENTS[i::len(good)]:
                sent[(key, value if value is not None else b"")] = producer.send_raw(key, value)
    sent = {k: f.get(timeout=30) for k, f in sent.items()}
    expected = iter_claim_ids(good)
    vlog = collect_verdicts(settings_kafka, set(expected), timeout_s=300, start=start_v, alive=worker["w"].alive)
    assert_same_as_batch(vlog.verdicts, batch_verdicts, expected)
    deadline = time.monotonic() + 60
    dead = read_dead_letters(settings_kafka, start_d)
    while len(dead) < len(BAD_EVENTS) and time.monotonic() < deadline:
        time.sleep(1)
        dead = read_dead_letters(settings_kafka, start_d)
    assert len(dead) == len(BAD_EVENTS)
    by_value = {(d.key, d.value): d for d in dead}
    for key, value, reason in BAD_EVENTS:
        d = by_value[(key, value if value is not None else b"")]  # original bytes preserved
        assert reason in d.reason, (reason, d.reason)
        # the dead letter points at the record it rejects: the original stays in chat.turns there
        source = sent[(key, value if value is not None else b"")]
        assert (d.topic, d.partition, d.offset) == (settings_kafka.kafka.topic_turns, source.partition, source.offset)
    assert worker["w"].alive()
    bad_convs = {f"bad-{i}" for i in range(1, 13)}
    assert not [v for v in vlog.verdicts.values() if v.conversation_id in bad_convs], "a bad event got a verdict"


def test_kill9_mid_replay_loses_no_claim_and_restores_context(settings_kafka, worker, records, batch_verdicts):
    ctx_recs, crash_recs = records["crash_ctx"], records["crash"]
    start_v = end_offsets(settings_kafka, settings_kafka.kafka.topic_verdicts)
    # 1. context turns of some conversations, processed and committed before the crash
    with TurnProducer(settings_kafka) as producer:
        for rec in ctx_recs:
            for t in record_turns(rec)[:-1]:
                producer.send_turn(t)
    wait_committed(settings_kafka, producer.sent_end)
    time.sleep(2 * settings_kafka.stream.status_interval_s)  # a status line from after the commit
    before = worker["w"].last_status()
    # 2. a replay in flight; kill -9 once some of its verdicts are out
    vlog = VerdictLog()
    crash_ids = set(iter_claim_ids(crash_recs))
    replay_errors: list[BaseException] = []

    def replay_in_background() -> None:
        try:
            replay(settings_kafka, crash_recs, rate=2.0)
        except BaseException as e:  # noqa: BLE001 - re-raised below: an input the broker lost is no worker's fault
            replay_errors.append(e)

    replayer = threading.Thread(target=replay_in_background)
    replayer.start()
    collect_verdicts(settings_kafka, crash_ids, timeout_s=300, start=start_v, log=vlog, alive=worker["w"].alive,
                     done=lambda lg: len(lg.verdicts.keys() & crash_ids) >= 3)
    n_before_crash = len(vlog.verdicts.keys() & crash_ids)
    assert 3 <= n_before_crash < len(crash_ids), n_before_crash
    worker["w"].kill9()
    replayer.join()
    assert not replay_errors, f"the replay itself failed: {replay_errors[0]!r}"
    # 3. restart: the table comes back from the changelog before any new input
    worker["w"] = WorkerProcess(settings_kafka, worker["log"], extra_args=["--pipeline", PIPELINE]).start()
    ready = worker["w"].wait_ready(timeout_s=300)
    restored = int(ready.rsplit("conversations=", 1)[1].split()[0])
    assert restored >= before["conversations"], (ready, before)  # nothing committed before the crash is lost
    # 4. the response turns of the pre-crash conversations are checked with their restored context
    with TurnProducer(settings_kafka) as producer:
        for rec in ctx_recs:
            producer.send_turn(record_turns(rec)[-1])
    expected = crash_ids | set(iter_claim_ids(ctx_recs))
    collect_verdicts(settings_kafka, expected, timeout_s=600, start=start_v, log=vlog, alive=worker["w"].alive)
    missing = expected - vlog.verdicts.keys()
    assert not missing, f"lost claims: {sorted(missing)[:5]}; " + where_lost(settings_kafka, missing, crash_recs + ctx_recs,
                                                                             worker["log"])
    assert_same_as_batch(vlog.verdicts, batch_verdicts, sorted(expected))


N_GROUNDED = 6  # DialFact records after the ones above, and as many BEGIN dev replies


def test_grounded_replay_gives_evals_fv_verdicts_from_its_own_passages(settings_kafka, worker, nli, encoder,
                                                                       data_dir, tmp_path):
    """`replay --protocol fv` through this (default) worker: each reply gets `eval --protocol fv`'s label
    and shown badge, its evidence is its own turn's passages, and the demo's scoring of the stream's
    verdicts is eval's score (the "Done when" equality, on a few records; docs/results.md has 300)."""
    if PIPELINE != DEFAULT_CHECKER:
        pytest.skip("a stand-in checker reads no passages")
    from dialcheck.commands.stream import _demo_metrics
    from lab.evaluation.dialfact_format import convert
    from lab.evaluation.replay_parity import parity
    from lab.evaluation.runs import label_rows
    from lab.evaluation.scoring import score_run
    from workers.pipeline import Pipeline

    begin = tmp_path / "begin.jsonl"
    convert("begin", data_dir, begin, limit=N_GROUNDED)
    used = N_MAIN + N_CRASH_CTX + N_CRASH + N_BAD_GOOD
    recs = [r for r in load_records(DATA, used + 3 * N_GROUNDED)[used:] if r.evidence][:N_GROUNDED]
    recs += load_records(str(begin))
    assert len(recs) == 2 * N_GROUNDED  # both kinds of record, each with its passages
    start = end_offsets(settings_kafka, settings_kafka.kafka.topic_verdicts)
    replay(settings_kafka, recs, rate=0, protocol="fv")
    vlog = collect_verdicts(settings_kafka, set(iter_claim_ids(recs)), timeout_s=600, start=start,
                            alive=worker["w"].alive)
    eval_pipe = Pipeline(settings_kafka, nli, encoder, None, protocol="fv", surface=settings_kafka.claims.surface)
    rows, _ = label_rows(eval_pipe, recs)  # `dialcheck eval --protocol fv`'s rows
    got = parity({c: v.to_dict() for c, v in vlog.verdicts.items()}, rows, recs)
    assert got["verdicts"] == len(recs) and got["same_label_and_shown_pct"] == 100.0, got
    assert got["own_evidence_pct"] == 100.0, got
    # checked against passages, not against nothing (a reply with nothing to check reads none)
    assert sum(bool(v.evidence) for v in vlog.verdicts.values()) >= len(recs) // 2
    demo = _demo_metrics(vlog.verdicts, recs)
    batch = score_run(rows, recs, "", protocol="fv")["surfaces"][settings_kafka.claims.surface]
    assert (demo["accuracy"], demo["macro_f1"]) == (batch["accuracy"], batch["macro_f1"])
