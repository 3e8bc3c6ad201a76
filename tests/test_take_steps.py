"""`StepStream.take_steps` (streams/kafka/internals.py point 7): where a step ends, on a real Faust agent over Faust's in-memory
transport (its `test_context`; the broker tests run it against the embedded Kafka broker)."""
from __future__ import annotations

import asyncio
import itertools

import pytest

from streams.kafka.internals import StepStream

pytestmark = pytest.mark.unit

_apps = itertools.count()


def steps_of(values: list, *, settle_s: float = 0.0, **take) -> list[list]:
    """The steps `take_steps(**take)` cuts `values` into, put one after the other without waiting;
    after the first `len(values) // 2` values, `settle_s` seconds pass before the rest."""
    import faust

    app = faust.App(f"take-steps-{next(_apps)}", broker="kafka://127.0.0.1:1", Stream=StepStream)  # never dialled: test_context is in memory
    steps: list[list] = []

    @app.agent()
    async def agent(stream):
        async for events in stream.take_steps(**take):
            steps.append([e.value for e in events])

    async def main() -> None:
        async with agent.test_context() as ctx:
            for i, v in enumerate(values):
                if settle_s and i == len(values) // 2:
                    await asyncio.sleep(settle_s)
                await ctx.put(v, wait=False)
            while sum(map(len, steps)) < len(values):
                await asyncio.sleep(0.01)

    asyncio.run(asyncio.wait_for(main(), timeout=30))
    return steps


def test_a_step_ends_when_its_turns_to_check_fill_the_weight():
    values = [{"n": i, "check": i % 3 == 0} for i in range(12)]  # to check: 0, 3, 6, 9
    steps = steps_of(values, max_events=100, within=60.0, idle_s=0.05,
                     weigh=lambda e: int(e.value["check"]), max_weight=2)
    assert [[v["n"] for v in s] for s in steps][0] == [0, 1, 2, 3]  # the second turn to check ends it
    assert [v["n"] for s in steps for v in s] == list(range(12))  # in order, each once


def test_a_step_ends_at_max_events_whatever_its_weight():
    steps = steps_of([{"n": i} for i in range(10)], max_events=4, within=60.0, idle_s=0.05,
                     weigh=lambda e: 0, max_weight=2)
    assert [len(s) for s in steps][:2] == [4, 4]


def test_a_part_filled_step_ends_when_nothing_more_arrives_not_after_within():
    """within is a minute: only the idle rule can hand out the first half before the rest comes."""
    steps = steps_of([{"n": i} for i in range(6)], settle_s=0.5, max_events=100, within=60.0, idle_s=0.05)
    assert [[v["n"] for v in s] for s in steps] == [[0, 1, 2], [3, 4, 5]]


def test_without_the_idle_rule_a_step_waits_within():
    steps = steps_of([{"n": i} for i in range(6)], settle_s=0.3, max_events=100, within=1.5, idle_s=0.0)
    assert [[v["n"] for v in s] for s in steps] == [[0, 1, 2, 3, 4, 5]]  # the pause (0.3 s) fell within
