"""The one ack rule: an input is done when the work on it returned with every output delivered.

Who asks (each through this object, never on its own terms):
- the agents (`holding`): every message of a step is held (an extra reference) from the moment the
  step arrives; the references are given back, and so the step acknowledged, only when the agent's
  work on it returned, i.e. after every output was delivered (streams/outbox.py `deliver`). When the
  work raises, nothing of the step is acknowledged.
- the take loop (`step_returned`, streams/kafka/internals.py `StepStream.take_steps`): gives back the
  stream's own reference after the agent's loop body returned, like Faust's `take_events` does in a
  `finally`; alone it would acknowledge a step whose handler raised, which is why the agents hold.
- the transport (`may_commit`, `countable`): Faust commits only a contiguous run of acknowledged
  offsets; an offset at the committed position that is neither acknowledged nor a known gap is still
  in flight, so nothing may be committed over it; offsets that have no message (an undecodable batch,
  dead-lettered) count as done only after their dead letters were delivered.
Faust commits what this rule acknowledged (its flush of the producer first), so a crash can repeat
outputs, never lose an input whose outputs are not out.
"""
from __future__ import annotations

import contextlib
import logging
from typing import Any, Callable, Iterable

log = logging.getLogger("dialcheck.stream")


class Acks:
    """When an input counts as done, for one app. `consumer()` is the app's consumer (Faust builds it
    lazily, after this object); `trace` logs every acknowledgement (`stream.trace_records`)."""

    def __init__(self, consumer: Callable[[], Any], *, trace: bool = False):
        self._consumer, self.trace = consumer, trace

    # -- the agents -----------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def holding(self, events: Iterable):
        """Hold every message of `events` for the body; give them back when the body returned (its
        outputs delivered), none when it raised. Yields the held messages."""
        held = [ev.message for ev in events]
        for m in held:
            m.incref()
        yield held
        if self.trace:
            log.info("trace ack %s", " ".join(f"{m.partition}@{m.offset}" for m in held))
        consumer = self._consumer()
        for m in held:
            m.ack(consumer)

    # -- the take loop --------------------------------------------------------------------------
    @staticmethod
    async def step_returned(stream, events: Iterable) -> None:
        """The stream's own reference on each event of a step, given back after the step's consumer
        returned (or raised): the message is done only when the agent's hold is given back too."""
        for event in events:
            await stream.ack(event)

    # -- the transport --------------------------------------------------------------------------
    @staticmethod
    def may_commit(committed: int | None, acked, gaps) -> bool:
        """False while the offset at the committed position (the next one to read) is neither
        acknowledged nor a known gap but later offsets are acknowledged: it is still in flight, and a
        commit of the acknowledged run after it would skip it after a crash."""
        if committed is None or not acked:
            return True
        return not (min(acked) > committed and committed not in acked and not gaps.at(committed))

    @staticmethod
    def countable(committed: int | None, index, offset: int) -> bool:
        """An offset without a message (its dead letter delivered) counts as acknowledged once, and
        only at or after the committed position."""
        return (committed is None or offset >= committed) and offset not in index
