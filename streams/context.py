"""Per-conversation context: the value stored in the worker's Faust table, as plain JSON data.

Why a module of pure functions: the rules (bounded length, idle expiry, idempotent redelivery)
decide which context a claim is checked against, so they are tested without Kafka.

State: {"turns": [{"turn_id", "speaker", "text"}, ...] (oldest first, at most `max_turns`),
        "last_seen": wall-clock seconds of the last turn}.
"""
from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any, Hashable, Iterator

from schemas import ChatTurn, normalise_role

State = dict[str, Any]
log = logging.getLogger("dialcheck.stream")


def is_idle(state: State | None, now: float, idle_s: float) -> bool:
    return state is None or (idle_s > 0 and now - float(state.get("last_seen", 0.0)) > idle_s)


def add_turn(state: State | None, turn: ChatTurn, now: float, max_turns: int, idle_s: float) -> tuple[State, list[str]]:
    """Record `turn`; return the new state and the texts of the turns before it (oldest first).

    A redelivered turn (same turn_id and the same speaker and text already stored: at-least-once
    after a crash) does not get appended twice, and its context is the turns stored before it, as
    on first delivery.
    A REUSED turn id with different text (an edited or corrected message) replaces the stored
    turn's text in place: later turns read the new text as context, and the caller checks the turn
    again like any other (a checked role gets a new verdict under the new text's claim_id). It is
    logged (ids only), never dropped silently. Redeliveries replay in offset order, so the last
    text written wins.
    A conversation idle longer than `idle_s` starts afresh (the same as if the sweep had evicted it).
    """
    turns: list[dict] = [] if is_idle(state, now, idle_s) else list(state["turns"])
    for i, t in enumerate(turns):
        if t["turn_id"] == turn.turn_id:
            if (t["speaker"], t["text"]) != (turn.speaker, turn.text):
                log.info("turn id %.80s/%.80s reused with different text: replaced in the context, checked again",
                         turn.conversation_id, turn.turn_id)
                turns[i] = {"turn_id": turn.turn_id, "speaker": turn.speaker, "text": turn.text}
            return {"turns": turns, "last_seen": now}, [x["text"] for x in turns[:i]]
    context = [t["text"] for t in turns[-max_turns:]] if max_turns > 0 else []
    turns.append({"turn_id": turn.turn_id, "speaker": turn.speaker, "text": turn.text})
    if max_turns > 0:
        turns = turns[-max_turns:]
    return {"turns": turns, "last_seen": now}, context


def should_check(turn: ChatTurn, check_roles: frozenset[str]) -> bool:
    """The event's `check` flag wins; otherwise the speaker's role decides."""
    return wants_check(turn.check, turn.speaker, check_roles)


def wants_check(check: bool | None, speaker: str, check_roles: frozenset[str]) -> bool:
    """`should_check` from the two fields alone (the worker's step cutter reads them from raw JSON)."""
    if check is not None:
        return bool(check)
    return normalise_role(speaker) in check_roles


def parse_roles(check_roles: str) -> frozenset[str]:
    return frozenset(normalise_role(r) for r in check_roles.split(",") if r.strip())


class Recency:
    """Keys in least-recently-active order, for the per-worker conversation bound (LRU on top of
    idle expiry). In memory only: after a restart the sweep bounds restored keys by `last_seen`."""

    def __init__(self) -> None:
        self._keys: OrderedDict[Hashable, None] = OrderedDict()

    def touch(self, key: Hashable) -> None:
        self._keys[key] = None
        self._keys.move_to_end(key)

    def discard(self, key: Hashable) -> None:
        self._keys.pop(key, None)

    def __len__(self) -> int:
        return len(self._keys)

    def overflow(self, limit: int) -> Iterator[Hashable]:
        """Pop and yield the oldest keys until at most `limit` remain."""
        while len(self._keys) > limit:
            yield self._keys.popitem(last=False)[0]


def oldest_beyond(states: dict, limit: int) -> list:
    """Keys of `states` (key → state) beyond the `limit` most recently seen."""
    if len(states) <= limit:
        return []
    order = sorted(states, key=lambda k: float((states[k] or {}).get("last_seen", 0.0)))
    return order[:len(states) - limit]
