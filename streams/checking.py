"""Between the wire and the pipeline: validate an event, and call the pipeline so nothing is dropped.

Why separate from the Faust app: these rules decide what reaches the dead-letter topic and what a
verdict looks like when the pipeline itself fails; they are tested without a broker.
"""
from __future__ import annotations

import logging
from typing import Callable, Sequence

from schemas import ChatTurn, InvalidEvent, Status, Surface, Verdict, claim_id, parse_turn

log = logging.getLogger("dialcheck.stream")

CheckMany = Callable[[list], list[Verdict]]


def validate_event(key: bytes | None, value: bytes | None, max_text_chars: int) -> ChatTurn:
    """Wire bytes → ChatTurn, or InvalidEvent(reason). The key must be the conversation id: the
    context table is partitioned like the input, so a turn keyed otherwise would find another
    partition's (or no) context."""
    if value is None:
        raise InvalidEvent("null value (tombstone)")
    turn = parse_turn(bytes(value), max_text_chars)
    if key is None:
        raise InvalidEvent("missing key: the key must be the conversation_id")
    if bytes(key) != turn.conversation_id.encode("utf-8"):
        raise InvalidEvent(f"key {bytes(key)[:80]!r} does not match conversation_id {turn.conversation_id[:80]!r}")
    return turn


def error_verdict(item, reason: str) -> Verdict:
    """A verdict that says the check failed: published instead of dropping the claim."""
    return Verdict(conversation_id=item.conversation_id, turn_id=item.turn_id,
                   claim_id=claim_id(item.conversation_id, item.turn_id, item.claim), claim=item.claim,
                   surface=Surface(name="r0", text=item.claim, candidate="r0", candidate_text=item.claim), label="NOT ENOUGH INFO",
                   probabilities={"SUPPORTS": 0.0, "REFUTES": 0.0, "NOT ENOUGH INFO": 1.0}, evidence=[],
                   model_versions={}, timings_ms={}, status=Status(state="error", reason=reason[:500]))


def check_safely(check_many: CheckMany, items: Sequence) -> list[Verdict]:
    """`check_many`, but an unexpected exception (a bug, not an outage: outages already come back
    as degraded/error verdicts) costs only the item that raised, as an error verdict."""
    items = list(items)
    if not items:
        return []
    try:
        out = check_many(items)
        if len(out) != len(items):
            raise RuntimeError(f"pipeline returned {len(out)} verdicts for {len(items)} items")
        return list(out)
    except Exception as e:  # noqa: BLE001 - never lose a claim to a pipeline bug
        if len(items) == 1:
            log.exception("pipeline failed on %s/%s", items[0].conversation_id, items[0].turn_id)
            return [error_verdict(items[0], f"pipeline failure: {e!r}")]
        log.warning("pipeline failed on a batch of %d (%r); retrying one by one", len(items), e)
        return [v for it in items for v in check_safely(check_many, [it])]
