"""What the worker does with chat.feedback: validate, dead-letter, store, then ack.

Why in the worker (a second agent of the same Faust app) and not a service of its own: the worker
already has the dead-letter topic, the delivery rules and the store of the verdicts it published;
feedback is a trickle beside the turns. The guarantees are the turns' (streams/turn_worker.py):
every event of a batch is held until its outputs are done (dead letters delivered, judgements
committed to the store), so a crash before the commit redelivers the batch, and the store's
natural key makes the redelivery land on the same rows. A store that keeps failing stops the
worker without committing, like a send that keeps failing.

Store calls run in one thread of their own (`store_executor`): SQLite commits (fsync) never
block the event loop's heartbeats."""
from __future__ import annotations

import asyncio
import logging

from schemas import InvalidEvent, Reason
from schemas.feedback import parse_feedback

from .checking import DaemonExecutor, bound, validate_keyed
from .feedback_store import FeedbackStore
from .turn_worker import fatal

log = logging.getLogger("dialcheck.feedback")

STORE_RETRIES = 5


def validate_feedback(key: bytes | None, value: bytes | None, max_bytes: int, max_depth: int):
    """Wire bytes → Feedback, or InvalidEvent(code, reason); keyed by conversation id like turns."""
    return validate_keyed(key, value, lambda raw: parse_feedback(raw, max_bytes=max_bytes, max_depth=max_depth),
                          max_bytes, "feedback")


class StoreWriter:
    """The store behind one thread, with retries; shared by the feedback agent and the verdict path."""

    def __init__(self, store: FeedbackStore, backoff_s: float = 0.5):
        self.store, self.backoff_s = store, backoff_s
        self.executor = DaemonExecutor("feedback-store")

    async def call(self, fn, *args, retries: int = STORE_RETRIES):
        """`fn(*args)` in the store thread; retried with exponential backoff; the last error raised."""
        from tenacity import AsyncRetrying, stop_after_attempt, wait_exponential

        loop = asyncio.get_running_loop()
        async for attempt in AsyncRetrying(stop=stop_after_attempt(retries), reraise=True,
                                           wait=wait_exponential(multiplier=self.backoff_s, max=10)):
            with attempt:
                return await loop.run_in_executor(self.executor, fn, *args)


class FeedbackWorker:
    """The chat.feedback agent's work on one batch (`handle`). Uses the TurnWorker's delivery,
    dead letters, scrubber, counters and metrics (one set per worker)."""

    def __init__(self, turns, writer: StoreWriter):
        self.turns, self.writer = turns, writer
        self.st = turns.st

    async def handle(self, events) -> None:
        tw, st = self.turns, self.st
        held = [ev.message for ev in events]
        for m in held:
            m.incref()  # acked below, only once the dead letters are out and the judgements committed
        good, dead = [], []
        for ev in events:
            msg = ev.message
            try:
                good.append(validate_feedback(msg.key, msg.value, st.max_event_bytes, st.max_json_depth))
            except InvalidEvent as e:
                dead.append(tw.dead_letter(msg, e.code, e.reason))
        await tw.deliver(dead)
        if good:
            try:
                await self.writer.call(self.writer.store.add_feedback, good)
            except Exception as e:  # noqa: BLE001
                fatal(f"could not write {len(good)} feedback records to the store: {bound(tw.scrub(repr(e)), 300)}")
            tw.counters.feedback += len(good)
            if st.trace_records:
                log.info("trace feedback stored %s", " ".join(f"{m.partition}@{m.offset}" for m in held))
        for m in held:
            m.ack(tw.app.consumer)
