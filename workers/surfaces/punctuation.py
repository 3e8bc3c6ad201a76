"""R2 punctuation restoration by rules: only commas and sentence-final marks are inserted,
existing tokens never change. (The paper used a punctuation model; none is installable here.)"""
from __future__ import annotations

import re

_QUESTION_START = {"who", "what", "when", "where", "why", "how", "which", "whose", "is", "are", "was", "were",
                   "do", "does", "did", "can", "could", "would", "will", "should", "have", "has", "had", "am"}
_INTERJECTIONS = {"yes", "yeah", "yep", "no", "nope", "well", "oh", "wow", "ok", "okay", "actually", "honestly",
                  "anyway", "however", "also", "sure", "hmm", "haha", "lol", "ah", "indeed", "interesting", "cool"}


def _comma_after_interjection(text: str) -> str:
    m = re.match(r"^(\s*)([A-Za-z]+)(\s+)(?=[A-Za-z])", text)
    if m and m.group(2).lower() in _INTERJECTIONS:
        return f"{m.group(1)}{m.group(2)},{m.group(3)}{text[m.end():]}"
    return text


def _final_mark(text: str) -> str:
    stripped = text.rstrip()
    if not stripped or stripped[-1] in ".!?…\"')]":
        return text
    first = re.match(r"[A-Za-z]+", stripped)
    mark = "?" if first and first.group(0).lower() in _QUESTION_START else "."
    return stripped + mark + text[len(stripped):]


def restore_punctuation(text: str) -> str:
    """R2 on one turn."""
    return _final_mark(_comma_after_interjection(text))
