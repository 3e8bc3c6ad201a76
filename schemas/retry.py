"""One retry rule for every retry in the runtime: exponential backoff from a first wait, doubling,
capped, over tenacity.

Why here (the ground floor): the outbox's sends, the feedback store's calls and the LLM client's
requests all retry; written once, the waits agree and a deadline computed from them (`total_wait`)
matches what actually happens. The defaults are the one home of the backoff values the settings
(`DIALCHECK_SEND_BACKOFF_S`, `DIALCHECK_SEND_RETRIES`) default to.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable, TypeVar

import tenacity

BACKOFF_S = 0.5      # the first wait after a failure; each next one doubles
ATTEMPTS = 5         # attempts in all (the first included) where a caller takes the default
MAX_BACKOFF_S = 10.0  # the longest wait between two attempts

T = TypeVar("T")
OnRetry = Callable[[BaseException], None]


def wait_s(i: int, *, backoff_s: float = BACKOFF_S, max_backoff_s: float = MAX_BACKOFF_S) -> float:
    """The wait after the (i+1)-th failed attempt (i from 0): `backoff_s * 2**i`, at most `max_backoff_s`."""
    return min(backoff_s * 2 ** i, max_backoff_s)


def total_wait(attempts: int, *, backoff_s: float = BACKOFF_S, max_backoff_s: float = MAX_BACKOFF_S) -> float:
    """The waits `attempts` attempts add up to at most (for a deadline that covers every retry)."""
    return sum(wait_s(i, backoff_s=backoff_s, max_backoff_s=max_backoff_s) for i in range(max(attempts - 1, 0)))


# the waits themselves, looked up at each wait: a test records them here instead of timing a clock
_sleep: Callable[[float], None] = time.sleep
_async_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep


def _options(attempts: int | None, backoff_s: float, max_backoff_s: float,
             retry_if: Callable[[BaseException], bool], on_retry: OnRetry | None) -> dict:
    def before_sleep(state: tenacity.RetryCallState) -> None:
        if on_retry is not None:
            on_retry(state.outcome.exception())

    def wait(state: tenacity.RetryCallState) -> float:  # the rule above, so `total_wait` holds by construction
        return wait_s(state.attempt_number - 1, backoff_s=backoff_s, max_backoff_s=max_backoff_s)

    return dict(stop=tenacity.stop_never if attempts is None else tenacity.stop_after_attempt(attempts),
                wait=wait, retry=tenacity.retry_if_exception(retry_if), reraise=True, before_sleep=before_sleep)


def _always(_: BaseException) -> bool:
    return True


def retry_call(attempt: Callable[[], T], *, attempts: int | None = ATTEMPTS, backoff_s: float = BACKOFF_S,
               max_backoff_s: float = MAX_BACKOFF_S, retry_if: Callable[[BaseException], bool] = _always,
               on_retry: OnRetry | None = None) -> T:
    """`attempt()` until it returns, `attempts` times in all (None: for as long as the process runs),
    retrying only errors `retry_if` accepts; the last error is raised as is. `on_retry(error)` runs
    before each wait."""
    for retry in tenacity.Retrying(sleep=lambda s: _sleep(s),
                                   **_options(attempts, backoff_s, max_backoff_s, retry_if, on_retry)):
        with retry:
            return attempt()
    raise AssertionError("unreachable: tenacity re-raises the last error")  # pragma: no cover


async def retry_async(attempt: Callable[[], Awaitable[Any]], *, attempts: int | None = ATTEMPTS,
                      backoff_s: float = BACKOFF_S, max_backoff_s: float = MAX_BACKOFF_S,
                      retry_if: Callable[[BaseException], bool] = _always,
                      on_retry: OnRetry | None = None) -> Any:
    """`retry_call` for a coroutine function: the waits are `asyncio.sleep`, the loop keeps running."""
    async for retry in tenacity.AsyncRetrying(sleep=lambda s: _async_sleep(s),
                                              **_options(attempts, backoff_s, max_backoff_s, retry_if, on_retry)):
        with retry:
            return await attempt()
    raise AssertionError("unreachable: tenacity re-raises the last error")  # pragma: no cover
