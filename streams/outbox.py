"""The outbox: how every agent of the worker delivers what it produces and acknowledges its input.

Why one place: the turns agent and the feedback agent (and any agent added later) owe the input
topic the same promises; written once, they are tested once (tests/test_outbox.py), and the
end-to-end kill, poison and soak tests check them through a real worker.

The delivery guarantees:

1. **Ack only after delivery** (`acks.holding`): the one ack rule, streams/kafka/acks.py `Acks` (the
   agents, the take loop and the transport all ask it): every message of a batch is held from the
   moment the batch arrives and given back only when the agent's work on the batch returned, i.e.
   after every output was delivered; when the work raises, nothing of the batch is acked. Faust
   commits only contiguous acked offsets, so an input whose outputs are not out is never committed:
   a crash or a kill redelivers it (at-least-once: outputs may repeat, never go missing).
2. **Outputs awaited** (`deliver`). Records are sent on their own (not attached to an event) and the
   broker's acknowledgement of each is awaited before the batch is acked; Faust flushes the producer
   before it commits offsets, so a commit never outruns an output (the tables' changelog included).
3. **Retry with backoff, then stop without committing** (`deliver`, `fatal`). The records whose send
   failed are sent again with exponential backoff (`send_retries` attempts in all, the first wait
   `send_backoff_s`, doubling, at most `MAX_BACKOFF_S`); still failing, the process exits with 75
   (EX_TEMPFAIL) at once: no shutdown path runs, so no commit, and the batch is redelivered to
   whoever owns its partition next.
4. **Bad input is dead-lettered, never dropped** (`dead_letter`): a record on the dead-letter topic
   with the original key and value (cut to `deadletter_max_bytes`), a short human reason scrubbed of
   secrets (cut to `max_reason_bytes`), its machine code (schemas.Reason) and the source
   topic/partition/offset, delivered like any output (2, 3) before the batch is acked.
5. **Counted**: every dead letter (`Counters.deadlettered`, and `dialcheck_dead_letters_total` by
   code) and every send round that had to be retried (`Counters.send_retries`).

Work before the ack that is not a record (a store commit) goes through a `StoreWriter`: its own
thread, retried with the same backoff, either a number of times (the caller decides what giving up
costs) or for as long as the process runs (`attempts=None`: the feedback agent's judgements, held
unacknowledged until the store takes them). While a store call fails the outage is reported
(`Outage`: /readyz says "degraded", `dialcheck_degraded` is 1) and cleared by the next success.
"""
from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass

from schemas import Reason
from schemas.errors import DialcheckError
from schemas.retry import ATTEMPTS, BACKOFF_S, MAX_BACKOFF_S, retry_async
from schemas.settings import Settings

from .checking import DaemonExecutor, Scrubber, bound
from .deadletter import DeadLetter
from .kafka.acks import Acks

log = logging.getLogger("dialcheck.stream")

EXIT_UNDELIVERED = 75  # outputs could not be delivered: stopped without committing (EX_TEMPFAIL)
FLUSH_TIMEOUT_S = 60.0  # the longest a flush of everything sent may take before the worker stops

Record = tuple  # (topic, key, value, headers): one output to deliver


@dataclass
class Counters:
    """The worker's counters, one set per worker whatever the agent, in the status line's order;
    exported as is (dialcheck_worker_events_total)."""

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
    store_retries: int = 0     # feedback-store calls that failed and were tried again
    handle_failures: int = 0   # steps whose handling raised: their undelivered inputs dead-lettered (internal), then acked
    knowledge: int = 0         # chat.knowledge records applied (kept or deleted; redeliveries included)
    knowledge_dropped: int = 0  # knowledge documents dropped by the per-conversation bounds (the oldest first)
    knowledge_evicted: int = 0  # conversations whose knowledge expired or was evicted with them
    knowledge_waits_expired: int = 0  # steps whose turns were checked before chat.knowledge was applied (streams/knowledge.py)

    def line(self) -> str:
        return " ".join(f"{k}={v}" for k, v in asdict(self).items())


def fatal(what: str) -> None:
    """Outputs cannot be delivered: stop now, without committing (the held events are not acked,
    and no shutdown path runs), so the batch is redelivered to whoever owns it next."""
    log.critical("%s; stopping without commit so the batch is redelivered", what)
    for h in logging.getLogger().handlers:
        h.flush()
    sys.stdout.flush()
    os._exit(EXIT_UNDELIVERED)


class Outage:
    """What is unavailable right now and why (a scrubbed, short reason), for /readyz and a gauge;
    read by the metrics thread, written on the event loop."""

    def __init__(self):
        self._lock = threading.Lock()
        self._parts: set[str] = set()  # every part watched (the gauge says 0 for those up)
        self._down: dict[str, tuple[str, float]] = {}  # part → (reason, since)

    def watch(self, part: str) -> None:
        with self._lock:
            self._parts.add(part)

    def states(self) -> dict[str, bool]:
        """Every watched part → True while it is down."""
        with self._lock:
            return {p: p in self._down for p in sorted(self._parts | set(self._down))}

    def down(self, part: str, reason: str) -> None:
        with self._lock:
            since = self._down.get(part, (None, time.time()))[1]
            self._down[part] = (reason, since)

    def up(self, part: str) -> None:
        with self._lock:
            self._down.pop(part, None)

    def current(self) -> dict[str, dict]:
        with self._lock:
            return {p: {"reason": r, "since": round(s, 3)} for p, (r, s) in self._down.items()}


class Outbox:
    """Delivery and acknowledgement for every agent of one worker app (the guarantees above).
    `app` is the Faust app (its producer is flushed); `dead_topic` the dead-letter topic; `acks` the
    app's one ack rule (streams/kafka/app.py `KafkaApp.acks`), never a second one built here."""

    def __init__(self, app, settings: Settings, *, dead_topic, obs, acks: Acks,
                 scrub: Scrubber | None = None, counters: Counters | None = None):
        self.app, self.st = app, settings.stream
        self.acks = acks
        self.dead_topic, self.obs = dead_topic, obs
        self.scrub = scrub or Scrubber.from_settings(settings)
        self.counters = counters or Counters()

    # -- outputs ------------------------------------------------------------------------------
    async def deliver(self, records: list[Record]) -> None:
        """Send (topic, key, value, headers) records and wait until the broker acknowledged each;
        the failed ones again with backoff; `fatal` after `send_retries` attempts."""
        pending = list(records)
        if not pending:
            return

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

        try:
            await retry_async(attempt, attempts=self.st.send_retries, backoff_s=self.st.send_backoff_s)
        except Exception as e:  # noqa: BLE001
            fatal(f"could not deliver {len(pending)} records after {self.st.send_retries} attempts: "
                  f"{bound(self.scrub(repr(e)), 300)}")

    async def flush(self, what: str) -> None:
        """Wait until every record sent so far (the tables' changelog included) is acknowledged;
        `fatal` when that fails or takes longer than FLUSH_TIMEOUT_S (a dead broker must not hang a
        partition forever while heartbeats keep the worker in its group)."""
        try:
            await asyncio.wait_for(self.app.producer.flush(), timeout=FLUSH_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001
            fatal(f"could not write {what}: {bound(self.scrub(repr(e)), 300)}")

    def dead_letter(self, msg, code: Reason, reason: str) -> Record:
        """The dead-letter record for `msg` (to `deliver`): original bytes, code, scrubbed short reason."""
        reason = bound(self.scrub(reason), self.st.max_reason_bytes)
        dl = DeadLetter(Reason(code).value, reason, msg.topic, msg.partition, msg.offset, msg.key,
                        msg.value).bounded(self.st.deadletter_max_bytes)
        log.warning("dead-letter %s/%d@%d [%s]: %s", msg.topic, msg.partition, msg.offset, dl.code, reason)
        self.counters.deadlettered += 1
        self.obs.dead_letter(code)
        key = None if dl.key is None else bytes(dl.key)
        return (self.dead_topic, key, bytes(dl.value) if dl.value is not None else b"", dl.headers())

    async def dead_letter_range(self, topic: str, partition: int, first: int, last: int, reason: str) -> None:
        """Dead letters for offsets first..last of a partition, delivered: a record batch the consumer
        could not decode (streams/kafka/internals.py point 5); reported on /readyz and /metrics."""
        why = f"undecodable record batch (offsets {first}-{last}): {reason}"
        log.error("%s/%d@%d-%d: %s", topic, partition, first, last, why)
        await self.deliver([self.dead_letter(_Source(topic, partition, off), Reason.UNDECODABLE, why)
                            for off in range(first, last + 1)])
        self.obs.undecodable(f"{topic}/{partition}@{first}-{last}: {reason}")


@dataclass(frozen=True)
class _Source:
    """The coordinates of one offset that has no message, shaped like a message for `dead_letter`."""
    topic: str
    partition: int
    offset: int
    key: bytes | None = None
    value: bytes | None = None


class StoreWriter:
    """A store (the feedback store) behind one thread of its own, so its commits (fsync, a network
    round trip) never block the event loop's heartbeats; calls retried with the outbox's backoff.
    While a call keeps failing the store is reported down (`outage`, part "feedback_store")."""

    PART = "feedback_store"

    def __init__(self, store, *, backoff_s: float = BACKOFF_S, scrub: Scrubber | None = None,
                 outage: Outage | None = None, counters: Counters | None = None):
        self.store, self.backoff_s = store, backoff_s
        self.scrub = scrub or Scrubber([])
        self.outage = outage or Outage()
        self.outage.watch(self.PART)
        self.counters = counters or Counters()
        self.executor = DaemonExecutor("feedback-store")
        self._in_flight = 0  # calls started and not finished (retries and their waits included)
        self._failed_at = 0.0  # monotonic time of the last failed attempt

    def is_down(self) -> bool:
        return self.PART in self.outage.current()

    async def call(self, fn, *args, attempts: int | None = ATTEMPTS):
        """`fn(*args)` in the store thread until it succeeds, `attempts` times at most (None: for as
        long as the process runs); the last error raised. A failure reports the store down (the
        reason scrubbed), a success up again."""
        loop = asyncio.get_running_loop()

        def failed(e: BaseException) -> None:
            self._failed_at = time.monotonic()
            self.counters.store_retries += 1
            reason = bound(self.scrub(repr(e)), 300)
            if not self.is_down():
                log.error("feedback store unavailable (%s); retrying with backoff", reason)
            self.outage.down(self.PART, reason)

        async def attempt():
            try:
                return await loop.run_in_executor(self.executor, fn, *args)
            except Exception as e:
                if attempts == 1:  # no retry follows: still report it
                    failed(e)
                raise

        self._in_flight += 1
        try:
            result = await retry_async(attempt, attempts=attempts, backoff_s=self.backoff_s, on_retry=failed)
        finally:
            self._in_flight -= 1
        if self.is_down():
            log.warning("feedback store available again")
            self.outage.up(self.PART)
        return result

    async def call_unless_down(self, fn, *args, attempts: int = ATTEMPTS):
        """For work that may be left undone (the verdicts kept for joining feedback): while the store
        is down, it is tried once, and only when no other call is already waiting on it and
        MAX_BACKOFF_S passed since the last failure; else `StoreDown` at once, so an outage never
        slows the caller (the turns) by a busy timeout per batch."""
        if self.is_down():
            if self._in_flight or time.monotonic() - self._failed_at < MAX_BACKOFF_S:
                raise StoreDown(self.outage.current().get(self.PART, {}).get("reason", "down"))
            attempts = 1
        return await self.call(fn, *args, attempts=attempts)


class StoreDown(DialcheckError, RuntimeError):
    """The store is known to be down: the call was not tried."""
