"""What the worker does with each batch of chat.turns: validate, keep context, check, publish.

`TurnWorker` holds the turns' state (context table, attempts table, recency) and its steps as
methods; streams/app.py builds the Faust app and hands each batch to `handle`. How outputs are
delivered and when the input is acknowledged is the outbox's (streams/outbox.py, where the delivery
guarantees are written); the checker call, its thread and its deadline are `PipelineCall`'s, below.
What is kept here:
- poison records (`check_group`, `AttemptsTable`): pipeline attempts are counted in a changelogged
  table *before* the call (flushed), so a record that kills the process on every delivery is found
  after a restart and dead-lettered as poison; after a crash the redelivered batch is checked one
  turn per call, so only the culprit's count grows.
- context: each turn's conversation context from the table, bounded, expired when idle (`sweep`).
- grounding: a checked turn's passages, its own `evidence` then its conversation's knowledge
  (streams/knowledge.py, read after chat.knowledge caught up), on its CheckItem's `gold_evidence`;
  the knowledge is evicted with its conversation.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace

import orjson

from schemas import InvalidEvent, Reason
from schemas.items import CheckItem
from schemas.protocols import Checker
from schemas.secrets import install_log_scrubber
from schemas.evidence import EvidenceLimits
from schemas.settings import Settings

from .checking import DaemonExecutor, bound, check_safely, error_verdict, safe_verdict, validate_event
from .context import Recency, add_turn, oldest_beyond, parse_roles, should_check, wants_check
from .kafka.internals import owned_partitions
from .knowledge import KnowledgeWorker, conversation_idle, given_evidence
from .observability import Observability
from .outbox import Counters, Outbox, StoreWriter

log = logging.getLogger("dialcheck.stream")

STATUS_MARKER = "dialcheck status"


# The checker call: in a thread of its own, with a deadline, never losing a claim. Why a thread: a
# multi-second model call on the event loop would stop Faust's heartbeats and cost the worker its
# partitions. Why a deadline: one hung call (a model server that never answers) would otherwise stall
# every partition this worker owns; past `batch_deadline_s` the call is abandoned (a thread cannot be
# killed: it keeps running, and a fresh thread takes the next batch) and its items get error verdicts.
# A call that raises costs only the item that raised (`checking.check_safely`).
class PipelineCall:
    """`checker.check_turns` in the pipeline thread with a deadline; `run(items)` gives every
    verdict of every item, in order (each claim's, then the turn summary)."""

    def __init__(self, checker: Checker, settings: Settings, counters: Counters):
        self.check_turns = checker.check_turns
        self.st, self.counters = settings.stream, counters
        self.executor = DaemonExecutor("pipeline")

    async def run(self, items: list) -> list:
        st = self.st
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(self.executor, check_safely, self.check_turns, items)
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


def partition_of(key: bytes, partitions: int) -> int:
    """The Java/aiokafka/kafka-python default partitioner (murmur2), for the idle sweep."""
    from aiokafka.partitioner import murmur2

    return (murmur2(key) & 0x7FFFFFFF) % partitions


def stamped(v, ts: float | None, record_ts: float | None, now: float | None = None):
    """The verdict as published: the producer's `ts` echoed, and `latency_ms` from that
    `ts` (else the record's Kafka timestamp; both seconds) to now. A producer clock ahead of ours
    can make it negative: it is reported as measured, not hidden."""
    origin = ts if ts is not None else record_ts
    now = time.time() if now is None else now
    return replace(v, ts=ts, latency_ms=None if origin is None else round((now - origin) * 1000.0, 1))


class AttemptsTable:
    """Pipeline calls started per input record, in a changelogged Faust table: one key per input
    partition → {"topic/partition/offset": n}. The key hashes to its partition, so the counts live
    (and are restored) wherever that partition's input is processed. Why per partition, not per
    conversation: a pipeline call then writes one changelog record per input partition it touches
    instead of one per conversation (each a produce request on the embedded broker; the counts were
    two in five of the worker's produce requests)."""

    def __init__(self, table, partitions: int):
        self.table, self.partitions = table, partitions
        self._keys: dict[int, bytes] = {}

    def key(self, partition: int) -> bytes:
        """The table key of `partition`'s counts: the first `attempts/<partition>/<i>` that hashes to it."""
        if partition not in self._keys:
            target, i = partition % self.partitions, 0
            while partition_of(f"attempts/{partition}/{i}".encode(), self.partitions) != target:
                i += 1
            self._keys[partition] = f"attempts/{partition}/{i}".encode()
        return self._keys[partition]

    @staticmethod
    def _slot(msg) -> str:
        return f"{msg.topic}/{msg.partition}/{msg.offset}"

    def prior(self, msg) -> int:
        return int((self.table.get(self.key(msg.partition)) or {}).get(self._slot(msg), 0))

    def set_many(self, changes: list[tuple]) -> None:
        """(message, n or None) for many messages: n attempts recorded, None forgets the message (and
        a partition's key once it holds nothing). Each partition's key is written once."""
        slots: dict[bytes, dict] = {}
        for msg, n in changes:
            key = self.key(msg.partition)
            cur = slots.setdefault(key, dict(self.table.get(key) or {}))
            if n is None:
                cur.pop(self._slot(msg), None)
            else:
                cur[self._slot(msg)] = n
        for key, cur in slots.items():
            if cur:
                self.table[key] = cur
            elif key in self.table:
                del self.table[key]


class TurnWorker:
    """The agent's work on one batch of events (`handle`) and the periodic sweep, over the tables
    and topics create_app made. One instance per app; all methods run on the event loop except the
    pipeline call, which runs in the pipeline thread (`PipelineCall`). Outputs go through `outbox`
    (the app's one outbox, shared with the other agents)."""

    def __init__(self, app, settings: Settings, checker: Checker, *, outbox: Outbox, table,
                 attempts: AttemptsTable, verdicts_topic, obs: Observability,
                 store_writer: StoreWriter | None = None, knowledge: KnowledgeWorker | None = None):
        self.app, self.settings, self.st = app, settings, settings.stream
        self.table, self.attempts = table, attempts
        self.verdicts_topic = verdicts_topic
        self.obs = obs
        self.outbox = outbox
        self.store_writer = store_writer  # verdicts kept for joining feedback (None: off)
        self.knowledge = knowledge  # the conversations' knowledge (None: turns read their own evidence only)
        self.evidence_limits = EvidenceLimits.of(settings.grounding)
        self.counters: Counters = self.outbox.counters
        self.scrub = self.outbox.scrub
        self.roles = parse_roles(self.st.check_roles)
        self.recency = Recency()
        self._last_status: str | None = None
        # per item a TurnResult: its verdicts (each claim's, then the turn summary) are all published
        self.pipeline = PipelineCall(checker, settings, self.counters)

    @property
    def executor(self):
        """The pipeline thread now (a fresh one after a deadline)."""
        return self.pipeline.executor

    # -- partitions ---------------------------------------------------------------------------
    def owned_partitions(self) -> set[int]:
        topic = self.settings.kafka.topic_turns
        return owned_partitions(self.app, topic)

    def _partition(self, key: bytes) -> int:
        return partition_of(key, self.settings.kafka.topic_partitions)

    # -- outputs ------------------------------------------------------------------------------
    def verdict_record(self, v, stamp: tuple | None = None) -> tuple:
        # what dialcheck wrote (status reason, model_versions) is scrubbed; users' text never is
        if stamp is not None:
            v = stamped(v, *stamp)
        raw = safe_verdict(v, self.scrub, self.st.max_reason_bytes).to_json()
        return (self.verdicts_topic, v.conversation_id.encode("utf-8"), raw, None)

    async def run_pipeline(self, items: list) -> list:
        """Every verdict of `items` from the checker (thread, deadline: `PipelineCall`)."""
        return await self.pipeline.run(items)

    async def check_group(self, group: list, stamps: dict | None = None) -> None:
        """One pipeline call: count the attempt durably first, deliver, then forget the count.
        `stamps`: (conversation id, turn id) → (the turn's ts, its record timestamp) for `stamped`."""
        self.attempts.set_many([(msg, self.attempts.prior(msg) + 1) for _, msg, _ in group])
        await self.outbox.flush("pipeline attempts to the changelog")  # before the call can crash us
        verdicts = await self.run_pipeline([item for _, _, item in group])
        stamps = stamps or {}
        # stamped once: the published verdicts (ts, latency_ms) also feed the metrics below
        verdicts = [stamped(v, *stamps[k]) if (k := (v.conversation_id, v.turn_id)) in stamps else v for v in verdicts]
        records = [self.verdict_record(v) for v in verdicts]
        # both before the ack, at once: the store's thread writes while the broker acknowledges
        # (one after the other they cost ~0.1 s a batch: bench/bench_stream.py, docs/results.md)
        await asyncio.gather(self.outbox.deliver(records), self.keep_verdicts([r[2] for r in records]))
        if self.st.trace_records:
            log.info("trace delivered %s", " ".join(f"{v.turn_id}:{v.claim_id}" for v in verdicts))
        self.counters.verdicts += len(verdicts)
        self.obs.checked(group, verdicts)
        # after delivery: a verdict that cannot be delivered stops the worker with the count kept,
        # so a turn whose output always fails is quarantined like one whose call always crashes
        self.attempts.set_many([(msg, None) for _, msg, _ in group])

    async def keep_verdicts(self, published: list[bytes]) -> None:
        """The verdicts as published, into the feedback store (before the ack: a crash redelivers the
        batch and they are stored then). A store failure does not stop checking, nor slow it while
        the store is down (`call_unless_down`): it is logged and counted (`verdicts_unstored`), and
        feedback on those verdicts stays unjoined."""
        if self.store_writer is None or not published:
            return
        try:
            await self.store_writer.call_unless_down(self.store_writer.store.add_verdicts,
                                                     [orjson.loads(raw) for raw in published])
        except Exception as e:  # noqa: BLE001 - StoreDown included: the outage is on /readyz already
            self.counters.verdicts_unstored += len(published)
            log.error("could not keep %d verdicts in the feedback store: %s", len(published), bound(self.scrub(repr(e)), 300))

    # -- one batch ----------------------------------------------------------------------------
    def weigh(self, event) -> int:
        """1 for a record this worker will check, else 0: how `take_steps` (streams/kafka/internals.py) counts a
        step's turns to check. A quick look at the JSON, not validation: a record that fails
        validation in `handle` only made its step end early."""
        try:
            turn = orjson.loads(event.message.value)
            return int(wants_check(turn.get("check"), turn["speaker"], self.roles))
        except Exception:  # noqa: BLE001 - anything malformed weighs nothing; handle dead-letters it
            return 0

    async def handle(self, events) -> None:
        """One step (`StepStream.take_steps`, streams/kafka/internals.py): validate (dead letters), update context, check the selected
        turns; every event acked by the outbox only after all of the batch's outputs are delivered.

        Never a silent stall: an exception out of the step's work (a bug, not the input's fault) would
        leave its offsets held and the partition's commits stuck behind them while the worker looks
        healthy. So it ends here: the events whose outputs were not yet delivered are handled again one
        at a time (a redelivered turn is not added to its context twice), and each that raises again
        gets a dead letter (`internal`, the exception's type and message); it is counted
        (`handle_failures`, on the status line and /metrics) and the step is acknowledged. Failures to
        deliver are not caught: the outbox stops the process (`fatal`, exit 75) without committing, and
        so does a dead letter here that cannot be delivered."""
        async with self.outbox.acks.holding(events):
            done: set[int] = set()  # id() of the events whose outputs are delivered (or that need none)
            try:
                await self._step(events, done)
            except Exception as e:  # noqa: BLE001 - see the docstring; CancelledError (shutdown) passes
                await self._failed_step(events, done, e)

    async def _failed_step(self, events, done: set[int], error: Exception) -> None:
        """The step raised `error`: each event without its output, again alone; dead letters for those
        that raise again (their attempt counts forgotten: a dead letter ends them)."""
        left = [ev for ev in events if id(ev) not in done]
        self.counters.handle_failures += 1
        log.error("handling a step of %d events raised (%s); %d without output handled again one at a time "
                  "(handle_failures=%d)", len(events), self._why(error), len(left), self.counters.handle_failures)
        for ev in left:
            try:
                await self._step([ev], done, again=True)
            except Exception as e:  # noqa: BLE001 - this event alone raises: it ends as a dead letter
                why = self._why(e)
                log.error("%s/%d@%d raised alone (%s): dead-lettered as internal", ev.message.topic,
                          ev.message.partition, ev.message.offset, why)
                await self.outbox.deliver([self.outbox.dead_letter(ev.message, Reason.INTERNAL, f"internal error: {why}")])
                self.attempts.set_many([(ev.message, None)])

    def _why(self, error: BaseException) -> str:
        return bound(self.scrub(f"{type(error).__name__}: {error}"), 200)

    async def _step(self, events, done: set[int], again: bool = False) -> None:
        """The step's work; `done` collects the events that need nothing more. `again`: these events
        were counted already (a failed step's events handled one at a time)."""
        st, c, outbox = self.st, self.counters, self.outbox
        now = time.time()
        dead: list[tuple] = []
        dead_events: list = []
        context_only: list = []
        to_check: list[tuple] = []  # (conversation key, message, CheckItem without its passages yet, event)
        before: dict[tuple[str, str], tuple] = {}  # checked turn → (the turn, its context state before it)
        stamps: dict[tuple[str, str], tuple] = {}  # checked turn → (its ts, its record timestamp)
        owned = self.owned_partitions()
        states: dict[bytes, dict] = {}  # each conversation's new state, written once per batch
        for ev in events:
            msg = ev.message
            try:
                turn = validate_event(msg.key, msg.value, st.max_text_chars, st.max_event_bytes, st.max_json_depth,
                                      self.evidence_limits)
            except InvalidEvent as e:
                dead.append(outbox.dead_letter(msg, e.code, e.reason))
                dead_events.append(ev)
                continue
            c.events += not again
            if st.trace_records:
                log.info("trace read %s/%d@%d turn %s", msg.topic, msg.partition, msg.offset, turn.turn_id)
            if not again:
                self.obs.turn_in()
            key = turn.conversation_id.encode("utf-8")
            prior = states[key] if key in states else self.table.get(key)
            states[key], context = add_turn(prior, turn, now, st.context_turns, st.context_idle_s)
            self.recency.touch(key)
            if should_check(turn, self.roles):
                to_check.append((key, msg, CheckItem(turn.conversation_id, turn.turn_id, context, turn.text), ev))
                before[(turn.conversation_id, turn.turn_id)] = (turn, prior)
                stamps[(turn.conversation_id, turn.turn_id)] = (turn.ts, getattr(msg, "timestamp", None))
            else:
                context_only.append(ev)
        for key, state in states.items():  # one changelog record per conversation, not per turn
            self.table[key] = state
        done.update(map(id, context_only))
        for old in self.recency.overflow(st.max_conversations):
            if old in self.table and self._partition(old) in owned:
                self.forget(old)
                c.evicted_lru += 1
        await outbox.deliver(dead)
        done.update(map(id, dead_events))
        if to_check:
            c.checked += 0 if again else len(to_check)
            await self.ground(to_check, before, now)
            fresh = []
            for key, msg, item, ev in to_check:
                n = self.attempts.prior(msg)
                if n >= st.poison_attempts:
                    c.poison += 1
                    await outbox.deliver([outbox.dead_letter(msg, Reason.POISON, f"poison: {n} failed attempts (the "
                                                             "pipeline call crashed or stopped the worker each time)")])
                    self.attempts.set_many([(msg, None)])
                    done.add(id(ev))
                else:
                    fresh.append((key, msg, item, n, ev))
            if any(n > 0 for *_, n, _ in fresh):
                # a redelivery after a crash: one call per turn, so only the culprit's count grows
                c.isolated_batches += 1
                groups = [[(k, m, i, ev)] for k, m, i, _, ev in fresh]
            else:  # at most batch_size turns per call: the batch path's size, whatever a take held
                size = st.batch_size
                groups = [[(k, m, i, ev) for k, m, i, _, ev in fresh[j:j + size]] for j in range(0, len(fresh), size)]
            for group in groups:
                await self.check_group([g[:3] for g in group], stamps)
                done.update(id(g[3]) for g in group)

    # -- grounding ----------------------------------------------------------------------------
    async def ground(self, to_check: list[tuple], before: dict, now: float) -> None:
        """Each checked turn's passages onto its CheckItem (in place): its own evidence, then its
        conversation's knowledge once chat.knowledge is applied on those turns' partitions."""
        if self.knowledge is not None:
            await self.knowledge.caught_up({msg.partition for _, msg, _, _ in to_check})
        for key, _, item, _ in to_check:
            turn, prior = before[(item.conversation_id, item.turn_id)]
            known, dropped = self.knowledge.passages(key, prior, now) if self.knowledge is not None else ([], 0)
            item.gold_evidence, item.evidence_note = given_evidence(turn, known, self.evidence_limits, dropped)

    # -- housekeeping -------------------------------------------------------------------------
    def forget(self, key: bytes) -> None:
        """A conversation evicted: its context and its knowledge go together."""
        if key in self.table:
            del self.table[key]
        self.recency.discard(key)
        if self.knowledge is not None and self.knowledge.forget(key):
            self.counters.knowledge_evicted += 1

    def sweep(self, owned: set[int]) -> None:
        """Evict idle conversations of the partitions this worker owns (context and knowledge idle:
        `conversation_idle`), and the least recently active ones beyond `max_conversations` (never
        standby keys: they would diverge from the owner)."""
        st = self.st
        mine = self._owned_states(self.table, owned)
        known = self._owned_states(self.knowledge.table, owned) if self.knowledge is not None else {}
        now = time.time()
        if st.context_idle_s > 0:
            for key in [k for k in mine.keys() | known.keys()
                        if conversation_idle(mine.get(k), known.get(k), now, st.context_idle_s)]:
                self.counters.evicted += key in mine
                self.forget(key)
                mine.pop(key, None)
                known.pop(key, None)
        latest = {k: {"last_seen": max(float((s or {}).get("last_seen", 0.0)) for s in (mine.get(k), known.get(k)))}
                  for k in mine.keys() | known.keys()}
        for key in oldest_beyond(latest, st.max_conversations):
            self.counters.evicted_lru += 1
            self.forget(key)
            known.pop(key, None)
        if self.knowledge is not None:  # and all the knowledge within one worker-wide bound
            self.knowledge.shed(known, self.settings.grounding.knowledge_total_bytes)

    def _owned_states(self, table, owned: set[int]) -> dict:
        return {k: v for k, v in list(table.items()) if self._partition(k) in owned}

    def status_line(self, owned: set[int]) -> str:
        n_turns = sum(len(v["turns"]) for v in self.table.values() if v)
        known = "" if self.knowledge is None else " " + self.knowledge.memory().line()
        return (f"{STATUS_MARKER}: conversations={len(self.table)} turns={n_turns}{known} {self.counters.line()}"
                f" partitions={','.join(map(str, sorted(owned))) or '-'}"
                f" broker={'up' if self.obs.broker.state().up else 'down'}")

    def new_status(self, owned: set[int]) -> str | None:
        """The status line when it differs from the last one given, else None: an idle worker does
        not repeat the same line every `status_interval_s` (liveness is /healthz's)."""
        line = self.status_line(owned)
        if line == self._last_status:
            return None
        self._last_status = line
        return line

    def install_scrubber(self) -> None:
        """Faust configures logging when the worker starts: filter its handlers (and ours) then."""
        install_log_scrubber(self.scrub, max_bytes=4 * self.st.max_reason_bytes)
