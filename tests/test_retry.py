"""schemas/retry.py: the one retry rule (attempts, which errors, the waits) for sync and async callers."""
from __future__ import annotations

import asyncio

import pytest

from schemas.retry import retry_async, retry_call, total_wait, wait_s

pytestmark = pytest.mark.unit


def _flaky(fails: int, error=ConnectionError):
    calls = []

    def attempt():
        calls.append(1)
        if len(calls) <= fails:
            raise error(f"failure {len(calls)}")
        return len(calls)

    return attempt, calls


def test_retries_until_it_returns_and_reports_each_failure():
    attempt, calls = _flaky(2)
    seen = []
    assert retry_call(attempt, attempts=5, backoff_s=0.001, on_retry=seen.append) == 3
    assert [str(e) for e in seen] == ["failure 1", "failure 2"]


def test_gives_up_after_attempts_with_the_last_error_itself():
    attempt, calls = _flaky(10)
    with pytest.raises(ConnectionError, match="failure 3"):
        retry_call(attempt, attempts=3, backoff_s=0.001)
    assert len(calls) == 3


def test_an_error_retry_if_refuses_is_raised_at_once():
    attempt, calls = _flaky(10, error=PermissionError)
    with pytest.raises(PermissionError):
        retry_call(attempt, attempts=5, backoff_s=0.001, retry_if=lambda e: isinstance(e, ConnectionError))
    assert len(calls) == 1


def test_async_retries_on_the_loop():
    attempt, calls = _flaky(1)

    async def coro():
        return attempt()

    assert asyncio.run(retry_async(coro, attempts=None, backoff_s=0.001)) == 2


def test_the_waits_taken_are_the_rule(monkeypatch):
    """What the retry actually sleeps, sync and async: wait_s(0), wait_s(1), ... (no clock read)."""
    import schemas.retry as retry

    slept: list[float] = []
    monkeypatch.setattr(retry, "_sleep", slept.append)
    attempt, _ = _flaky(3)
    retry_call(attempt, attempts=5, backoff_s=0.5, max_backoff_s=1.5)
    assert slept == [0.5, 1.0, 1.5]

    async def record(s):
        slept.append(s)

    slept.clear()
    monkeypatch.setattr(retry, "_async_sleep", record)
    attempt, _ = _flaky(2)

    async def coro():
        return attempt()

    asyncio.run(retry_async(coro, attempts=3, backoff_s=0.25))
    assert slept == [0.25, 0.5] and total_wait(3, backoff_s=0.25) == sum(slept)


def test_the_waits_double_from_the_first_and_are_capped():
    assert [wait_s(i, backoff_s=0.5, max_backoff_s=4.0) for i in range(5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert total_wait(1, backoff_s=0.5) == 0
    assert total_wait(3, backoff_s=0.5, max_backoff_s=10.0) == 1.5
