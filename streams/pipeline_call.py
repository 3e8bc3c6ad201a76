"""The checker call of the stream worker: in a thread of its own, with a deadline, never losing a claim.

Why a thread: a multi-second model call on the event loop would stop Faust's heartbeats and cost the
worker its partitions. Why a deadline: one hung call (a model server that never answers) would
otherwise stall every partition this worker owns; past `batch_deadline_s` the call is abandoned (a
thread cannot be killed: it keeps running, and a fresh thread takes the next batch) and its items
get error verdicts. A call that raises costs only the item that raised (`checking.check_safely`).
"""
from __future__ import annotations

import asyncio
import logging

from schemas import Reason
from schemas.protocols import Checker
from schemas.settings import Settings

from .checking import DaemonExecutor, check_safely, error_verdict
from .outbox import Counters

log = logging.getLogger("dialcheck.stream")


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
