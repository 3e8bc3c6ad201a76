"""What the worker does with chat.feedback: validate, dead-letter, store, then ack.

Why in the worker (a second agent of the same Faust app) and not a service of its own: the worker
already has the dead-letter topic, the outbox and the store of the verdicts it published; feedback
is a trickle beside the turns. The delivery guarantees are the outbox's (streams/outbox.py): every
event of a batch is held until its outputs are done (dead letters delivered, judgements committed
to the store), so a crash before the commit redelivers the batch, and the store's natural key makes
the redelivery land on the same rows.

A store that fails (a PostgreSQL server gone, a locked or read-only SQLite file) does not stop the
worker: the batch stays unacknowledged and its write is retried with backoff (at most
`schemas.retry.MAX_BACKOFF_S` apart) for as long as the process runs, the outage is reported (`/readyz`,
`dialcheck_degraded`), and the turns go on being checked. Nothing is lost: when the store is back,
the held batch is written and only then acknowledged.

Store calls run in one thread of their own (`StoreWriter`): commits never block the event loop's
heartbeats."""
from __future__ import annotations

import logging

from schemas import InvalidEvent
from schemas.feedback import parse_feedback

from .checking import validate_keyed
from .outbox import Outbox, StoreWriter

log = logging.getLogger("dialcheck.feedback")


def validate_feedback(key: bytes | None, value: bytes | None, max_bytes: int, max_depth: int):
    """Wire bytes → Feedback, or InvalidEvent(code, reason); keyed by conversation id like turns."""
    return validate_keyed(key, value, lambda raw: parse_feedback(raw, max_bytes=max_bytes, max_depth=max_depth),
                          max_bytes, "feedback")


class FeedbackWorker:
    """The chat.feedback agent's work on one batch (`handle`), through the worker's outbox."""

    def __init__(self, outbox: Outbox, writer: StoreWriter):
        self.outbox, self.writer = outbox, writer
        self.st = outbox.st

    async def handle(self, events) -> None:
        outbox, st = self.outbox, self.st
        async with outbox.acks.holding(events) as held:
            good, dead = [], []
            for ev in events:
                msg = ev.message
                try:
                    good.append(validate_feedback(msg.key, msg.value, st.max_event_bytes, st.max_json_depth))
                except InvalidEvent as e:
                    dead.append(outbox.dead_letter(msg, e.code, e.reason))
            await outbox.deliver(dead)
            if good:
                # until it is written: a store outage holds this batch (unacknowledged), never drops it
                await self.writer.call(self.writer.store.add_feedback, good, attempts=None)
                outbox.counters.feedback += len(good)
                if st.trace_records:
                    log.info("trace feedback stored %s", " ".join(f"{m.partition}@{m.offset}" for m in held))
