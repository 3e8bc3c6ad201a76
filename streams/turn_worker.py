"""What the worker does with each batch of chat.turns: validate, keep context, check, publish.

`TurnWorker` holds the worker's state (context table, attempts table, pipeline thread, counters)
and its steps as methods; streams/app.py builds the Faust app and hands each batch to `handle`.
The guarantees, and where each is kept:
- at-least-once, never acknowledge an input whose output was not delivered (`handle`): every event
  of a batch is held (an extra reference on its message) until all outputs of the batch are
  delivered: Faust's `take_events` acks a batch in a `finally`, even when the handler raised, so
  without the hold one bad record acknowledged its whole batch.
- outputs delivered before the ack (`deliver`): verdicts and dead letters are sent (not attached to
  an event) and awaited before the batch is acked; the offset commit also flushes the producer
  first, so a commit never outruns an output. A send that still fails after `send_retries` stops
  the process without committing (`fatal`); the batch is redelivered.
- bad input is dead-lettered, never dropped (`dead_letter`): the original bytes, a short scrubbed
  human reason and its machine code (schemas.Reason).
- poison records (`check_group`, `AttemptsTable`): pipeline attempts are counted in a changelogged
  table *before* the call (flushed), so a record that kills the process on every delivery is found
  after a restart and dead-lettered as poison; after a crash the redelivered batch is checked one
  turn per call, so only the culprit's count grows.
- a hung pipeline (`run_pipeline`): the pipeline runs in one worker thread (a multi-second model
  call must not block heartbeats), with a deadline; past it, error verdicts and a fresh thread.
"""
from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from dataclasses import asdict, dataclass, replace

from schemas import InvalidEvent, Reason
from schemas.items import CheckItem
from schemas.protocols import Checker
from schemas.settings import Settings

from .checking import DaemonExecutor, Scrubber, ScrubbingFilter, bound, check_safely, error_verdict, safe_verdict, validate_event
from .context import Recency, add_turn, is_idle, oldest_beyond, parse_roles, should_check
from .deadletter import DeadLetter
from .observability import Observability

log = logging.getLogger("dialcheck.stream")

STATUS_MARKER = "dialcheck status"
FLUSH_TIMEOUT_S = 60.0
EXIT_UNDELIVERED = 75  # outputs could not be delivered: stopped without committing (EX_TEMPFAIL)


def partition_of(key: bytes, partitions: int) -> int:
    """The Java/aiokafka/kafka-python default partitioner (murmur2), for the idle sweep."""
    from aiokafka.partitioner import murmur2

    return (murmur2(key) & 0x7FFFFFFF) % partitions


def stamped(v, ts: float | None, record_ts: float | None, now: float | None = None):
    """The verdict as published (issue 20): the producer's `ts` echoed, and `latency_ms` from that
    `ts` (else the record's Kafka timestamp; both seconds) to now. A producer clock ahead of ours
    can make it negative: it is reported as measured, not hidden."""
    origin = ts if ts is not None else record_ts
    now = time.time() if now is None else now
    return replace(v, ts=ts, latency_ms=None if origin is None else round((now - origin) * 1000.0, 1))


def fatal(what: str) -> None:
    """Outputs cannot be delivered: stop now, without committing (the held events are not acked,
    and no shutdown path runs), so the batch is redelivered to whoever owns it next."""
    log.critical("%s; stopping without commit so the batch is redelivered", what)
    for h in logging.getLogger().handlers:
        h.flush()
    sys.stdout.flush()
    os._exit(EXIT_UNDELIVERED)


@dataclass
class Counters:
    """The status line's counters, in its order; exported as is (dialcheck_worker_events_total)."""

    events: int = 0            # valid turns read
    checked: int = 0           # turns selected for checking
    verdicts: int = 0          # verdicts published
    deadlettered: int = 0      # records sent to the dead-letter topic
    evicted: int = 0           # idle conversations evicted by the sweep
    evicted_lru: int = 0       # conversations evicted beyond max_conversations
    deadline_expired: int = 0  # pipeline batches abandoned at batch_deadline_s
    poison: int = 0            # turns dead-lettered as poison
    send_retries: int = 0      # send rounds with a failure, retried
    isolated_batches: int = 0  # redelivered batches checked one turn per call
    feedback: int = 0          # chat.feedback records stored (redeliveries included: the store dedups)
    verdicts_unstored: int = 0  # published verdicts the feedback store failed to keep (feedback on them stays unjoined)

    def line(self) -> str:
        return " ".join(f"{k}={v}" for k, v in asdict(self).items())


class AttemptsTable:
    """Pipeline calls started per input record, in a changelogged Faust table: conversation key →
    {"topic/partition/offset": n}. Keyed like the context table, so the counts of a partition live
    (and are restored) wherever that partition's input is processed."""

    def __init__(self, table):
        self.table = table

    @staticmethod
    def _slot(msg) -> str:
        return f"{msg.topic}/{msg.partition}/{msg.offset}"

    def prior(self, key: bytes, msg) -> int:
        return int((self.table.get(key) or {}).get(self._slot(msg), 0))

    def set(self, key: bytes, msg, n: int | None) -> None:
        """Record n attempts for this message; None forgets it (and the key once it holds nothing)."""
        cur = dict(self.table.get(key) or {})
        if n is None:
            cur.pop(self._slot(msg), None)
        else:
            cur[self._slot(msg)] = n
        if cur:
            self.table[key] = cur
        elif key in self.table:
            del self.table[key]


class TurnWorker:
    """The agent's work on one batch of events (`handle`) and the periodic sweep, over the tables
    and topics create_app made. One instance per app; all methods run on the event loop except the
    pipeline call, which runs in `self.executor`'s thread."""

    def __init__(self, app, settings: Settings, checker: Checker, *, table, attempts: AttemptsTable,
                 verdicts_topic, dead_topic, obs: Observability, store_writer=None):
        self.app, self.settings, self.st = app, settings, settings.stream
        self.table, self.attempts = table, attempts
        self.verdicts_topic, self.dead_topic = verdicts_topic, dead_topic
        self.obs = obs
        self.store_writer = store_writer  # streams.feedback.StoreWriter: verdicts kept for joining feedback (None: off)
        self.counters = Counters()
        self.roles = parse_roles(self.st.check_roles)
        self.scrub = Scrubber.from_settings(settings)
        self.recency = Recency()
        self.executor = DaemonExecutor("pipeline")
        # per item a TurnResult: its verdicts (each claim's, then the turn summary) are all published
        self.check_call = checker.check_turns

    # -- partitions ---------------------------------------------------------------------------
    def owned_partitions(self) -> set[int]:
        topic = self.settings.kafka.topic_turns
        return {tp.partition for tp in self.app.assignor.assigned_actives() if tp.topic == topic}

    def _partition(self, key: bytes) -> int:
        return partition_of(key, self.settings.kafka.topic_partitions)

    # -- outputs ------------------------------------------------------------------------------
    async def deliver(self, sends: list[tuple]) -> None:
        """Send (topic, key, value, headers) records and wait until each is acknowledged; retry the
        failed ones with exponential backoff; give up (fatal) after `send_retries` attempts."""
        from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

        st = self.st
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
                self.counters.send_retries += 1
                log.warning("%d of %d sends failed (%s); retrying", len(failed), len(outcome),
                            bound(self.scrub(repr(failed[0][1])), 300))
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
            fatal(f"could not deliver {len(pending)} records after {st.send_retries} attempts: "
                  f"{bound(self.scrub(repr(e)), 300)}")

    def dead_letter(self, msg, code: Reason, reason: str) -> tuple:
        """The dead-letter record for `msg` (to deliver): original bytes, code, scrubbed short reason."""
        reason = bound(self.scrub(reason), self.st.max_reason_bytes)
        dl = DeadLetter(Reason(code).value, reason, msg.topic, msg.partition, msg.offset, msg.key,
                        msg.value).bounded(self.st.deadletter_max_bytes)
        log.warning("dead-letter %s/%d@%d [%s]: %s", msg.topic, msg.partition, msg.offset, dl.code, reason)
        self.counters.deadlettered += 1
        self.obs.dead_letter(code)
        key = None if dl.key is None else bytes(dl.key)
        return (self.dead_topic, key, bytes(dl.value) if dl.value is not None else b"", dl.headers())

    def verdict_record(self, v, stamp: tuple | None = None) -> tuple:
        # what dialcheck wrote (status reason, model_versions) is scrubbed; users' text never is (issue 19)
        if stamp is not None:
            v = stamped(v, *stamp)
        raw = safe_verdict(v, self.scrub, self.st.max_reason_bytes).to_json()
        return (self.verdicts_topic, v.conversation_id.encode("utf-8"), raw, None)

    # -- the pipeline call --------------------------------------------------------------------
    async def run_pipeline(self, items: list) -> list:
        """The checker in the pipeline thread, with a deadline: a call still running then is abandoned
        (its thread cannot be killed; a fresh thread takes the next batch) and its items get error
        verdicts, so one hung call cannot stall every partition this worker owns."""
        st = self.st
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(self.executor, check_safely, self.check_call, items)
        try:
            results = await asyncio.wait_for(fut, timeout=st.batch_deadline_s)
            return [v for r in results for v in r.verdicts]
        except asyncio.TimeoutError:
            self.counters.deadline_expired += 1
            log.error("pipeline batch of %d exceeded its %.1f s deadline: error verdicts, call abandoned "
                      "(deadline_expired=%d)", len(items), st.batch_deadline_s, self.counters.deadline_expired)
            self.executor.shutdown(wait=False)
            self.executor = DaemonExecutor("pipeline")
            return [error_verdict(it, f"{Reason.DEADLINE.value}: pipeline batch exceeded {st.batch_deadline_s:g} s",
                                  st.max_reason_bytes) for it in items]

    async def check_group(self, group: list, stamps: dict | None = None) -> None:
        """One pipeline call: count the attempt durably first, deliver, then forget the count.
        `stamps`: (conversation id, turn id) → (the turn's ts, its record timestamp) for `stamped`."""
        for key, msg, _ in group:
            self.attempts.set(key, msg, self.attempts.prior(key, msg) + 1)
        try:
            # the counts are in the changelog before the call can crash us (bounded: a dead broker
            # must not hang this partition forever while heartbeats keep us in the group)
            await asyncio.wait_for(self.app.producer.flush(), timeout=FLUSH_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001
            fatal(f"could not write pipeline attempts to the changelog: {bound(self.scrub(repr(e)), 300)}")
        verdicts = await self.run_pipeline([item for _, _, item in group])
        stamps = stamps or {}
        # stamped once: the published verdicts (ts, latency_ms) also feed the metrics below
        verdicts = [stamped(v, *stamps[k]) if (k := (v.conversation_id, v.turn_id)) in stamps else v for v in verdicts]
        records = [self.verdict_record(v) for v in verdicts]
        # both before the ack, at once: the store's thread writes while the broker acknowledges
        # (one after the other they cost ~0.1 s a batch: bench/bench_stream.py, docs/results.md)
        await asyncio.gather(self.deliver(records), self.keep_verdicts([r[2] for r in records]))
        if self.st.trace_records:
            log.info("trace delivered %s", " ".join(f"{v.turn_id}:{v.claim_id}" for v in verdicts))
        self.counters.verdicts += len(verdicts)
        self.obs.checked(group, verdicts)
        for key, msg, _ in group:
            self.attempts.set(key, msg, None)

    async def keep_verdicts(self, published: list[bytes]) -> None:
        """The verdicts as published, into the feedback store (before the ack: a crash redelivers the
        batch and they are stored then). A store failure does not stop checking: it is logged and
        counted (`verdicts_unstored`), and feedback on those verdicts stays unjoined."""
        if self.store_writer is None or not published:
            return
        import orjson

        try:
            await self.store_writer.call(self.store_writer.store.add_verdicts, [orjson.loads(raw) for raw in published])
        except Exception as e:  # noqa: BLE001
            self.counters.verdicts_unstored += len(published)
            log.error("could not keep %d verdicts in the feedback store: %s", len(published), bound(self.scrub(repr(e)), 300))

    # -- one batch ----------------------------------------------------------------------------
    async def handle(self, events) -> None:
        """One take_events batch: validate (dead letters), update context, check the selected
        turns; ack every event only after all of the batch's outputs are delivered."""
        st, c = self.st, self.counters
        held = [ev.message for ev in events]
        for m in held:
            m.incref()  # acked below, only once every output of the batch is delivered
        now = time.time()
        dead: list[tuple] = []
        to_check: list[tuple] = []  # (conversation key, message, CheckItem)
        stamps: dict[tuple[str, str], tuple] = {}  # checked turn → (its ts, its record timestamp)
        owned = self.owned_partitions()
        for ev in events:
            msg = ev.message
            try:
                turn = validate_event(msg.key, msg.value, st.max_text_chars, st.max_event_bytes, st.max_json_depth)
            except InvalidEvent as e:
                dead.append(self.dead_letter(msg, e.code, e.reason))
                continue
            c.events += 1
            if st.trace_records:
                log.info("trace read %s/%d@%d turn %s", msg.topic, msg.partition, msg.offset, turn.turn_id)
            self.obs.turn_in()
            key = turn.conversation_id.encode("utf-8")
            state, context = add_turn(self.table.get(key), turn, now, st.context_turns, st.context_idle_s)
            self.table[key] = state
            self.recency.touch(key)
            if should_check(turn, self.roles):
                to_check.append((key, msg, CheckItem(turn.conversation_id, turn.turn_id, context, turn.text)))
                stamps[(turn.conversation_id, turn.turn_id)] = (turn.ts, getattr(msg, "timestamp", None))
        for old in self.recency.overflow(st.max_conversations):
            if old in self.table and self._partition(old) in owned:
                del self.table[old]
                c.evicted_lru += 1
        await self.deliver(dead)
        if to_check:
            c.checked += len(to_check)
            fresh = []
            for key, msg, item in to_check:
                n = self.attempts.prior(key, msg)
                if n >= st.poison_attempts:
                    c.poison += 1
                    await self.deliver([self.dead_letter(msg, Reason.POISON, f"poison: {n} failed attempts (the "
                                                         "pipeline call crashed or stopped the worker each time)")])
                    self.attempts.set(key, msg, None)
                else:
                    fresh.append((key, msg, item, n))
            if any(n > 0 for *_, n in fresh):
                # a redelivery after a crash: one call per turn, so only the culprit's count grows
                c.isolated_batches += 1
                groups = [[(k, m, i)] for k, m, i, _ in fresh]
            else:
                groups = [[(k, m, i) for k, m, i, _ in fresh]] if fresh else []
            for group in groups:
                await self.check_group(group, stamps)
        if st.trace_records:
            log.info("trace ack %s", " ".join(f"{m.partition}@{m.offset}" for m in held))
        for m in held:
            m.ack(self.app.consumer)

    # -- housekeeping -------------------------------------------------------------------------
    def sweep(self, owned: set[int]) -> None:
        """Evict idle conversations of the partitions this worker owns, and the least recently
        active ones beyond `max_conversations` (never standby keys: they would diverge from the owner)."""
        st, table = self.st, self.table
        mine = {k: v for k, v in list(table.items()) if self._partition(k) in owned}
        now = time.time()
        if st.context_idle_s > 0:
            for key in [k for k, v in mine.items() if is_idle(v, now, st.context_idle_s)]:
                del table[key]
                del mine[key]
                self.recency.discard(key)
                self.counters.evicted += 1
        for key in oldest_beyond(mine, st.max_conversations):
            del table[key]
            self.recency.discard(key)
            self.counters.evicted_lru += 1

    def status_line(self, owned: set[int]) -> str:
        n_turns = sum(len(v["turns"]) for v in self.table.values() if v)
        return (f"{STATUS_MARKER}: conversations={len(self.table)} turns={n_turns} {self.counters.line()}"
                f" partitions={','.join(map(str, sorted(owned))) or '-'}")

    def install_scrubber(self) -> None:
        """Faust configures logging when the worker starts: filter its handlers (and ours) then."""
        for h in logging.getLogger().handlers:
            if not any(isinstance(f, ScrubbingFilter) for f in h.filters):
                h.addFilter(ScrubbingFilter(self.scrub, max_bytes=4 * self.st.max_reason_bytes))
