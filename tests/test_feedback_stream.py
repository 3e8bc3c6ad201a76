"""chat.feedback through a real worker on a real embedded Tansu broker: judgements are validated,
bad ones dead-lettered with a reason, good ones stored and joined to the verdicts the worker
published; a worker SIGKILLed during feedback ingestion loses no judgement and stores none twice.

Why: feedback is what calibration and the drift alarm count; the stream is at-least-once, so the
store must make redelivery harmless, and the ack must never outrun the store's commit. The
model-free stand-in Checker (tests/stream_standin.py): the NLP is not under test here."""
from __future__ import annotations

import threading
import time
import urllib.request

import orjson
import pytest

from schemas import ChatTurn, Verdict, claim_id
from schemas.settings import load_settings
from streams.feedback_store import FeedbackStore
from streams.observability import METRICS_MARKER
from streams.replay import TurnProducer
from streams.topics import ensure_topics
from streams.verdicts import VerdictLog, collect_verdicts, end_offsets, read_dead_letters
from streams.worker import WorkerProcess
from tests.waiting import wait_until

pytestmark = pytest.mark.broker

STANDIN = ["--pipeline", "tests.stream_standin:create"]


def stream_settings(bootstrap: str, tmp_path, name: str, partitions: int = 2, store: str | None = None):
    """Settings for one test's topics; the feedback store a SQLite file in tmp_path unless `store` names one."""
    s = load_settings(kafka={"bootstrap": bootstrap, "topic_partitions": partitions, "topic_turns": f"{name}.turns",
                             "topic_verdicts": f"{name}.verdicts", "topic_deadletter": f"{name}.dead",
                             "topic_feedback": f"{name}.feedback", "topic_knowledge": f"{name}.knowledge"},
                      stream={"app_id": name, "status_interval_s": 1.0, "trace_records": True,
                              "feedback_store": store or str(tmp_path / "feedback.sqlite3")})
    ensure_topics(s)
    return s


def judgement(v, judgement: str, i: int, **kw) -> dict:
    return {"conversation_id": v.conversation_id, "turn_id": v.turn_id, "claim_id": v.claim_id,
            "label_shown": v.label, "judgement": judgement, "source": "annotator", "ts": 1_000_000.0 + i,
            "feedback_id": f"fb-{i}", "shown": True, **kw}


def send_feedback(s, records: list[tuple[bytes | None, bytes | None]], pause_s: float = 0.0) -> None:
    with TurnProducer(s) as p:
        for key, value in records:
            p.producer.send(s.kafka.topic_feedback, key=key, value=value).get(timeout=30)
            if pause_s:
                time.sleep(pause_s)


def publish(s, worker, turns: list[ChatTurn], wait_s: float) -> dict[str, Verdict]:
    """Send the turns to a running worker; their verdicts by claim id (each turn one claim)."""
    ids = {claim_id(t.conversation_id, t.turn_id, t.text) for t in turns}
    start = end_offsets(s, s.kafka.topic_verdicts)
    with TurnProducer(s) as p:
        for t in turns:
            p.send_turn(t)
        p.flush()
    vlog = collect_verdicts(s, ids, wait_s, start=start, log=VerdictLog(), alive=worker.alive)
    assert ids <= vlog.verdicts.keys(), "worker did not answer every claim:\n" + worker.log_text()[-3000:]
    return {cid: vlog.verdicts[cid] for cid in ids}


def stored(s) -> int:
    with FeedbackStore(s.stream.feedback_store) as st:
        return st.counts()["feedback"]


def publish_turns(s, n: int, prefix: str, worker) -> list[Verdict]:
    """n one-claim turns under conversations `prefix-000`…; their verdicts (`publish`, 180 s)."""
    turns = [ChatTurn(f"{prefix}-{i:03d}", f"{prefix}-{i:03d}#r", "assistant", f"Claim number {i} of {prefix}.", check=True)
             for i in range(n)]
    return list(publish(s, worker, turns, 180).values())


@pytest.mark.timeout(600)
def test_feedback_is_stored_joined_and_bad_records_dead_lettered(fresh_broker, tmp_path):
    s = stream_settings(fresh_broker.bootstrap, tmp_path, "fbs")
    with WorkerProcess(s, tmp_path / "worker.log", extra_args=STANDIN) as w:
        w.wait_ready(180)
        verdicts = publish_turns(s, 12, "fbs", w)
        wait_until(lambda: FeedbackStore(s.stream.feedback_store).counts()["verdicts"] >= 12, 60,
                   "the worker did not keep its verdicts")
        good = [(v.conversation_id.encode(), orjson.dumps(judgement(v, "right" if i % 3 else "wrong", i)))
                for i, v in enumerate(verdicts)]
        v0 = verdicts[0]
        bad = [(b"fbs-x", b"{not json"),
               (b"somebody-else", orjson.dumps(judgement(v0, "right", 100))),  # key is not the conversation
               (v0.conversation_id.encode(), orjson.dumps(judgement(v0, "maybe", 101))),
               (v0.conversation_id.encode(), None)]
        dead_start = end_offsets(s, s.kafka.topic_deadletter)
        send_feedback(s, good[:6] + bad + good[6:] + good[:3])  # the first three twice: a redelivery
        wait_until(lambda: stored(s) >= len(good), 120, "feedback not stored")
        wait_until(lambda: len(read_dead_letters(s, dead_start)) >= len(bad), 60, "bad feedback not dead-lettered")
        dead = read_dead_letters(s, dead_start)
        status = w.wait_for("feedback=", 30)
    assert sorted(d.code for d in dead) == ["key", "malformed_json", "schema", "tombstone"]
    assert all(d.topic == s.kafka.topic_feedback and 0 < len(d.reason) < 400 for d in dead)
    with FeedbackStore(s.stream.feedback_store) as st:
        judged = st.judged()
        counts = st.counts()
    assert counts["feedback"] == len(good) and counts["unjoined"] == 0  # no duplicate rows, every one joined
    assert {j.claim_id for j in judged} == {v.claim_id for v in verdicts}
    for j in judged:  # joined to the verdict it judges, kept as published
        assert j.verdict["claim_id"] == j.claim_id and j.verdict["label"] == j.label_shown
    assert counts["judgement"] == {"right": 8, "wrong": 4, "unsure": 0}
    assert "feedback=" in status


@pytest.mark.timeout(600)
@pytest.mark.flaky(reruns=1)
def test_kill9_during_feedback_ingestion_loses_nothing_and_stores_nothing_twice(fresh_broker, tmp_path,
                                                                               feedback_store_url):
    """SIGKILL while judgements stream in; a restarted worker picks up from the last committed
    offset. The store must end with every judgement exactly once (the natural key + upsert), and the
    redelivered ones must have been seen again (else the kill tested nothing). On both stores: a
    SQLite file, a PostgreSQL database (the killed worker's open transaction rolled back by the server)."""
    n = 300
    s = stream_settings(fresh_broker.bootstrap, tmp_path, "fbk", partitions=1, store=feedback_store_url)
    log = tmp_path / "worker.log"
    with WorkerProcess(s, log, extra_args=STANDIN) as first:
        first.wait_ready(180)
        verdicts = publish_turns(s, 30, "fbk", first)
        records = [(v.conversation_id.encode(), orjson.dumps(judgement(v, "right" if i % 4 else "wrong", i)))
                   for i, v in ((i, verdicts[i % len(verdicts)]) for i in range(n))]
        producer = threading.Thread(target=send_feedback, args=(s, records, 0.02))
        producer.start()
        wait_until(lambda: stored(s) >= 60, 120, "no feedback stored before the kill")
        first.kill9()
        at_kill = stored(s)
        producer.join()
    assert at_kill < n, "all feedback was in before the kill: nothing was tested"
    with WorkerProcess(s, log, extra_args=STANDIN) as second:
        second.wait_ready(180)
        wait_until(lambda: stored(s) >= n, 180, f"feedback lost: {stored(s)} of {n} stored after the restart")
        time.sleep(3)  # anything still redelivered lands now
        # offsets the restarted worker wrote to the store ("trace feedback stored 0@12 0@13 ...")
        rewritten = [tok for ln in second.log_text().splitlines() if "trace feedback stored" in ln
                     for tok in ln.split("trace feedback stored", 1)[1].split()]
    with FeedbackStore(s.stream.feedback_store) as st:
        judged = st.judged()
    keys = [(j.source, j.conversation_id, j.turn_id, j.claim_id, j.ts) for j in judged]
    again = len(rewritten) - (n - at_kill)  # records stored before the kill, uncommitted, so written twice
    print(f"killed with {at_kill} of {n} judgements stored; the restarted worker wrote {len(rewritten)}, "
          f"{again} of them already stored (redelivered)")
    assert len(judged) == n and len(set(keys)) == n  # none lost, none twice
    assert {j.ts for j in judged} == {1_000_000.0 + i for i in range(n)}
    assert len(rewritten) >= n - at_kill


@pytest.mark.timeout(600)
def test_live_precision_and_the_alarm_on_metrics(fresh_broker, tmp_path):
    from prometheus_client.parser import text_string_to_metric_families

    s = stream_settings(fresh_broker.bootstrap, tmp_path, "fbm")
    with WorkerProcess(s, tmp_path / "worker.log", extra_args=STANDIN) as w:
        w.wait_ready(180)
        base = w.wait_for(METRICS_MARKER, 30).split(METRICS_MARKER, 1)[1].strip()
        verdicts = publish_turns(s, 20, "fbm", w)
        # SUPPORTS badges judged right 9 of 10, REFUTES badges 1 of 10: REFUTES must alarm at target 0.85
        recs = []
        for i in range(20):
            label = "SUPPORTS" if i < 10 else "REFUTES"
            right = (i < 9) if label == "SUPPORTS" else (i == 10)
            v = verdicts[i]
            recs.append((v.conversation_id.encode(), orjson.dumps(
                {**judgement(v, "right" if right else "wrong", i), "label_shown": label, "confidence_shown": "medium"})))
        send_feedback(s, recs)
        wait_until(lambda: stored(s) >= 20, 120, "feedback not stored")
        time.sleep(2.5)  # the gauges are cached for 2 s
        with urllib.request.urlopen(base, timeout=10) as r:
            body = r.read().decode()
    got = {(x.name, x.labels.get("label") or x.labels.get("judgement")): x.value
           for fam in text_string_to_metric_families(body) for x in fam.samples}
    from streams.precision import clopper_pearson

    assert got[("dialcheck_shown_precision", "SUPPORTS")] == pytest.approx(0.9)
    lo, hi = clopper_pearson(9, 10, 0.9)
    assert got[("dialcheck_shown_precision_lower", "SUPPORTS")] == pytest.approx(lo)
    assert got[("dialcheck_shown_precision_upper", "SUPPORTS")] == pytest.approx(hi)
    assert got[("dialcheck_shown_judged", "SUPPORTS")] == 10 and got[("dialcheck_shown_judged", "high")] == 0
    assert got[("dialcheck_precision_alarm", "SUPPORTS")] == 0 and got[("dialcheck_precision_alarm", "REFUTES")] == 1
    assert got[("dialcheck_precision_target", "REFUTES")] == pytest.approx(0.85)
    assert got[("dialcheck_feedback_total", "right")] == 10 and got[("dialcheck_feedback_total", "wrong")] == 10
