"""The overlap runner (settings `perf.overlap_parts`): a batch goes through the chain in parts, the NLI
model reading one part on a thread while the stages before it run on the next part.

Why a part may be split only at the NLI reader, and only when everything before it is declared
"beside_nli" (workers/state.py CAPABILITIES): the stages before it then never call the NLI model, so
nothing of theirs waits for the reads or changes their order; the stages after the reader (the judge)
run once on the whole batch (the judge's budget is per batch). Each claim gets the same stages and
the same numbers as unsplit; only the wall clock changes."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Callable, Sequence

from .chain import degrading, run_stages, share, views
from .state import ClaimState, Stage


class OverlapRunner:
    """Splits a batch into `parts` around the chain's NLI reader; one thread for the reads, started
    on first use."""

    def __init__(self, parts: int, check_contracts: bool = False):
        self.parts, self.check_contracts = parts, check_contracts
        self._pool: ThreadPoolExecutor | None = None

    def split_at(self, stages: Sequence[Stage], claims: int, nli, hooked: bool = False) -> int | None:
        """Where the batch may be split (the index of the NLI reader), or None: only with more than
        one part, a part of at least one claim, no hook swapping the reader's inputs (`hooked`), an
        NLI model that may be called from another thread (`any_thread`, workers/models/nli_base.py),
        and only when every stage before the reader is "beside_nli" (the gate and R5 call the NLI
        model, so r4g and r5 run unsplit)."""
        if self.parts < 2 or claims < self.parts or hooked or not getattr(nli, "any_thread", False):
            return None
        at = next((i for i, st in enumerate(stages) if "begin" in st.can), None)
        if at is None or not all("beside_nli" in st.can for st in stages[:at]):
            return None
        return at

    def run(self, stages: Sequence[Stage], at: int, states: list[ClaimState], shared: dict[int, int]) -> None:
        """The chain over `states` in parts, split at `at` (`split_at`)."""
        head, reader, tail = stages[:at], stages[at], stages[at + 1:]
        n = self.parts
        finish = None
        for part in (states[i * len(states) // n:(i + 1) * len(states) // n] for i in range(n)):
            run_stages(head, part, shared, self.check_contracts)
            if finish is not None:
                finish()
            finish = self._begin(reader, part, shared)
        finish()
        run_stages(tail, states, shared, self.check_contracts)  # once for the whole batch

    def _begin(self, stage: Stage, part: list[ClaimState], shared: dict[int, int]) -> Callable[[], None]:
        """Start `stage` (the NLI reader) on `part`, its reads on the thread; the returned call waits
        for them and postprocesses. The stage's time per claim is its own work: preprocess, the reads
        (on the thread) and postprocess, not the wait."""
        todo = [st for st in part if not st.skip_reason]
        if not todo:
            return lambda: None
        states = views(todo, stage, self.check_contracts)
        reads, read_ms = [], []

        def submit(fn):
            def timed_read():
                t = time.perf_counter()
                try:
                    return fn()
                finally:
                    read_ms.append((time.perf_counter() - t) * 1000)
            reads.append(self._thread().submit(timed_read))
            return reads[-1]

        t = time.perf_counter()
        finish = degrading(stage, states, stage.begin, states, submit)
        ms = (time.perf_counter() - t) * 1000

        def done() -> None:
            nonlocal ms
            if finish is not None:
                wait(reads)  # the reads' time is counted on their thread
                t = time.perf_counter()
                degrading(stage, states, finish)
                ms += (time.perf_counter() - t) * 1000 + sum(read_ms)
            share(stage, todo, ms, shared)
        return done

    def _thread(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="dialcheck-overlap")
        return self._pool
