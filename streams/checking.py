"""Between the wire and the pipeline: validate an event, call the pipeline so nothing is dropped,
and keep every text that leaves the worker short and free of secrets.

Why separate from the Faust app: these rules decide what reaches the dead-letter topic and what a
verdict looks like when the pipeline itself fails; they are tested without a broker.
"""
from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
from typing import Any, Callable, Sequence

from schemas import ChatTurn, InvalidEvent, Reason, Status, Surface, Verdict, claim_id, parse_turn
from schemas.errors import stage_failure
from schemas.limits import MAX_JSON_DEPTH, MAX_REASON_BYTES
from schemas.protocols import TurnResult
from schemas.verdict import hidden_display
from schemas.secrets import Scrubber, ScrubbingFilter, bound  # noqa: F401 - the one scrubber, re-exported

log = logging.getLogger("dialcheck.stream")

CheckTurns = Callable[[list], list[TurnResult]]


class DaemonExecutor(concurrent.futures.Executor):
    """One daemon thread running submitted calls in order. Why not ThreadPoolExecutor: its threads
    are joined at interpreter exit, so a pipeline call abandoned at its deadline (still hung) would
    hold up the worker's shutdown; a daemon thread does not."""

    def __init__(self, name: str = "pipeline"):
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn, /, *args, **kwargs) -> concurrent.futures.Future:
        f: concurrent.futures.Future = concurrent.futures.Future()
        self._q.put((f, fn, args, kwargs))
        return f

    def _run(self) -> None:
        while (job := self._q.get()) is not None:
            f, fn, args, kwargs = job
            if not f.set_running_or_notify_cancel():
                continue
            try:
                f.set_result(fn(*args, **kwargs))
            except BaseException as e:  # noqa: BLE001 - handed to the waiting coroutine
                f.set_exception(e)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._q.put(None)
        if wait:
            self._thread.join()


def validate_keyed(key: bytes | None, value: bytes | None, parse: Callable[[bytes], Any], max_bytes: int | None,
                   what: str = "event") -> Any:
    """Wire bytes → the parsed record, or InvalidEvent(code, reason); nothing else escapes. The key
    must be the record's conversation id: one conversation's records stay in one partition, in order
    (the context table is partitioned like the input)."""
    try:
        if value is None:
            raise InvalidEvent(Reason.TOMBSTONE, "null value (tombstone)")
        if max_bytes is not None and key is not None and len(key) > max_bytes:
            raise InvalidEvent(Reason.KEY, f"key too large: {len(key)} bytes > {max_bytes}")
        record = parse(bytes(value))
        if key is None:
            raise InvalidEvent(Reason.KEY, "missing key: the key must be the conversation_id")
        if bytes(key) != record.conversation_id.encode("utf-8"):
            raise InvalidEvent(Reason.KEY, f"key {bytes(key)[:80]!r} does not match conversation_id {record.conversation_id[:80]!r}")
        return record
    except InvalidEvent:
        raise
    except Exception as e:  # noqa: BLE001 - validation raises only InvalidEvent, whatever the input did
        raise InvalidEvent(Reason.UNREADABLE, f"unreadable {what} ({type(e).__name__})") from None


def validate_event(key: bytes | None, value: bytes | None, max_text_chars: int, max_bytes: int | None = None,
                   max_depth: int = MAX_JSON_DEPTH, evidence_limits=None) -> ChatTurn:
    """A chat turn from the wire (validate_keyed with parse_turn; `evidence_limits`: how much of its
    evidence is read, schemas/evidence.py EvidenceLimits, None for the defaults)."""
    return validate_keyed(key, value, lambda raw: parse_turn(raw, max_text_chars, max_bytes=max_bytes, max_depth=max_depth,
                                                             evidence_limits=evidence_limits), max_bytes)


def error_verdict(item, reason: str, max_reason_bytes: int = MAX_REASON_BYTES) -> Verdict:
    """A verdict that says the check failed: published instead of dropping the claim."""
    return Verdict(conversation_id=item.conversation_id, turn_id=item.turn_id,
                   claim_id=claim_id(item.conversation_id, item.turn_id, item.claim), claim=item.claim,
                   surface=Surface(name="r0", text=item.claim, candidate="r0", candidate_text=item.claim), label="NOT ENOUGH INFO",
                   probabilities={"SUPPORTS": 0.0, "REFUTES": 0.0, "NOT ENOUGH INFO": 1.0}, evidence=[],
                   model_versions={}, timings_ms={}, status=Status(state="error", reason=bound(reason, max_reason_bytes)),
                   display=hidden_display("NOT ENOUGH INFO"))  # the display rule for a verdict that is not ok


def check_safely(check_turns: CheckTurns, items: Sequence) -> list[TurnResult]:
    """`check_turns`, but an unexpected exception (a bug, not an outage: outages already come back
    as degraded/error verdicts) costs only the item that raised, as an error verdict."""
    items = list(items)
    if not items:
        return []
    try:
        out = check_turns(items)
        if len(out) != len(items):
            raise RuntimeError(f"pipeline returned {len(out)} results for {len(items)} items")
        return list(out)
    except Exception as e:  # noqa: BLE001 - never lose a claim to a pipeline bug
        if len(items) == 1:
            log.exception("pipeline failed on %s/%s", items[0].conversation_id, items[0].turn_id)
            return [TurnResult(items[0], [error_verdict(items[0], stage_failure(e))])]
        log.warning("pipeline failed on a batch of %d (%r); retrying one by one", len(items), e)
        return [r for it in items for r in check_safely(check_turns, [it])]


def safe_verdict(v: Verdict, scrub: Scrubber, max_reason_bytes: int) -> Verdict:
    """The verdict as published: status reason (and model_versions) scrubbed of secrets, the reason
    at most `max_reason_bytes`; the claim, surface, evidence and rationale (users' text, passages) as they are."""
    return scrub.verdict(v, max_reason_bytes)
