"""`StepStream.take_steps` (streams/kafka/internals.py point 7): where a step ends, on a real Faust agent over Faust's in-memory
transport (its `test_context`; the broker tests run it against the embedded Kafka broker)."""
from __future__ import annotations

import asyncio
import itertools

import pytest

from streams.kafka.internals import StepStream

pytestmark = pytest.mark.unit

_apps = itertools.count()


def steps_of(values: list, *, between=None, **take) -> list[list]:
    """The steps `take_steps(**take)` cuts `values` into, put one after the other without waiting;
    after the first `len(values) // 2` values, `await between(steps)` runs before the rest."""
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
                if between is not None and i == len(values) // 2:
                    await between(steps)
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


async def _until_a_step(steps: list) -> None:
    """Wait (at most 30 s) for a step to be handed out."""
    for _ in range(3000):
        if steps:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("no step within 30 s")


def test_a_part_filled_step_ends_when_nothing_more_arrives_not_after_within():
    """within is a minute and the step is not full: only the idle rule can hand the first half out
    before the rest is put (without it this waits 30 s and fails)."""
    steps = steps_of([{"n": i} for i in range(6)], between=_until_a_step, max_events=100, within=60.0, idle_s=0.05)
    firsts = [v["n"] for v in steps[0]]
    assert firsts and set(firsts) <= {0, 1, 2}
    assert [v["n"] for s in steps for v in s] == list(range(6))
    assert not any({v["n"] for v in s} & {0, 1, 2} and {v["n"] for v in s} & {3, 4, 5} for s in steps)


def test_without_the_idle_rule_a_step_waits_within():
    """No idle rule: a pause hands nothing out (a step ends only when full here, within is a minute)."""
    async def pause(steps):
        await asyncio.sleep(0.2)
        assert steps == []
    steps = steps_of([{"n": i} for i in range(6)], between=pause, max_events=6, within=60.0, idle_s=0.0)
    assert [[v["n"] for v in s] for s in steps] == [[0, 1, 2, 3, 4, 5]]
