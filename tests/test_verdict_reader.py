"""The verdict reader cannot hang: every kafka-python call of a TopicReader is bounded, a stalled
reader raises ReaderStalled, and collect_verdicts goes on with a fresh reader from the offsets it
had reached, so no verdict is lost and no test waits forever.

A real broker and real records; the hang itself is simulated (kafka-python's `poll()` hang was
seen about one run in ten and cannot be produced on demand): the first `poll` blocks forever."""
from __future__ import annotations

import threading

import pytest

from schemas import ChatTurn
from schemas.settings import load_settings
from streams.checking import error_verdict
from streams.topics import ensure_topics
from streams.verdicts import ReaderStalled, TopicReader, collect_verdicts, end_offsets
from schemas.items import CheckItem


@pytest.fixture(scope="module")
def settings(broker):
    s = load_settings(kafka={"bootstrap": broker.bootstrap}, stream={"app_id": "reader"})
    ensure_topics(s)
    return s


def publish(settings, n: int, prefix: str) -> set[str]:
    from kafka import KafkaProducer

    ids = set()
    producer = KafkaProducer(bootstrap_servers=settings.kafka.bootstrap, acks="all")
    try:
        for i in range(n):
            v = error_verdict(CheckItem(f"{prefix}{i}", "t", [], f"claim {i}"), "test")
            ids.add(v.claim_id)
            producer.send(settings.kafka.topic_verdicts, key=v.conversation_id.encode(), value=v.to_json())
        producer.flush()
    finally:
        producer.close()
    return ids


@pytest.fixture
def hang_first_poll(monkeypatch):
    """kafka-python's KafkaConsumer.poll blocks forever on its first call in this test, then works."""
    from kafka import KafkaConsumer

    real, calls, release = KafkaConsumer.poll, [], threading.Event()

    def poll(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            release.wait()  # the hang (released at teardown so the abandoned thread ends)
            return {}
        return real(self, *args, **kwargs)

    monkeypatch.setattr(KafkaConsumer, "poll", poll)
    yield calls
    release.set()


def test_a_stalled_poll_raises_instead_of_hanging(settings, hang_first_poll):
    with TopicReader(settings, settings.kafka.topic_verdicts, call_timeout_s=1.0) as reader:
        with pytest.raises(ReaderStalled, match="poll did not return"):
            reader.poll(0.1)
        with pytest.raises(ReaderStalled, match="abandoned"):  # unusable from now on, never half-working
            reader.end_offsets()


def test_collect_verdicts_resumes_after_a_stall_and_loses_nothing(settings, hang_first_poll):
    start = end_offsets(settings, settings.kafka.topic_verdicts)
    ids = publish(settings, 5, "stall-")
    log = collect_verdicts(settings, ids, timeout_s=60, start=start, call_timeout_s=2.0)
    assert log.stalls == 1 and len(hang_first_poll) >= 2
    assert ids <= log.verdicts.keys() and log.duplicates == 0
