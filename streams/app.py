"""The Faust app: chat.turns → validate → context table → batched pipeline call → chat.verdicts.

Why these settings (see shared/docs/local-stack.md, all verified against Tansu):
- at_least_once only; outputs are idempotent instead (stable claim ids, downstream dedups).
- broker_session_timeout=6: Tansu holds JoinGroup for half the session timeout.
- producer_max_batch_size=1: with multi-record batches Tansu reports a wrong end offset and table
  recovery from the changelog loses state.
- the table uses the key partitioner (`use_partitioner=True`): a batch from `take_events` mixes
  partitions, so "the current event's partition" is not the key's partition; the raw key bytes
  hash exactly like the producer's key on chat.turns, so table partition == input partition.
- the pipeline runs in one worker thread: a multi-second model call must not block heartbeats.
- verdicts and dead letters are sent (not attached to an event) and awaited before the batch is
  acked; the offset commit also flushes the producer first, so a commit never outruns an output.
"""
from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor

import faust

from schemas.settings import Settings, load_settings
from schemas import InvalidEvent
from schemas.items import CheckItem
from schemas.protocols import Checker

from .broker import free_port
from .checking import check_safely, validate_event
from .context import add_turn, is_idle, parse_roles, should_check
from .deadletter import DeadLetter
from .kafka_config import faust_broker_kwargs

log = logging.getLogger("dialcheck.stream")

READY_MARKER = "dialcheck worker ready"
STATUS_MARKER = "dialcheck status"
TABLE_NAME = "context"


def partition_of(key: bytes, partitions: int) -> int:
    """The Java/aiokafka/kafka-python default partitioner (murmur2), for the idle sweep."""
    from aiokafka.partitioner import murmur2

    return (murmur2(key) & 0x7FFFFFFF) % partitions


def create_app(settings: Settings, checker: Checker) -> faust.App:
    """Build the worker app around `checker.check_many(list[CheckItem]) -> list[Verdict]`."""
    app = faust.App(
        settings.stream.app_id,
        **faust_broker_kwargs(settings),
        processing_guarantee="at_least_once",
        broker_session_timeout=6.0,
        broker_heartbeat_interval=1.0,
        producer_max_batch_size=1,
        consumer_auto_offset_reset="earliest",
        store="memory://",
        topic_partitions=settings.kafka.topic_partitions,
        topic_replication_factor=settings.kafka.topic_replication,
        topic_allow_declare=True,
        web_enabled=False,
        web_bind="127.0.0.1",
        web_port=free_port(),
        key_serializer="raw",
        value_serializer="raw",
    )
    turns_topic = app.topic(settings.kafka.topic_turns, key_type=bytes, value_type=bytes,
                            key_serializer="raw", value_serializer="raw",
                            partitions=settings.kafka.topic_partitions)
    verdicts_topic = app.topic(settings.kafka.topic_verdicts, key_serializer="raw", value_serializer="raw",
                               partitions=settings.kafka.topic_partitions)
    dead_topic = app.topic(settings.kafka.topic_deadletter, key_serializer="raw", value_serializer="raw",
                           partitions=settings.kafka.topic_partitions)
    table = app.Table(TABLE_NAME, default=None, use_partitioner=True, partitions=settings.kafka.topic_partitions,
                      key_type=bytes)  # bytes keys → raw serializer: hashes like the input key; values JSON
    roles = parse_roles(settings.stream.check_roles)
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pipeline")
    counters = {"events": 0, "checked": 0, "verdicts": 0, "deadlettered": 0, "evicted": 0}

    async def handle(events) -> None:
        outputs: list[asyncio.Future] = []
        items = []
        now = time.time()
        for ev in events:
            msg = ev.message
            try:
                turn = validate_event(msg.key, msg.value, settings.stream.max_text_chars)
            except InvalidEvent as e:
                dl = DeadLetter(e.reason, msg.topic, msg.partition, msg.offset, msg.key, msg.value)
                log.warning("dead-letter %s/%d@%d: %s", msg.topic, msg.partition, msg.offset, e.reason)
                outputs.append(await dead_topic.send(key=msg.key, value=msg.value if msg.value is not None else b"",
                                                     headers=dl.headers(), force=True))
                counters["deadlettered"] += 1
                continue
            counters["events"] += 1
            key = turn.conversation_id.encode("utf-8")
            state, context = add_turn(table.get(key), turn, now, settings.stream.context_turns, settings.stream.context_idle_s)
            table[key] = state
            if should_check(turn, roles):
                items.append(CheckItem(turn.conversation_id, turn.turn_id, context, turn.text))
        if items:
            counters["checked"] += len(items)
            loop = asyncio.get_running_loop()
            verdicts = await loop.run_in_executor(executor, check_safely, checker.check_many, items)
            for v in verdicts:
                outputs.append(await verdicts_topic.send(key=v.conversation_id.encode("utf-8"),
                                                         value=v.to_json(), force=True))
            counters["verdicts"] += len(verdicts)
        if outputs:
            await asyncio.gather(*outputs)  # delivered before take_events acks the batch

    @app.agent(turns_topic, name="check-turns")
    async def check_turns(stream):
        async for events in stream.take_events(settings.stream.batch_size, within=settings.stream.batch_within_s):
            await handle(events)

    @app.task
    async def announce_ready():
        await app.tables.recovery.completed.wait()
        print(f"{READY_MARKER}: app={settings.stream.app_id} broker={settings.kafka.bootstrap} "
              f"conversations={len(table)}", flush=True)

    @app.timer(settings.stream.status_interval_s)
    async def sweep_and_report():
        """Evict idle conversations of the partitions this worker owns, then log a status line."""
        if settings.stream.context_idle_s > 0 and not app.rebalancing:
            owned = {tp.partition for tp in app.assignor.assigned_actives() if tp.topic == settings.kafka.topic_turns}
            now = time.time()
            for key in [k for k, v in list(table.items()) if is_idle(v, now, settings.stream.context_idle_s)]:
                if partition_of(key, settings.kafka.topic_partitions) in owned:
                    del table[key]
                    counters["evicted"] += 1
        n_turns = sum(len(v["turns"]) for v in table.values() if v)
        print(f"{STATUS_MARKER}: conversations={len(table)} turns={n_turns} "
              + " ".join(f"{k}={v}" for k, v in counters.items()), flush=True)

    app.dialcheck_table = table  # for tests and introspection
    app.dialcheck_counters = counters
    return app
