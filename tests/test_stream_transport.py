"""The faust-streaming fixes in streams/kafka/internals.py, at unit level (no broker).

Why: two are at-least-once bugs that lose input silently (a commit over a turn still being checked;
queued turns cleared when the flow resumes); the third keeps the second's fix from checking a
restart's backlog twice (the seek after the kept fetch reads the same turns again). tests/test_stream_backlog.py shows the second end to
end with a real broker and worker."""
from __future__ import annotations

import asyncio
from collections import defaultdict
from types import SimpleNamespace

from intervaltree import IntervalTree
from mode.utils.queues import FlowControlEvent, FlowControlQueue

from faust.types import TP

from faust.transport.drivers import aiokafka as faust_aiokafka

import pytest

from streams.kafka.acks import Acks
from streams.kafka.internals import Consumer, ConsumerThread, KeepInputFlowControl

pytestmark = pytest.mark.unit

TURNS = TP("chat.turns", 0)


def consumer_with(committed: int | None, acked: list[int], gaps: IntervalTree | None = None) -> Consumer:
    """A Consumer carrying only the offset bookkeeping `_new_offset` reads."""
    c = Consumer.__new__(Consumer)
    c._committed_offset = defaultdict(lambda: None, {TURNS: committed})
    c._acked = defaultdict(list, {TURNS: list(acked)})
    c._acked_index = defaultdict(set, {TURNS: set(acked)})
    c._gap = defaultdict(IntervalTree, {TURNS: gaps if gaps is not None else IntervalTree()})
    return c


def test_no_commit_over_the_turn_in_flight_at_the_committed_offset():
    # faust-streaming #606: committed 2585 (next to read), 2585 still being checked, 2586-2589 acked:
    # Faust alone commits 2590 and a crash then skips 2585
    assert not Acks.may_commit(2585, [2586, 2587, 2588, 2589], IntervalTree())
    assert consumer_with(2585, [2586, 2587, 2588, 2589])._new_offset(TURNS) is None


def test_commits_the_contiguous_run_from_the_committed_offset():
    assert Acks.may_commit(2585, [2585, 2586, 2587], IntervalTree())
    assert consumer_with(2585, [2585, 2586, 2587, 2589])._new_offset(TURNS) == 2588


def test_a_known_gap_at_the_head_is_committed_over():
    gaps = IntervalTree()
    gaps.addi(2585, 2586)  # offset 2585 does not exist (e.g. compacted away): nothing is in flight there
    assert Acks.may_commit(2585, [2586, 2587], gaps)
    assert consumer_with(2585, [2586, 2587], gaps)._new_offset(TURNS) == 2588


def event(topic: str, offset: int):
    return SimpleNamespace(message=SimpleNamespace(topic=topic, offset=offset))


def queues(flow: FlowControlEvent) -> tuple[FlowControlQueue, FlowControlQueue]:
    turns = FlowControlQueue(flow_control=flow, clear_on_resume=True)
    changelog = FlowControlQueue(flow_control=flow, clear_on_resume=True)
    for off in (19, 20, 21):
        turns.put_nowait(event("chat.turns", off))
    changelog.put_nowait(event("dialcheck-context-changelog", 7))
    return turns, changelog


def test_resume_keeps_queued_turns_and_clears_other_queues():
    async def run():
        flow = KeepInputFlowControl({"chat.turns"}, loop=asyncio.get_running_loop())
        turns, changelog = queues(flow)
        flow.resume()
        assert flow.is_active()
        assert [turns.get_nowait().message.offset for _ in range(turns.qsize())] == [19, 20, 21]
        assert changelog.empty()  # as Faust does for every other queue

        flow.suspend()
        turns.put_nowait(event("chat.turns", 22))
        flow.clear()  # partitions revoked: Faust then waits for in-flight events, so everything goes
        assert turns.empty()

    asyncio.run(run())


def test_fausts_own_resume_drops_them():
    """The upstream behaviour the patch exists for (would pass, and this test fail, once fixed upstream)."""
    async def run():
        flow = FlowControlEvent(loop=asyncio.get_running_loop())
        turns, _ = queues(flow)
        flow.resume()
        assert turns.empty()

    asyncio.run(run())


CHANGELOG = TP("dialcheck-context-changelog", 0)


def fetching_consumer(monkeypatch, batches: list[list[tuple[TP, int]]]) -> Consumer:
    """A Consumer whose upstream getmany yields `batches` (one per call), messages carrying offsets."""
    c = Consumer.__new__(Consumer)
    c.app = SimpleNamespace(conf=SimpleNamespace(keep_input_topics=frozenset({TURNS.topic})))
    c._read_offset = defaultdict(lambda: None)
    c._handed_out = {}
    pending = iter(batches)

    async def upstream(self, timeout):
        for tp, off in next(pending):
            yield tp, SimpleNamespace(topic=tp.topic, offset=off)
    monkeypatch.setattr(faust_aiokafka.Consumer, "getmany", upstream)
    return c


def fetch(c: Consumer) -> list[tuple[str, int]]:
    async def run():
        return [(tp.topic, m.offset) async for tp, m in c.getmany(timeout=1.0)]
    return asyncio.run(run())


def test_turns_fetched_again_after_the_seek_are_handed_out_once(monkeypatch):
    c = fetching_consumer(monkeypatch, [
        [(TURNS, 5), (TURNS, 6), (TURNS, 7)],                      # fetched before the seek (kept queued)
        [(TURNS, 5), (TURNS, 6), (TURNS, 7), (TURNS, 8), (CHANGELOG, 3)],  # the same after the seek, and more
    ])
    assert fetch(c) == [("chat.turns", 5), ("chat.turns", 6), ("chat.turns", 7)]
    c._read_offset[TURNS] = 5  # what Faust's seek to the committed offset does
    assert fetch(c) == [("chat.turns", 8), ("dialcheck-context-changelog", 3)]
    # the read offset moved past the skipped copies: Faust's drain loop sees 8 right after 7, no gap to commit over
    assert c._read_offset[TURNS] == 7


def test_a_new_assignment_reads_its_turns_again(monkeypatch):
    c = fetching_consumer(monkeypatch, [[(TURNS, 5), (TURNS, 6)], [(TURNS, 5), (TURNS, 6)]])
    assert len(fetch(c)) == 2

    async def noop(self, *a, **kw):
        return None
    monkeypatch.setattr(faust_aiokafka.Consumer, "on_partitions_revoked", noop)
    asyncio.run(c.on_partitions_revoked({TURNS}))  # queued events were cleared: they must come again
    assert fetch(c) == [("chat.turns", 5), ("chat.turns", 6)]


def test_a_partition_never_committed_is_sought_back_to_its_beginning(monkeypatch):
    """Point 6: aiokafka's seek_to_committed leaves a partition with no committed offset (or 0) where
    its fetch had got to, so turns Faust dropped while its flow was stopped were never read again."""
    from aiokafka.structs import TopicPartition

    committed = {TopicPartition("chat.turns", 0): 5, TopicPartition("chat.turns", 1): None,
                 TopicPartition("chat.turns", 2): 0, TopicPartition("other", 0): None}
    sought: list = []

    async def aiokafkas_seek(self):
        return dict(committed)

    async def to_beginning(self, *tps):
        sought.extend(tps)

    monkeypatch.setattr(faust_aiokafka.AIOKafkaConsumerThread, "seek_to_committed", aiokafkas_seek)
    monkeypatch.setattr(faust_aiokafka.AIOKafkaConsumerThread, "seek_to_beginning", to_beginning)
    thread = ConsumerThread.__new__(ConsumerThread)
    thread.__dict__["app"] = SimpleNamespace(conf=SimpleNamespace(keep_input_topics=frozenset({"chat.turns"})))
    assert asyncio.run(thread.seek_to_committed()) == committed
    assert sought == [TopicPartition("chat.turns", 1), TopicPartition("chat.turns", 2)]  # not "other": not input


def test_the_worker_app_is_built_on_the_fixes():
    """Point 1 and the seams: the worker's consumer waits the configured fetch time (Faust's is 1,500 ms),
    guards its batches, keeps its input topics; the agents' streams are StepStreams; the outbox acks by
    the app's one ack rule."""
    from aiokafka.consumer import fetcher

    from schemas.settings import load_settings
    from streams.app import create_app
    from streams.kafka.internals import KEEP_BYTES, GuardedPartitionRecords, StepStream, Transport

    class NoChecker:
        def check_turns(self, items):
            raise AssertionError("no stream runs here")

    s = load_settings(kafka={"bootstrap": "127.0.0.1:9", "broker_kind": "tansu"},
                      stream={"feedback_store": "off", "fetch_wait_ms": 37})
    app = create_app(s, NoChecker())

    async def worker_consumer():
        made = app.consumer._thread._create_worker_consumer(app.transport)
        return made._fetch_max_wait_ms, made._value_deserializer

    assert isinstance(app.transport, Transport) and isinstance(app.consumer, Consumer)
    assert asyncio.run(worker_consumer()) == (37, KEEP_BYTES)
    assert fetcher.PartitionRecords is GuardedPartitionRecords
    # chat.knowledge too: a turn waits for its conversation's knowledge, so neither input's queue may be dropped
    assert app.conf.keep_input_topics == {s.kafka.topic_turns, s.kafka.topic_knowledge} and app.conf.Stream is StepStream
    assert app.outbox.acks is app.acks and isinstance(app.flow_control, KeepInputFlowControl)
