"""How the worker cuts its input into steps: `take_steps`, Faust's `Stream.take_events` with two
more ways for a step to end.

Why not `take_events` as it is (measured with bench/bench_stream.py, docs/results.md):
- it counts records, and most records of a chat are context (a replayed DialFact conversation has ~5
  turns per checked one): a step of 256 records held 42-52 turns to check, so steps ended in
  part-filled model batches (14 pipeline calls for 192 claims where 12 suffice). Here a step also
  ends when the turns it holds to check fill `max_weight` (a whole number of model batches);
- after a step it waits its full `within` for the buffer to fill, even when nothing more is coming:
  0.2 s at the end of every burst, and ~0.2 s before a lone turn is checked. Here a step also ends
  when nothing new arrived for `idle_s` (the records already fetched are taken in a few ms).

Everything else is `take_events`' (faust-streaming 0.15, faust/streams.py): the buffering processor,
acks disabled while buffering and each event acked after the consumer of the step returned (the
outbox holds its own reference until the step's outputs are delivered, streams/outbox.py), and the
generator registered with the stream so that stopping the stream closes it.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, AsyncGenerator, Callable, Sequence

from mode.utils.aiter import aiter
from mode.utils.futures import notify

log = logging.getLogger("dialcheck.stream")


def take_steps(stream, *, max_events: int, within: float, idle_s: float = 0.0,
               weigh: Callable[[Any], int] | None = None, max_weight: int | None = None) -> AsyncGenerator[Sequence, None]:
    """Lists of buffered events: a list is handed out when it holds `max_events` events, or the
    weights (`weigh(event)`) of its events reach `max_weight`, or nothing arrived for `idle_s` (0:
    not this rule), or `within` seconds passed since its first event arrived."""
    agen = _take_steps(stream, max_events, within, idle_s, weigh, max_weight)
    active = getattr(stream, "_active_agens", None)  # Stream.on_stop closes the generators it tracks
    if active is not None:
        active.add(agen)
    return agen


async def _take_steps(stream, max_events: int, within: float, idle_s: float,
                      weigh: Callable[[Any], int] | None, max_weight: int | None) -> AsyncGenerator[Sequence, None]:
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
            event = stream.current_event
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
                await stream.wait(consumed)  # never more than a full step in the buffer
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("error adding to the take buffer: %r", exc)
            await stream.crash(exc)
        return value

    enable_acks = stream.enable_acks
    stream.enable_acks = False  # acked below, after the step's consumer returned
    stream.add_processor(add_to_buffer)
    stream._enable_passive(aiter(stream.channel))
    try:
        while not stream.should_stop:
            if not events:
                arrived.clear()
                await stream.wait_for_stopped(arrived)
                continue
            now = loop.time()
            wait = first_at + within - now
            if idle_s > 0:
                wait = min(wait, last_at + idle_s - now)
            if not full.is_set() and wait > 0:
                await stream.wait_for_stopped(full, timeout=wait)
                continue
            consuming = loop.create_future()
            try:
                yield list(events)
            finally:
                taken = list(events)
                events.clear()
                weight = 0
                for event in taken:
                    await stream.ack(event)
                notify(consuming)
                full.clear()
                consumed.set()
    finally:
        stream.enable_acks = enable_acks
        stream._processors.remove(add_to_buffer)
