"""Every use of faust-streaming's and aiokafka's private internals, in one module: eight fixes.

Why one module: each of these reaches under the public API of the pinned faust-streaming 0.15.3 and
aiokafka 0.14.0 (the names are listed in `RELIED_ON`); an upgrade that moves them must fail one test
(tests/test_kafka_contract.py) and be re-read here, nowhere else. Each fix has a unit test that fails
without it (tests/test_stream_transport.py, tests/test_stream_codecs.py, tests/test_take_steps.py).
Everything else on the Kafka side uses Faust's own seams: the App's `Settings` class and its
`Stream` setting, the transports registry (streams/kafka/app.py).

1. The consumer's fetch wait is a setting (`consumer_fetch_max_wait_ms`, from `stream.fetch_wait_ms`):
   faust-streaming hard-codes `fetch_max_wait_ms=1500`. A broker that holds every fetch for the full
   wait (Tansu does, measured) puts a 1.5 s floor under produce → verdict latency.
2. Never commit past an input that is still in flight (`Consumer._new_offset`, asking the ack rule
   `Acks.may_commit`): Faust treats a single missing offset at the head of the acked run as a
   compaction gap and commits over it (https://github.com/faust-streaming/faust/issues/606, open).
   A turn being checked at the committed offset while later ones were acked would be skipped by the
   next worker after a crash.
3. Never drop fetched turns when the flow resumes (`KeepInputFlowControl`): at start-up and after a
   rebalance Faust resumes the stream partitions *before* seeking them to the committed offsets, so
   turns fetched in between are queued, then cleared by `flow_control.resume()`, while Faust's read
   offset already passed them: the re-fetched copies are dropped as already read
   (https://github.com/faust-streaming/faust/issues/596, open). Seen here: a worker restarted with a
   backlog skipped six turns of one partition. The input topics' queued turns now stay queued.
4. Never hand the same input offset out twice in one assignment (`Consumer.getmany`): when the seek
   to the committed offset comes *after* the kept turns were fetched, the fetcher reads them again and
   Faust passes the copies on (its read offset was reset by the seek): every turn of a restart's
   backlog was checked twice (measured: 31 of 31). The consumer remembers, per input partition since
   it was assigned, the highest offset it handed out and skips re-fetched copies at or below it; the
   read offset moves past a skipped copy so Faust does not mistake the skipped range for a gap.
5. A record batch that cannot be decoded never crashes the worker nor sticks its partition
   (`GuardedPartitionRecords`, `Consumer._dead_letter_undecodable`): aiokafka raises out of the fetch
   for a batch whose codec it lacks or does not know, or whose CRC or framing is broken; Faust
   crashes, and a restarted worker fetches the same batch and crashes again. The worker's fetcher
   decodes each batch up front; one that fails becomes a marker record at its first offset, which
   `getmany` turns into dead letters (one per offset, code `undecodable`) through the outbox; the
   offsets count as done only after those are delivered (`Acks.countable`). Only the worker's consumer
   is guarded (value deserializer `KEEP_BYTES`): any other aiokafka consumer keeps aiokafka's behaviour.
6. "Seek back to the committed offsets" also seeks back a partition the group never committed
   (`ConsumerThread.seek_to_committed`): Faust drops the records a fetch returns while its flow is
   stopped and then seeks back to the committed offsets, but aiokafka seeks only where an offset above
   0 was committed, so an input partition without one kept its advanced position and the dropped turns
   were never read (seen once in CI, tests/test_stream_backlog.py). Such a partition now goes back to
   its beginning (the app's reset policy is earliest); turns handed out before are skipped (point 4).
7. The take loop (`StepStream.take_steps`): Faust's `Stream.take_events` with two more ways for a
   step to end (its turns to check fill `max_weight`; nothing arrived for `idle_s`). Faust has no hook
   for "end the buffer on a weight or on idle", so the loop is `take_events`' own (faust/streams.py)
   with those two rules, and it needs what `take_events` uses: `_enable_passive`, `_processors`,
   `_active_agens`. Why the two rules (bench/bench_stream.py, docs/results.md): most records of a chat
   are context, so steps of 256 records held 42-52 turns to check and ended in part-filled model
   batches; and `take_events` waited its full `within` after every burst and before a lone turn.
Also read here for /metrics (`consumer_lags`): the consumer's read and committed offsets, for which Faust
keeps no public accessor. And the app's state the worker acts on (`recovered`, `wait_recovered`,
`rebalancing`, `owned_partitions`): public attributes of faust.App that Faust's documentation never
names (`app.tables.recovery.completed`, `app.rebalancing`, `app.assignor.assigned_actives()`), so
they are read here, listed in `RELIED_ON`, and their behaviour is pinned by the contract test.

8. No terminal spinner (`QuietWorker`): to advance its spinner on every log record, faust.Worker sets
   the root logger to DEBUG, so every debug line of aiokafka and Faust (one per produce request) was
   built, scrubbed and dropped on the event loop while the checker waited for the GIL.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, AsyncGenerator, Callable, Sequence

import faust
from aiokafka import AIOKafkaConsumer
from aiokafka.consumer import fetcher as aiokafka_fetcher
from aiokafka.errors import CorruptRecordException
from aiokafka.structs import ConsumerRecord
from faust.assignor import PartitionAssignor
from faust.tables.manager import TableManager
from faust.tables.recovery import Recovery
from faust.transport.drivers import TRANSPORTS
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types.tuples import ack_lock
from mode.utils.aiter import aiter
from mode.utils.futures import notify
from mode.utils.queues import FlowControlEvent

from .acks import Acks

SCHEME = "dialcheck"                           # broker_consumer URL scheme that selects `Transport`
H_UNDECODABLE = "dialcheck.undecodable"        # marker record: why its batch did not decode
H_UNDECODABLE_LAST = "dialcheck.undecodable.last"  # marker record: the batch's last offset
log = logging.getLogger("dialcheck.transport")
take_log = logging.getLogger("dialcheck.stream")

# (owner, name) for every private or undocumented name used below, an attribute of the owner or set on
# `self` in its source: tests/test_kafka_contract.py checks each against the installed versions, so an
# upgrade that moves one fails there first.
RELIED_ON: tuple[tuple[Any, str], ...] = (
    (FlowControlEvent, "_suspend"), (FlowControlEvent, "_resume"), (FlowControlEvent, "_queues"),
    (asyncio.Queue, "_queue"),
    (aiokafka_fetcher, "PartitionRecords"), (aiokafka_fetcher.PartitionRecords, "_unpack_records"),
    (aiokafka_fetcher.PartitionRecords, "_records_iterator"), (aiokafka_fetcher.PartitionRecords, "_tp"),
    (aiokafka_fetcher.PartitionRecords, "_records"), (aiokafka_fetcher.PartitionRecords, "_check_crcs"),
    (faust_aiokafka.AIOKafkaConsumerThread, "_create_worker_consumer"),
    (faust_aiokafka.AIOKafkaConsumerThread, "seek_to_committed"),
    (faust_aiokafka.Consumer, "_new_consumer_thread"), (faust_aiokafka.Consumer, "_new_offset"),
    (faust_aiokafka.Consumer, "_read_offset"), (faust_aiokafka.Consumer, "_committed_offset"),
    (faust_aiokafka.Consumer, "_acked"), (faust_aiokafka.Consumer, "_acked_index"),
    (faust_aiokafka.Consumer, "_gap"), (faust_aiokafka.Consumer, "_n_acked"),
    (faust.Stream, "_enable_passive"), (faust.Stream, "_processors"), (faust.Stream, "_active_agens"),
    (AIOKafkaConsumer, "_fetch_max_wait_ms"), (AIOKafkaConsumer, "_value_deserializer"),
    (faust.Worker, "on_setup_root_logger"), (faust.Worker, "spinner"), (faust.App, "_consumer"),
    (faust.App, "tables"), (TableManager, "recovery"), (Recovery, "completed"), (faust.App, "rebalancing"),
    (faust.App, "assignor"), (PartitionAssignor, "assigned_actives"),
)


# -- 3. flow control --------------------------------------------------------------------------------
def _topic_of(item) -> str | None:
    return getattr(getattr(item, "message", None), "topic", None)


class KeepInputFlowControl(FlowControlEvent):
    """Faust's flow control, except that `resume()` keeps the queued events of `keep_topics` (point
    3). `clear()` (called when partitions are revoked, before Faust waits for in-flight events) still
    clears everything, as Faust expects."""

    def __init__(self, keep_topics, **kwargs):
        super().__init__(**kwargs)
        self.keep_topics = frozenset(keep_topics)

    def resume(self) -> None:
        self._suspend.clear()
        self._resume.set()
        for queue in list(self._queues):
            items = queue._queue  # the deque behind asyncio.Queue
            if any(_topic_of(it) in self.keep_topics for it in items):
                kept = [it for it in items if _topic_of(it) in self.keep_topics]
                items.clear()
                items.extend(kept)
            else:
                queue.clear()


# -- 5. undecodable batches -------------------------------------------------------------------------
def KEEP_BYTES(value):  # noqa: N802 - a marker: the consumer whose fetcher guards its batches (point 5)
    return value


class _DecodedBatch:
    """A record batch already decoded: its records in a list, every other attribute the batch's."""

    def __init__(self, batch, records: list):
        self._batch, self._records = batch, records

    def __getattr__(self, name):
        return getattr(self._batch, name)

    def validate_crc(self) -> bool:
        return True  # checked before decoding

    def __iter__(self):
        return iter(self._records)


class _SkippedBatch(_DecodedBatch):
    """An undecodable batch, shown to aiokafka's loop as a control batch: it moves past it."""

    is_control_batch = True
    is_transactional = False
    producer_id = None

    def __init__(self, batch, next_offset: int):
        super().__init__(batch, [])
        self.next_offset = next_offset


@dataclass(frozen=True)
class Undecodable:
    first: int  # the batch's first offset not yet read
    last: int
    reason: str
    timestamp: int


def _batch_offsets(batch) -> tuple[int | None, int]:
    """(base offset or None, next offset) from the batch header: no decoding needed."""
    nxt = int(batch.next_offset)
    base = getattr(batch, "base_offset", None)
    return (None if base is None else int(base)), nxt


class _CheckedBatches:
    """aiokafka's MemoryRecords for one partition's fetch, whose batches are checked and decoded as
    they are read: one that fails is skipped and noted in `owner.undecodable`."""

    def __init__(self, records, owner: "GuardedPartitionRecords", check_crcs: bool):
        self._records, self._owner, self._check_crcs = records, owner, check_crcs

    def has_next(self) -> bool:
        return self._records.has_next()

    def next_batch(self):
        batch = self._records.next_batch()
        try:
            if self._check_crcs and not batch.validate_crc():
                raise CorruptRecordException("invalid CRC")
            return _DecodedBatch(batch, list(batch))
        except Exception as e:  # noqa: BLE001 - any failure to decode a batch is that batch's
            base, nxt = _batch_offsets(batch)
            first = max(self._owner.next_fetch_offset, base if base is not None else nxt - 1)
            self._owner.undecodable.append(Undecodable(first, nxt - 1, f"{type(e).__name__}: {e}",
                                                       int(getattr(batch, "first_timestamp", None) or -1)))
            return _SkippedBatch(batch, nxt)


class GuardedPartitionRecords(aiokafka_fetcher.PartitionRecords):
    """aiokafka's PartitionRecords; for the worker's consumer (value deserializer KEEP_BYTES) a batch
    that does not decode yields a marker record at its first offset instead of raising (point 5)."""

    def __init__(self, tp, records, aborted, fetch_offset, key_deserializer, value_deserializer, check_crcs,
                 isolation_level):
        super().__init__(tp, records, aborted, fetch_offset, key_deserializer, value_deserializer, check_crcs,
                         isolation_level)
        if value_deserializer is KEEP_BYTES:
            self.undecodable: list[Undecodable] = []
            self._records = _CheckedBatches(records, self, check_crcs)
            self._check_crcs = False  # checked by _CheckedBatches
            self._records_iterator = self._with_markers(self._unpack_records())

    def _with_markers(self, records):
        for rec in records:
            yield from self._markers()
            yield rec
        yield from self._markers()

    def _markers(self):
        while self.undecodable:
            u = self.undecodable.pop(0)
            if u.last < u.first:
                continue
            tp = self._tp
            yield ConsumerRecord(tp.topic, tp.partition, u.first, u.timestamp, 0, None, None, None, -1, -1,
                                 ((H_UNDECODABLE, u.reason.encode("utf-8", "replace")),
                                  (H_UNDECODABLE_LAST, str(u.last).encode())))


def guard_fetcher() -> None:
    """aiokafka's Fetcher builds its records by this module name; the guard is inert for every
    consumer but the worker's (KEEP_BYTES), so replacing it process-wide changes nothing else."""
    aiokafka_fetcher.PartitionRecords = GuardedPartitionRecords


def undecodable_marker(message) -> tuple[int, str] | None:
    """(last offset, reason) when `message` is a GuardedPartitionRecords marker, else None."""
    headers = getattr(message, "headers", None)
    if not headers or message.value is not None:
        return None
    h = dict(headers) if not isinstance(headers, dict) else headers
    if H_UNDECODABLE not in h or H_UNDECODABLE_LAST not in h:
        return None
    return int(h[H_UNDECODABLE_LAST]), bytes(h[H_UNDECODABLE]).decode("utf-8", "replace")


# -- 1, 6. the consumer thread ----------------------------------------------------------------------
def never_committed(committed: dict, keep) -> list:
    """The partitions of `keep` topics that aiokafka's seek_to_committed left where they were: no
    committed offset, or 0 (point 6)."""
    return [tp for tp, offset in committed.items() if tp.topic in keep and not offset]


class ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    """`self.app` is a streams/kafka/app.py `KafkaApp`: its `conf` is a `KafkaSettings`."""

    async def seek_to_committed(self):
        committed = await super().seek_to_committed()
        back = never_committed(committed, self.app.conf.keep_input_topics)
        if back:
            await self.seek_to_beginning(*back)
        return committed

    def _create_worker_consumer(self, transport):
        guard_fetcher()
        consumer = super()._create_worker_consumer(transport)
        # aiokafka keeps the constructor argument here and hands it to its Fetcher at start()
        consumer._fetch_max_wait_ms = int(self.app.conf.consumer_fetch_max_wait_ms)
        consumer._value_deserializer = KEEP_BYTES  # its fetcher guards undecodable batches (point 5)
        return consumer


# -- 2, 4, 5. the consumer --------------------------------------------------------------------------
def is_refetched_copy(handed_out: dict, tp, offset: int) -> bool:
    """True when `offset` of `tp` was already handed out since the assignment; else records it."""
    last = handed_out.get(tp)
    if last is not None and offset <= last:
        return True
    handed_out[tp] = offset
    return False


class Consumer(faust_aiokafka.Consumer):
    """`self.app` is a streams/kafka/app.py `KafkaApp`: `conf` (KafkaSettings), `outbox`."""

    def _new_consumer_thread(self) -> ConsumerThread:
        return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._handed_out: dict = {}  # highest offset handed out per input partition since assigned (point 4)

    async def getmany(self, timeout: float):
        keep = self.app.conf.keep_input_topics
        async for tp, message in super().getmany(timeout):
            if (marker := undecodable_marker(message)) is not None:
                await self._dead_letter_undecodable(tp, message.offset, *marker)
                continue
            if tp.topic in keep and is_refetched_copy(self._handed_out, tp, message.offset):
                read = self._read_offset[tp]
                self._read_offset[tp] = message.offset if read is None else max(read, message.offset)
                continue
            yield tp, message

    async def _dead_letter_undecodable(self, tp, first: int, last: int, reason: str) -> None:
        """Dead letters for offsets first..last of `tp` (a batch that did not decode), delivered by
        the app's outbox; only then do those offsets count as done (point 5)."""
        done = self._handed_out.get(tp)
        first = first if done is None else max(first, done + 1)  # a re-fetched copy is dead-lettered once
        if last < first:
            return
        await self.app.outbox.dead_letter_range(tp.topic, tp.partition, first, last, reason)
        self._handed_out[tp] = last if done is None else max(done, last)
        read = self._read_offset[tp]
        self._read_offset[tp] = last if read is None else max(read, last)
        if self.app.topics.acks_enabled_for(tp.topic):
            self._ack_offsets(tp, range(first, last + 1))

    def _ack_offsets(self, tp, offsets) -> None:
        """Count offsets that have no message (dead-lettered batch) as acked, like Consumer.ack does."""
        with ack_lock:
            committed = self._committed_offset[tp]
            index, acked = self._acked_index[tp], self._acked[tp]
            for off in offsets:
                if Acks.countable(committed, index, off):
                    index.add(off)
                    acked.append(off)
                    self._n_acked += 1

    async def on_partitions_revoked(self, revoked) -> None:
        for tp in revoked:  # their queued events are cleared: the next assignment reads them again
            self._handed_out.pop(tp, None)
        await super().on_partitions_revoked(revoked)

    async def on_partitions_assigned(self, assigned, generation_id: int = 0) -> None:
        for tp in assigned:  # before Faust resumes them: the pre-seek fetch is tracked as well
            self._handed_out.pop(tp, None)
        await super().on_partitions_assigned(assigned, generation_id)

    def _new_offset(self, tp):
        if not Acks.may_commit(self._committed_offset[tp], self._acked[tp], self._gap[tp]):
            return None
        return super()._new_offset(tp)


class Transport(faust_aiokafka.Transport):
    Consumer = Consumer


TRANSPORTS.aliases[SCHEME] = "streams.kafka.internals:Transport"  # Faust's transports registry


# -- 7. the take loop -------------------------------------------------------------------------------
class StepStream(faust.Stream):
    """Faust's Stream (the App's `Stream` setting) with `take_steps` (point 7)."""

    def take_steps(self, *, max_events: int, within: float, idle_s: float = 0.0,
                   weigh: Callable[[Any], int] | None = None,
                   max_weight: int | None = None) -> AsyncGenerator[Sequence, None]:
        """Lists of buffered events: a list is handed out when it holds `max_events` events, or the
        weights (`weigh(event)`) of its events reach `max_weight`, or nothing arrived for `idle_s`
        (0: not this rule), or `within` seconds passed since its first event arrived. Each event is
        given back to the ack rule (`Acks.step_returned`) after the consumer of its list returned."""
        agen = self._take_steps(max_events, within, idle_s, weigh, max_weight)
        self._active_agens.add(agen)  # Stream.on_stop closes the generators it tracks
        return agen

    async def _take_steps(self, max_events: int, within: float, idle_s: float,
                          weigh: Callable[[Any], int] | None,
                          max_weight: int | None) -> AsyncGenerator[Sequence, None]:
        loop = asyncio.get_running_loop()
        events: list = []
        weight = 0
        first_at = last_at = 0.0
        arrived, full, consumed = asyncio.Event(), asyncio.Event(), asyncio.Event()
        consuming: asyncio.Future | None = None  # set while a step is out: the buffer must not grow meanwhile

        async def add_to_buffer(value: Any) -> Any:
            nonlocal consuming, weight, first_at, last_at
            try:
                if consuming is not None:
                    try:
                        await consuming
                    finally:
                        consuming = None
                event = self.current_event
                if event is None:
                    raise RuntimeError("take buffer found current_event is None")
                events.append(event)
                last_at = loop.time()
                if len(events) == 1:
                    first_at = last_at
                if weigh is not None:
                    weight += weigh(event)
                arrived.set()
                if len(events) >= max_events or (max_weight is not None and weight >= max_weight):
                    full.set()
                    consumed.clear()
                    await self.wait(consumed)  # never more than a full step in the buffer
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                take_log.exception("error adding to the take buffer: %r", exc)
                await self.crash(exc)
            return value

        enable_acks = self.enable_acks
        self.enable_acks = False  # given back below, after the step's consumer returned
        self.add_processor(add_to_buffer)
        self._enable_passive(aiter(self.channel))
        try:
            while not self.should_stop:
                if not events:
                    arrived.clear()
                    await self.wait_for_stopped(arrived)
                    continue
                now = loop.time()
                wait = first_at + within - now
                if idle_s > 0:
                    wait = min(wait, last_at + idle_s - now)
                if not full.is_set() and wait > 0:
                    await self.wait_for_stopped(full, timeout=wait)
                    continue
                consuming = loop.create_future()
                try:
                    yield list(events)
                finally:
                    taken = list(events)
                    events.clear()
                    weight = 0
                    await Acks.step_returned(self, taken)
                    notify(consuming)
                    full.clear()
                    consumed.set()
        finally:
            self.enable_acks = enable_acks
            self._processors.remove(add_to_buffer)


# -- 8. the worker ----------------------------------------------------------------------------------
class QuietWorker(faust.Worker):
    """faust.Worker without its terminal spinner (point 8): the root logger keeps the asked level."""

    def on_setup_root_logger(self, logger, level: int) -> None:
        self.spinner = None
        super().on_setup_root_logger(logger, level)


# -- chat.knowledge before the turns (streams/knowledge.py "Ordering") --------------------------------
def end_and_committed(app, tp) -> tuple[int | None, int | None]:
    """(the end offset the consumer's last fetch reported, the group's committed offset) of `tp`;
    None for what is not known (nothing before the consumer exists)."""
    consumer = app._consumer
    if consumer is None:
        return None, None
    high = consumer.highwater(tp)
    return (None if high is None else int(high)), consumer._committed_offset.get(tp)


# -- /metrics -----------------------------------------------------------------------------------------
def consumer_lags(app) -> list[tuple[Any, int]]:
    """(partition, records not yet handed to the stream) for each assigned partition, for
    dialcheck_consumer_lag; nothing before the consumer exists (`app.consumer` would create one from
    the metrics thread)."""
    consumer = app._consumer
    if consumer is None:
        return []
    out = []
    for tp in sorted(consumer.assignment()):
        high = consumer.highwater(tp)
        if high is None:
            continue
        read = consumer._read_offset.get(tp)  # the last offset handed to the stream
        if read is None:
            read = consumer._committed_offset.get(tp) or 0
        else:
            read += 1
        out.append((tp, max(0, int(high) - int(read))))
    return out


# -- the app's state the worker acts on ---------------------------------------------------------------
def recovered(app) -> bool:
    """True once Faust finished recovering the tables from their changelogs (/readyz, the ready line)."""
    return app.tables.recovery.completed.is_set()


async def wait_recovered(app) -> None:
    """Returns once `recovered(app)`: the table holds every conversation this worker owns."""
    await app.tables.recovery.completed.wait()


def rebalancing(app) -> bool:
    """True from a rebalance's start to its end: partitions may change hands meanwhile."""
    return bool(app.rebalancing)


def owned_partitions(app, topic: str) -> set[int]:
    """The partitions of `topic` assigned to this worker as active (a standby's are not its own)."""
    return {tp.partition for tp in app.assignor.assigned_actives() if tp.topic == topic}
