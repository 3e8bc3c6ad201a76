"""Dialogue text helpers shared by the gate, the retrieval query and the verifier's hypothesis."""
from __future__ import annotations


def last_turns(context: list[str], n: int) -> list[str]:
    """The last n turns; none for n <= 0 (a bare context[-0:] would return them all)."""
    return context[-n:] if n > 0 else []


def with_context(context: list[str], text: str, turns: int) -> str:
    """The last `turns` context turns then `text`: the verifier's hypothesis (paper: 2 turns +
    claim surface) and the retrieval query (C + Rk)."""
    return " ".join([*last_turns(context, turns), text])
