"""The pipeline's input type, shared by the evaluator, the stream worker and the tests."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CheckItem:
    conversation_id: str
    turn_id: str
    context: list[str]  # previous turns, oldest first
    claim: str
    gold_evidence: list[tuple[str, str]] | None = None  # (title, text); protocol "fv" only


def last_turns(context: list[str], n: int) -> list[str]:
    """The last n turns; none for n <= 0 (a bare context[-0:] would return them all)."""
    return context[-n:] if n > 0 else []


def with_context(context: list[str], text: str, turns: int) -> str:
    """The last `turns` context turns then `text`: the verifier's hypothesis (paper: 2 turns +
    claim surface) and the retrieval query (C + Rk)."""
    return " ".join([*last_turns(context, turns), text])
