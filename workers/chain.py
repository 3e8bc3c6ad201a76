"""Running a chain of stages over a batch, timed: what the Pipeline and the overlap runner share.

Timings (verdict `timings_ms`): a per-claim stage (`batched=False`: a loop over claims, nothing
shared) runs claim by claim and each claim gets its own milliseconds; a batched stage (one model
or search call for the whole batch) cannot be split, so each claim gets the batch's time divided
by the claims that shared it, and `shared` records by how many (the verdict's `batch_items`).
Only the declared outages (`OUTAGES`) reach a stage's `on_outage`; any other exception is a bug and
propagates."""
from __future__ import annotations

import time
from typing import Callable, Sequence

from schemas.errors import in_stage
from schemas.protocols import ModelUnavailable, SearchUnavailable

from .state import ClaimState, Stage, checked

OUTAGES = (ModelUnavailable, SearchUnavailable)


def views(states: list[ClaimState], stage: Stage, check_contracts: bool) -> list:
    """The states as `stage` may touch them (checked views with `stages.check_contracts`)."""
    return checked(states, stage) if check_contracts else states


def degrading(stage: Stage, states: list, call: Callable, *args):
    """`call(*args)`; a declared outage (OUTAGES) is the stage's to degrade (`on_outage`): None.
    Any other exception propagates with the stage's name noted on it (the error verdict names it)."""
    try:
        return call(*args)
    except OUTAGES as e:
        stage.on_outage(states, e)
        return None
    except Exception as e:
        in_stage(e, stage.name)
        raise


def timed(stage: Stage, states: list[ClaimState], check_contracts: bool = False) -> float:
    """Milliseconds of one stage call; a declared outage is the stage's to degrade."""
    states = views(states, stage, check_contracts)
    t = time.perf_counter()
    degrading(stage, states, stage.run, states)
    return (time.perf_counter() - t) * 1000


def share(stage: Stage, todo: list[ClaimState], ms: float, shared: dict[int, int]) -> None:
    """A batched stage's milliseconds split evenly over the claims that shared the call."""
    for st in todo:
        st.timings[stage.name] = round(ms / len(todo), 2)
        shared[id(st)] = len(todo)


def run_stages(stages: Sequence[Stage], states: list[ClaimState], shared: dict[int, int],
               check_contracts: bool = False) -> None:
    """Each stage over the claims no earlier stage answered (not check-worthy), in order."""
    for stage in stages:
        todo = [st for st in states if not st.skip_reason]
        if not stage.batched:
            for st in todo:
                st.timings[stage.name] = round(timed(stage, [st], check_contracts), 2)
        elif todo:
            share(stage, todo, timed(stage, todo, check_contracts), shared)
