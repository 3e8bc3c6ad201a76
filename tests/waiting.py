"""Polling helper for the stream tests: wait for a condition on a real broker or worker, with a
deadline and a message that says what never happened."""
from __future__ import annotations

import time


def wait_until(cond, timeout_s: float, what: str, step: float = 0.2) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(step)
    raise TimeoutError(what)
