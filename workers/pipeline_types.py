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
