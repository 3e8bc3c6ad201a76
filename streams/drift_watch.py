"""The drift alarm in the worker's log: one line when it starts, one when it ends.

Why: the alarm was on /metrics and in `dialcheck feedback stats` only, so an operator reading the
worker's log never saw it. The same pooled rows as /metrics' `dialcheck_precision_alarm{nli_version
="all"}` (streams/precision.py, read from the feedback store), looked at no more often than
`every_s` (a store read), and said only when the set of alarming buckets changes: a log line per
change, never one per check."""
from __future__ import annotations

import time
from typing import Callable

from .precision import ALL_VERSIONS

CHECK_EVERY_S = 60.0


class DriftWatch:
    """`line()` → the line to log when the alarm started, changed or ended since the last look, else None."""

    def __init__(self, store, target: float, confidence: float, every_s: float = CHECK_EVERY_S,
                 clock: Callable[[], float] = time.monotonic):
        self.store, self.target, self.confidence, self.every_s, self.clock = store, target, confidence, every_s, clock
        self.alarming: frozenset[str] = frozenset()
        self.next_at = 0.0

    def line(self) -> str | None:
        now = self.clock()
        if now < self.next_at:
            return None
        self.next_at = now + self.every_s
        try:
            rows = self.store.precision_by_version(self.target, self.confidence).get(ALL_VERSIONS, [])
        except Exception:  # noqa: BLE001 - the store down: /readyz and the degraded gauge say so, not this line
            return None
        now_alarming = frozenset(r.label for r in rows if r.alarm)
        if now_alarming == self.alarming:
            return None
        was, self.alarming = self.alarming, now_alarming
        if not now_alarming:
            return f"drift alarm ended: shown-badge precision of {', '.join(sorted(was))} back within target {self.target}"
        why = "; ".join(f"{r.label} right {r.right} of {r.n}, upper end {r.upper:.3f}" for r in rows if r.alarm)
        return (f"drift alarm {'started' if not was else 'changed'}: shown-badge precision below target "
                f"{self.target} ({why}); `dialcheck feedback stats` for the rows")
