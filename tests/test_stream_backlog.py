"""A worker that starts on a backlog (and a context table to restore) checks every turn of it.

Why: this is where faust-streaming loses input (#596, patched in streams/kafka/internals.py): after table
recovery it resumes the input partitions before seeking them to the committed offsets; turns
fetched in between were queued, then cleared when the flow resumed, while Faust's read offset had
already passed them. Found by the kill -9 test (a restarted worker skipped six turns of one
partition, a conversation's response among them). The race needs the seek to be slow (a loaded
machine): this test does not force it (tests/test_stream_transport.py checks the patch itself, with
Faust's own behaviour beside it); it checks the whole start-on-backlog path end to end. A real
Tansu broker and real worker processes; the model-free stand-in Checker, slowed to a model's pace."""
from __future__ import annotations

import pytest

from schemas import ChatTurn, claim_id
from schemas.settings import load_settings
from streams.replay import TurnProducer
from streams.topics import ensure_topics
from streams.verdicts import VerdictLog, collect_verdicts, end_offsets
from streams.worker import WorkerProcess

pytestmark = pytest.mark.broker

STANDIN = ["--pipeline", "tests.stream_standin:create"]
SLOW = {"DIALCHECK_STANDIN_DELAY_S": "0.1"}


def conversation(i: int, n_context: int = 6) -> list[ChatTurn]:
    conv = f"bl-{i:03d}"
    turns = [ChatTurn(conv, f"{conv}#c{j}", "user" if j % 2 else "assistant", f"Context line {j} of {conv}.",
                      check=False) for j in range(n_context)]
    return turns + [ChatTurn(conv, f"{conv}#r", "assistant", f"Conversation {i} makes its claim.", check=True)]


def produce(settings, convs) -> set[str]:
    with TurnProducer(settings) as p:
        for turns in convs:
            for t in turns:
                p.send_turn(t)
    return {claim_id(ts[-1].conversation_id, ts[-1].turn_id, ts[-1].text) for ts in convs}


def where(ids: set[str], convs, log_text: str) -> str:
    """For a failure message: which response turns the worker never read."""
    names = [ts[-1].turn_id for ts in convs if claim_id(ts[-1].conversation_id, ts[-1].turn_id, ts[-1].text) in ids]
    unread = [n for n in names if f"turn {n}" not in log_text]
    return f"missing responses {names[:5]}; never read by the worker: {unread[:5]}"


@pytest.mark.timeout(900)
def test_worker_started_on_a_backlog_checks_every_turn(fresh_broker, tmp_path):
    s = load_settings(kafka={"bootstrap": fresh_broker.bootstrap, "topic_turns": "bl.turns",
                             "topic_verdicts": "bl.verdicts", "topic_deadletter": "bl.dead"},
                      stream={"app_id": "backlog", "status_interval_s": 1.0, "trace_records": True,
                              "take_checked": 16})  # the backlog's 54 responses: four steps
    ensure_topics(s)
    start = end_offsets(s, s.kafka.topic_verdicts)
    convs = [conversation(i) for i in range(60)]
    vlog = VerdictLog()
    log = tmp_path / "worker.log"
    # 1. a first worker checks (and commits) some conversations: committed offsets on some partitions
    with WorkerProcess(s, log, extra_args=STANDIN, env=SLOW) as first:
        first.wait_ready(180)
        early = produce(s, convs[:6])
        collect_verdicts(s, early, 180, start=start, log=vlog, alive=first.alive)
        assert early <= vlog.verdicts.keys()
    # 2. a backlog builds up while no worker runs (more than one step)
    late = produce(s, convs[6:])
    # 3. a fresh worker starts on it: every response is checked
    with WorkerProcess(s, log, extra_args=STANDIN, env=SLOW) as second:
        second.wait_ready(180)
        collect_verdicts(s, early | late, 300, start=start, log=vlog, alive=second.alive)
        missing = (early | late) - vlog.verdicts.keys()
        assert not missing, where(missing, convs, second.log_text())
