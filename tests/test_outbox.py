"""The outbox's delivery guarantees (streams/outbox.py's docstring, numbered there), each checked
once against the outbox itself: a real embedded Tansu broker and a real Faust producer; the input
messages are Faust's own `Message` objects (their hold and ack need no broker).

What is not real: `_Flaky` makes a topic's first sends raise before they reach the producer, to
check "retry, then succeed"; nothing here can make a real broker refuse a record once and take it
the next time. The exhausted retry uses a real refusal (a record larger than a request may be).
The end-to-end kill, poison and soak tests check the same guarantees through a real worker."""
from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from types import SimpleNamespace

import faust
import pytest
from faust.types.tuples import Message

from schemas import Reason
from schemas.settings import REPO_ROOT, load_settings
from streams.kafka.acks import Acks
from streams.observability import Observability
from streams.outbox import Outbox
from streams.topics import ensure_topics
from streams.verdicts import TopicReader, read_dead_letters

pytestmark = pytest.mark.broker

SECRET = "hunter2-outbox-secret"


def settings_for(broker, name: str, **stream):
    s = load_settings(kafka={"bootstrap": broker.bootstrap, "topic_partitions": 1, "topic_turns": f"{name}.in",
                             "topic_verdicts": f"{name}.out", "topic_deadletter": f"{name}.dead",
                             "topic_feedback": f"{name}.fb", "sasl_password": SECRET},
                      stream={"send_backoff_s": 0.01, **stream})
    ensure_topics(s)
    return s


def run_with_outbox(s, body):
    """`body(outbox, out_topic)` on a fresh Faust app whose producer talks to the broker."""
    async def main():
        app = faust.App(f"outbox-{s.kafka.topic_turns}", broker=f"kafka://{s.kafka.bootstrap}",
                        producer_max_batch_size=1)
        out = app.topic(s.kafka.topic_verdicts, key_serializer="raw", value_serializer="raw")
        dead = app.topic(s.kafka.topic_deadletter, key_serializer="raw", value_serializer="raw")
        await app.producer.start()
        try:
            outbox = Outbox(app, s, dead_topic=dead, obs=Observability(s), acks=Acks(lambda: app.consumer))
            return await body(outbox, out)
        finally:
            await app.producer.stop()
    return asyncio.run(main())


def incoming(s, offset: int, value: bytes = b'{"turn": 1}') -> Message:
    """An input message as Faust's stream hands it over: one reference, taken by the stream."""
    m = Message(s.kafka.topic_turns, 0, offset, time.time(), 0, None, b"conv", value, None)
    m.incref()
    return m


def on_broker(s, topic: str) -> list[bytes]:
    with TopicReader(s, topic) as reader:
        return [r.value for r in reader.drain()]


def test_ack_only_after_every_output_is_delivered(broker):
    """Guarantees 1 and 2: Faust's own ack (take_events acks in a `finally`) does not ack a held
    message; the outputs are on the broker when `deliver` returns; the ack comes after."""
    s = settings_for(broker, "ob1")
    msgs = [incoming(s, n) for n in (3, 4)]
    seen = {}

    async def body(outbox, out):
        async with outbox.acks.holding([SimpleNamespace(message=m) for m in msgs]):
            for m in msgs:
                m.ack(None)  # what take_events does for the stream, whatever the handler did
            seen["before"] = [m.acked for m in msgs]
            await outbox.deliver([(out, b"conv", b"verdict-a", None), (out, b"conv", b"verdict-b", None)])
            seen["delivered"] = on_broker(s, s.kafka.topic_verdicts)
            seen["after delivery"] = [m.acked for m in msgs]
    run_with_outbox(s, body)
    assert seen["before"] == seen["after delivery"] == [False, False]
    assert seen["delivered"] == [b"verdict-a", b"verdict-b"]
    assert [m.acked for m in msgs] == [True, True]


def test_work_that_raises_acknowledges_nothing(broker):
    """Guarantee 1: when the batch's work raises, no message of it is acked (it is redelivered)."""
    s = settings_for(broker, "ob2")
    msgs = [incoming(s, n) for n in (0, 1)]

    async def body(outbox, out):
        with pytest.raises(RuntimeError, match="mid-batch"):
            async with outbox.acks.holding([SimpleNamespace(message=m) for m in msgs]):
                await outbox.deliver([(out, b"conv", b"first output", None)])
                for m in msgs:
                    m.ack(None)
                raise RuntimeError("mid-batch")
    run_with_outbox(s, body)
    assert [m.acked for m in msgs] == [False, False]


class _Flaky:
    """A real topic whose first `failures` sends raise before reaching the producer."""

    def __init__(self, topic, failures: int):
        self.topic, self.failures, self.calls = topic, failures, 0

    async def send(self, **kw):
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError(f"broker gone (password {SECRET})")
        return await self.topic.send(**kw)


def test_failed_sends_are_retried_with_backoff_and_delivered_once(broker, caplog, monkeypatch):
    """Guarantees 3 and 5: only the failed record is sent again after the settings' backoff, each
    retried round is counted, and the log line about it is scrubbed."""
    import schemas.retry

    s = settings_for(broker, "ob3", send_retries=4)
    counters = {}
    waits: list[float] = []

    async def recorded_sleep(seconds):
        waits.append(seconds)
        await asyncio.sleep(seconds)
    monkeypatch.setattr(schemas.retry, "_async_sleep", recorded_sleep)

    async def body(outbox, out):
        flaky = _Flaky(out, failures=2)
        await outbox.deliver([(out, b"conv", b"steady", None), (flaky, b"conv", b"flaky", None)])
        counters.update(send_retries=outbox.counters.send_retries, calls=flaky.calls)
    run_with_outbox(s, body)
    assert sorted(on_broker(s, s.kafka.topic_verdicts)) == [b"flaky", b"steady"]  # each once
    assert counters["send_retries"] == 2 and counters["calls"] == 3
    assert waits == [0.01, 0.02]  # backed off: first wait send_backoff_s, then doubled
    assert "sends failed" in caplog.text and SECRET not in caplog.text


EXHAUSTED = """
import asyncio, sys, time
from types import SimpleNamespace
import faust
from faust.types.tuples import Message
from schemas.settings import load_settings
from streams.observability import Observability
from streams.kafka.acks import Acks
from streams.outbox import Outbox

s = load_settings(kafka={{"bootstrap": "{bootstrap}"}}, stream={{"send_retries": 3, "send_backoff_s": 0.01}})

async def main():
    app = faust.App("outbox-exhausted", broker="kafka://{bootstrap}", producer_max_batch_size=1)
    out = app.topic("{topic}", key_serializer="raw", value_serializer="raw")
    await app.producer.start()
    outbox = Outbox(app, s, dead_topic=out, obs=Observability(s), acks=Acks(lambda: app.consumer))
    m = Message("in", 0, 7, time.time(), 0, None, b"conv", b"{{}}", None)
    async with outbox.acks.holding([SimpleNamespace(message=m)]):
        await outbox.deliver([(out, b"conv", b"x" * 2_000_000, None)])  # over the 1 MB request size
    print("ACKED", m.acked, flush=True)

asyncio.run(main())
"""


def test_a_send_that_keeps_failing_stops_the_process_without_ack(broker):
    """Guarantee 3: after `send_retries` attempts the process exits with 75 at once (no shutdown
    path, so no commit) and the held input is never acked. A real refusal: a 2 MB record."""
    s = settings_for(broker, "ob4")
    code = EXHAUSTED.format(bootstrap=broker.bootstrap, topic=s.kafka.topic_verdicts)
    proc = subprocess.run([sys.executable, "-c", code], cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 75, out[-2000:]
    assert "could not deliver 1 records after 3 attempts" in out and "stopping without commit" in out
    assert "ACKED" not in out
    assert on_broker(s, s.kafka.topic_verdicts) == []


def test_a_dead_letter_carries_the_input_a_scrubbed_reason_its_code_and_is_counted(broker):
    """Guarantees 4 and 5: the original bytes (cut to deadletter_max_bytes, and said so), the reason
    scrubbed of secrets and cut to max_reason_bytes, the code, the source coordinates; counted in
    the worker's counters and in dialcheck_dead_letters_total by code."""
    s = settings_for(broker, "ob5", deadletter_max_bytes=256, max_reason_bytes=64)
    big = b"y" * 1000
    msg = incoming(s, 42, value=big)
    got = {}

    async def body(outbox, out):
        record = outbox.dead_letter(msg, Reason.MALFORMED_JSON, f"not JSON; password {SECRET} " + "z" * 200)
        await outbox.deliver([record])
        got["counted"] = outbox.counters.deadlettered
        got["metric"] = outbox.obs.registry.get_sample_value("dialcheck_dead_letters_total",
                                                             {"reason": Reason.MALFORMED_JSON.value})
    run_with_outbox(s, body)
    (dl,) = read_dead_letters(s)
    assert (dl.code, dl.topic, dl.partition, dl.offset) == (Reason.MALFORMED_JSON.value, s.kafka.topic_turns, 0, 42)
    assert dl.value == big[:256] and dl.truncated == "value=1000" and dl.key == b"conv"
    assert dl.reason.startswith("not JSON; password ") and SECRET not in dl.reason
    assert len(dl.reason.encode()) <= 64
    assert got == {"counted": 1, "metric": 1.0}


def test_a_store_call_held_for_as_long_as_it_fails_reports_the_outage(tmp_path):
    """Work before the ack that is not a record (the feedback agent's judgements): retried past the
    5 attempts a bounded call gets, the store reported down while it fails (and the verdict path
    not even trying meanwhile), up again and the records stored once when it works. The store is a
    real SQLite FeedbackStore; its first seven writes raise SQLite's own "database is locked" before
    reaching it (a locked file takes the store's 30 s busy timeout per attempt: the end-to-end test
    of that is tests/test_feedback_store_locked.py)."""
    import sqlite3

    import orjson

    from schemas.feedback import parse_feedback
    from streams.checking import Scrubber
    from streams.feedback_store import FeedbackStore
    from streams.outbox import Counters, StoreDown, StoreWriter

    store = FeedbackStore(str(tmp_path / "feedback.sqlite3"))
    writer = StoreWriter(store, backoff_s=0.001, scrub=Scrubber([SECRET]), counters=Counters())
    seen = []

    def add_feedback(records):
        seen.append(writer.outage.states()["feedback_store"])
        if len(seen) <= 7:
            raise sqlite3.OperationalError(f"database is locked (password {SECRET})")
        return store.add_feedback(records)

    fb = [parse_feedback(orjson.dumps({"conversation_id": "c", "turn_id": "t", "claim_id": "x" * 20,
                                       "label_shown": "SUPPORTS", "judgement": "right", "source": "annotator",
                                       "ts": 1.0, "feedback_id": "f1", "shown": True}))]

    async def main():
        call = asyncio.ensure_future(writer.call(add_feedback, fb, attempts=None))
        while len(seen) < 3:
            await asyncio.sleep(0.001)
        down = dict(writer.outage.current())
        with pytest.raises(StoreDown):  # the verdict path does not queue behind the held call
            await writer.call_unless_down(store.add_verdicts, [])
        await call
        return down
    down = asyncio.run(main())
    assert seen == [False] + [True] * 7  # down from the first failure until the call went through
    assert "locked" in down["feedback_store"]["reason"] and SECRET not in down["feedback_store"]["reason"]
    assert writer.outage.states() == {"feedback_store": False} and writer.counters.store_retries == 7
    assert store.counts()["feedback"] == 1
