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
- every event of a batch is held (an extra reference on its message) until all outputs of the
  batch are delivered: Faust's `take_events` acks a batch in a `finally`, even when the handler
  raised, so without the hold one bad record acknowledged its whole batch. A send that still fails
  after `send_retries` stops the process without committing; the batch is redelivered.
- pipeline attempts are counted in a changelogged table *before* the call (flushed), so a record
  that kills the process on every delivery is found after a restart and dead-lettered as poison.
"""
from __future__ import annotations

import asyncio
import logging
import os
import sys
import time

import faust

from schemas.settings import Settings
from schemas import InvalidEvent
from schemas.items import CheckItem
from schemas.protocols import Checker, ClaimChecker

from .processes import free_port
from .checking import DaemonExecutor, Scrubber, ScrubbingFilter, bound, check_safely, error_verdict, safe_verdict, validate_event
from .context import Recency, add_turn, is_idle, oldest_beyond, parse_roles, should_check
from .deadletter import DeadLetter
from . import transport
from .kafka_config import faust_broker_kwargs
from .observability import Observability

log = logging.getLogger("dialcheck.stream")

READY_MARKER = "dialcheck worker ready"
STATUS_MARKER = "dialcheck status"
TABLE_NAME = "context"
ATTEMPTS_TABLE = "attempts"
FLUSH_TIMEOUT_S = 60.0
EXIT_UNDELIVERED = 75  # outputs could not be delivered: stopped without committing (EX_TEMPFAIL)


def partition_of(key: bytes, partitions: int) -> int:
    """The Java/aiokafka/kafka-python default partitioner (murmur2), for the idle sweep."""
    from aiokafka.partitioner import murmur2

    return (murmur2(key) & 0x7FFFFFFF) % partitions


def create_app(settings: Settings, checker: Checker) -> faust.App:
    """Build the worker app around `checker.check_many(list[CheckItem]) -> list[Verdict]`."""
    st = settings.stream
    broker = faust_broker_kwargs(settings)
    app = faust.App(
        st.app_id,
        **broker,
        # the consumer's fetch wait is a setting (Faust hard-codes 1.5 s): streams/transport.py
        broker_consumer=broker["broker"].replace("kafka://", f"{transport.SCHEME}://"),
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
    app.dialcheck_fetch_wait_ms = st.fetch_wait_ms
    turns_topic = app.topic(settings.kafka.topic_turns, key_type=bytes, value_type=bytes,
                            key_serializer="raw", value_serializer="raw",
                            partitions=settings.kafka.topic_partitions)
    verdicts_topic = app.topic(settings.kafka.topic_verdicts, key_serializer="raw", value_serializer="raw",
                               partitions=settings.kafka.topic_partitions)
    dead_topic = app.topic(settings.kafka.topic_deadletter, key_serializer="raw", value_serializer="raw",
                           partitions=settings.kafka.topic_partitions)
    table = app.Table(TABLE_NAME, default=None, use_partitioner=True, partitions=settings.kafka.topic_partitions,
                      key_type=bytes)  # bytes keys → raw serializer: hashes like the input key; values JSON
    # conversation key → {"topic/partition/offset": pipeline calls started}; keyed like `table`, so the
    # counts of a partition live (and are restored) wherever that partition's input is processed
    attempts = app.Table(ATTEMPTS_TABLE, default=None, use_partitioner=True,
                         partitions=settings.kafka.topic_partitions, key_type=bytes)
    roles = parse_roles(st.check_roles)
    scrub = Scrubber.from_settings(settings)
    pool = {"executor": DaemonExecutor("pipeline")}
    recency = Recency()
    obs = Observability(settings)  # /metrics, /healthz, /readyz (served by run_worker)
    # one dict, so an exporter (issue 11) can publish every counter as is
    counters = {"events": 0, "checked": 0, "verdicts": 0, "deadlettered": 0, "evicted": 0, "evicted_lru": 0,
                "deadline_expired": 0, "poison": 0, "send_retries": 0, "isolated_batches": 0}

    def owned_partitions() -> set[int]:
        return {tp.partition for tp in app.assignor.assigned_actives() if tp.topic == settings.kafka.topic_turns}

    def fatal(what: str) -> None:
        """Outputs cannot be delivered: stop now, without committing (the held events are not
        acked, and no shutdown path runs), so the batch is redelivered to whoever owns it next."""
        log.critical("%s; stopping without commit so the batch is redelivered", what)
        for h in logging.getLogger().handlers:
            h.flush()
        sys.stdout.flush()
        os._exit(EXIT_UNDELIVERED)

    async def deliver(sends: list[tuple]) -> None:
        """Send (topic, key, value, headers) records and wait until each is acknowledged; retry the
        failed ones with exponential backoff; give up (fatal) after `send_retries` attempts."""
        from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

        pending = list(sends)

        async def attempt() -> None:
            nonlocal pending
            futs = []
            for topic, key, value, headers in pending:
                try:
                    futs.append(await topic.send(key=key, value=value, headers=headers, force=True))
                except Exception as e:  # noqa: BLE001 - e.g. MessageSizeTooLarge raised at send time
                    futs.append(e)
            results = await asyncio.gather(*[f for f in futs if not isinstance(f, Exception)], return_exceptions=True)
            it = iter(results)
            outcome = [f if isinstance(f, Exception) else next(it) for f in futs]
            failed = [(s, r) for s, r in zip(pending, outcome) if isinstance(r, BaseException)]
            pending = [s for s, _ in failed]
            if failed:
                counters["send_retries"] += 1
                log.warning("%d of %d sends failed (%s); retrying", len(failed), len(outcome),
                            bound(scrub(repr(failed[0][1])), 300))
                raise RuntimeError(f"{len(failed)} sends failed: {failed[0][1]!r}")

        if not pending:
            return
        try:
            async for retry in AsyncRetrying(stop=stop_after_attempt(st.send_retries), reraise=True,
                                             wait=wait_exponential(multiplier=st.send_backoff_s, max=10),
                                             retry=retry_if_exception_type(Exception)):
                with retry:
                    await attempt()
        except Exception as e:  # noqa: BLE001
            fatal(f"could not deliver {len(pending)} records after {st.send_retries} attempts: {bound(scrub(repr(e)), 300)}")

    def dead_letter(msg, reason: str) -> tuple:
        reason = bound(scrub(reason), st.max_reason_bytes)
        dl = DeadLetter(reason, msg.topic, msg.partition, msg.offset, msg.key, msg.value).bounded(st.deadletter_max_bytes)
        log.warning("dead-letter %s/%d@%d: %s", msg.topic, msg.partition, msg.offset, reason)
        counters["deadlettered"] += 1
        obs.dead_letter(reason)
        key = None if dl.key is None else bytes(dl.key)
        return (dead_topic, key, bytes(dl.value) if dl.value is not None else b"", dl.headers())

    def verdict_record(v) -> tuple:
        # what dialcheck wrote (status reason, model_versions) is scrubbed; users' text never is (issue 19)
        raw = safe_verdict(v, scrub, st.max_reason_bytes).to_json()
        return (verdicts_topic, v.conversation_id.encode("utf-8"), raw, None)

    # a ClaimChecker gives each item a list (claim verdicts, then the turn summary): all are published
    check_call = checker.check_turns if isinstance(checker, ClaimChecker) else checker.check_many

    async def run_pipeline(items: list) -> list:
        """check_many in the pipeline thread, with a deadline: a call still running then is abandoned
        (its thread cannot be killed; a fresh thread takes the next batch) and its items get error
        verdicts, so one hung call cannot stall every partition this worker owns."""
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(pool["executor"], check_safely, check_call, items)
        try:
            results = await asyncio.wait_for(fut, timeout=st.batch_deadline_s)
            return [v for r in results for v in (r if isinstance(r, list) else [r])]
        except asyncio.TimeoutError:
            counters["deadline_expired"] += 1
            log.error("pipeline batch of %d exceeded its %.1f s deadline: error verdicts, call abandoned "
                      "(deadline_expired=%d)", len(items), st.batch_deadline_s, counters["deadline_expired"])
            pool["executor"].shutdown(wait=False)
            pool["executor"] = DaemonExecutor("pipeline")
            return [error_verdict(it, f"deadline: pipeline batch exceeded {st.batch_deadline_s:g} s",
                                  st.max_reason_bytes) for it in items]

    def attempt_key(msg) -> str:
        return f"{msg.topic}/{msg.partition}/{msg.offset}"

    def prior_attempts(key: bytes, msg) -> int:
        return int((attempts.get(key) or {}).get(attempt_key(msg), 0))

    def set_attempts(key: bytes, msg, n: int | None) -> None:
        cur = dict(attempts.get(key) or {})
        if n is None:
            cur.pop(attempt_key(msg), None)
        else:
            cur[attempt_key(msg)] = n
        if cur:
            attempts[key] = cur
        elif key in attempts:
            del attempts[key]

    async def check_group(group: list) -> None:
        """One pipeline call: count the attempt durably first, deliver, then forget the count."""
        for key, msg, _ in group:
            set_attempts(key, msg, prior_attempts(key, msg) + 1)
        try:
            # the counts are in the changelog before the call can crash us (bounded: a dead broker
            # must not hang this partition forever while heartbeats keep us in the group)
            await asyncio.wait_for(app.producer.flush(), timeout=FLUSH_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001
            fatal(f"could not write pipeline attempts to the changelog: {bound(scrub(repr(e)), 300)}")
        verdicts = await run_pipeline([item for _, _, item in group])
        await deliver([verdict_record(v) for v in verdicts])
        counters["verdicts"] += len(verdicts)
        obs.checked(group, verdicts)
        for key, msg, _ in group:
            set_attempts(key, msg, None)

    async def handle(events) -> None:
        held = [ev.message for ev in events]
        for m in held:
            m.incref()  # acked below, only once every output of the batch is delivered
        now = time.time()
        dead: list[tuple] = []
        to_check: list[tuple] = []  # (conversation key, message, CheckItem)
        owned = owned_partitions()
        for ev in events:
            msg = ev.message
            try:
                turn = validate_event(msg.key, msg.value, st.max_text_chars, st.max_event_bytes, st.max_json_depth)
            except InvalidEvent as e:
                dead.append(dead_letter(msg, e.reason))
                continue
            counters["events"] += 1
            obs.turn_in()
            key = turn.conversation_id.encode("utf-8")
            state, context = add_turn(table.get(key), turn, now, st.context_turns, st.context_idle_s)
            table[key] = state
            recency.touch(key)
            if should_check(turn, roles):
                to_check.append((key, msg, CheckItem(turn.conversation_id, turn.turn_id, context, turn.text)))
        for old in recency.overflow(st.max_conversations):
            if old in table and partition_of(old, settings.kafka.topic_partitions) in owned:
                del table[old]
                counters["evicted_lru"] += 1
        await deliver(dead)
        if to_check:
            counters["checked"] += len(to_check)
            fresh = []
            for key, msg, item in to_check:
                n = prior_attempts(key, msg)
                if n >= st.poison_attempts:
                    counters["poison"] += 1
                    await deliver([dead_letter(msg, f"poison: {n} failed attempts (the pipeline call "
                                                    f"crashed or stopped the worker each time)")])
                    set_attempts(key, msg, None)
                else:
                    fresh.append((key, msg, item, n))
            if any(n > 0 for *_, n in fresh):
                # a redelivery after a crash: one call per turn, so only the culprit's count grows
                counters["isolated_batches"] += 1
                groups = [[(k, m, i)] for k, m, i, _ in fresh]
            else:
                groups = [[(k, m, i) for k, m, i, _ in fresh]] if fresh else []
            for group in groups:
                await check_group(group)
        for m in held:
            m.ack(app.consumer)

    @app.agent(turns_topic, name="check-turns")
    async def check_turns(stream):
        async for events in stream.take_events(st.take_events, within=st.batch_within_s):
            await handle(events)

    def install_scrubber() -> None:
        """Faust configures logging when the worker starts: filter its handlers (and ours) then."""
        for h in logging.getLogger().handlers:
            if not any(isinstance(f, ScrubbingFilter) for f in h.filters):
                h.addFilter(ScrubbingFilter(scrub, max_bytes=4 * st.max_reason_bytes))

    @app.task
    async def announce_ready():
        install_scrubber()
        await app.tables.recovery.completed.wait()
        install_scrubber()
        print(f"{READY_MARKER}: app={st.app_id} broker={scrub(settings.kafka.bootstrap)} "
              f"conversations={len(table)}", flush=True)

    @app.timer(st.status_interval_s)
    async def sweep_and_report():
        """Evict idle conversations of the partitions this worker owns, and the least recently
        active ones beyond `max_conversations`; then log a status line."""
        owned = owned_partitions()
        if not app.rebalancing:
            mine = {k: v for k, v in list(table.items()) if partition_of(k, settings.kafka.topic_partitions) in owned}
            now = time.time()
            if st.context_idle_s > 0:
                for key in [k for k, v in mine.items() if is_idle(v, now, st.context_idle_s)]:
                    del table[key]
                    del mine[key]
                    recency.discard(key)
                    counters["evicted"] += 1
            for key in oldest_beyond(mine, st.max_conversations):
                del table[key]
                recency.discard(key)
                counters["evicted_lru"] += 1
        n_turns = sum(len(v["turns"]) for v in table.values() if v)
        print(f"{STATUS_MARKER}: conversations={len(table)} turns={n_turns} "
              + " ".join(f"{k}={v}" for k, v in counters.items())
              + f" partitions={','.join(map(str, sorted(owned))) or '-'}", flush=True)

    app.dialcheck_table = table  # for tests and introspection
    app.dialcheck_counters = counters
    obs.attach(app, table)
    app.dialcheck_obs = obs
    return app
