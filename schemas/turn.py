"""The chat turn contract (chat_turn.schema.json): what a producer sends on chat.turns.

Validation happens at the boundary (`parse_turn`); inside, code passes the typed ChatTurn, whose
text and speaker are already normalised (what is checked is what a reader sees)."""
from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import asdict, dataclass, field

import orjson

from schemas.errors import InvalidEvent, Reason
from schemas.limits import MAX_JSON_DEPTH, MAX_TEXT_CHARS
from schemas.wire import decode_record, validate


@dataclass(frozen=True)
class ChatTurn:
    conversation_id: str
    turn_id: str
    speaker: str
    text: str
    check: bool | None = None
    ts: float | None = None
    meta: dict = field(default_factory=dict)

    def to_json(self) -> bytes:
        return orjson.dumps({k: v for k, v in asdict(self).items() if v is not None and v != {}})


# invisible characters that are not in category Cc/Cf but render as nothing (Hangul fillers, braille blank)
_INVISIBLE_EXTRA = frozenset("\u115f\u1160\u3164\uffa0\u2800")
_KEEP_CONTROLS = frozenset("\n\t")
SPEAKER_PATTERN = re.compile(r"[a-z][a-z0-9_.-]{0,31}")


def _invisible(ch: str) -> bool:
    """Zero-width, bidi and other format characters (Cf), controls (Cc) except newline/tab, and the
    few letters that render as blanks."""
    cat = unicodedata.category(ch)
    return (cat == "Cc" and ch not in _KEEP_CONTROLS) or cat in ("Cf", "Cs", "Co") or ch in _INVISIBLE_EXTRA


def clean_text(text: str) -> str:
    """NFKC, then invisible characters removed: what is checked is what a reader sees."""
    text = unicodedata.normalize("NFKC", text)
    return "".join(ch for ch in text if not _invisible(ch))


def normalise_role(speaker: str) -> str:
    """NFKC, casefold, invisible characters and surrounding blanks removed ("Assistant\u200b" → "assistant")."""
    return clean_text(speaker).casefold().strip()


def parse_turn(raw: bytes | str, max_text_chars: int = MAX_TEXT_CHARS, max_bytes: int | None = None,
               max_depth: int = MAX_JSON_DEPTH) -> ChatTurn:
    """Bytes from the wire → ChatTurn (text and speaker normalised), or InvalidEvent with a reason.

    Only InvalidEvent leaves this function: size and depth are checked before anything recursive
    or quadratic runs (a 1,000-deep array once crashed jsonschema's error formatting)."""
    obj = decode_record(raw, max_bytes, max_depth, "event")
    validate("chat_turn", obj)
    for name in ("conversation_id", "turn_id"):
        if any(_invisible(ch) or ch in "\n\t" for ch in obj[name]) or not obj[name].strip():
            raise InvalidEvent(Reason.INVALID_FIELD, f"{name} contains control or invisible characters, or only blanks")
    speaker = normalise_role(obj["speaker"])
    if not SPEAKER_PATTERN.fullmatch(speaker):
        raise InvalidEvent(Reason.INVALID_FIELD, f"speaker {obj['speaker'][:64]!r} is not a plain role ([a-z][a-z0-9_.-]*, "
                           "after NFKC, casefold and removal of invisible characters)")
    if len(obj["text"]) > 4 * max_text_chars:  # before normalising: NFKC of a huge text is wasted work
        raise InvalidEvent(Reason.TOO_LARGE, f"text too long: {len(obj['text'])} > {max_text_chars} characters")
    clean = clean_text(obj["text"])
    if not clean.strip():
        raise InvalidEvent(Reason.EMPTY_TEXT, "empty text (after NFKC and removal of invisible characters)")
    if len(clean) > max_text_chars:
        raise InvalidEvent(Reason.TOO_LARGE, f"text too long: {len(clean)} > {max_text_chars} characters")
    if obj.get("ts") is not None and not math.isfinite(obj["ts"]):
        raise InvalidEvent(Reason.INVALID_FIELD, "ts is not a finite number")
    return ChatTurn(**{**obj, "speaker": speaker, "text": clean})
