"""What is checked is what a reader sees: text normalised (NFKC) and stripped of the characters that
render as nothing. One home for every contract that reads text (a chat turn, its evidence, a
knowledge record), so a passage and the reply checked against it are cleaned alike."""
from __future__ import annotations

import unicodedata

# invisible characters that are not in category Cc/Cf but render as nothing (Hangul fillers, braille blank)
_INVISIBLE_EXTRA = frozenset("\u115f\u1160\u3164\uffa0\u2800")
_KEEP_CONTROLS = frozenset("\n\t")


def _invisible(ch: str) -> bool:
    """Zero-width, bidi and other format characters (Cf), controls (Cc) except newline/tab, and the
    few letters that render as blanks."""
    cat = unicodedata.category(ch)
    return (cat == "Cc" and ch not in _KEEP_CONTROLS) or cat in ("Cf", "Cs", "Co") or ch in _INVISIBLE_EXTRA


def has_invisible(text: str) -> bool:
    """Any control (newline and tab too), format or blank-rendering character: refused in ids."""
    return any(_invisible(ch) or ch in _KEEP_CONTROLS for ch in text)


def clean_text(text: str) -> str:
    """NFKC, then invisible characters removed: what is checked is what a reader sees."""
    text = unicodedata.normalize("NFKC", text)
    return "".join(ch for ch in text if not _invisible(ch))


def normalise_role(speaker: str) -> str:
    """NFKC, casefold, invisible characters and surrounding blanks removed ("Assistant\u200b" → "assistant")."""
    return clean_text(speaker).casefold().strip()
