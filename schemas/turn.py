"""The chat turn contract (chat_turn.schema.json): what a producer sends on chat.turns.

Validation happens at the boundary (`parse_turn`); inside, code passes the typed ChatTurn, whose
text and speaker are already normalised (what is checked is what a reader sees)."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import orjson

from schemas.errors import InvalidEvent, Reason
from schemas.evidence import EvidenceLimits, evidence_json, parse_evidence
from schemas.items import GivenPassage
from schemas.limits import MAX_JSON_DEPTH, MAX_TEXT_CHARS
from schemas.text import clean_text, has_invisible, normalise_role
from schemas.wire import decode_record, validate

__all__ = ["SPEAKER_PATTERN", "ChatTurn", "clean_text", "has_invisible", "normalise_role", "parse_turn"]


@dataclass(frozen=True)
class ChatTurn:
    conversation_id: str
    turn_id: str
    speaker: str
    text: str
    check: bool | None = None
    ts: float | None = None
    meta: dict = field(default_factory=dict)
    # chat_turn 1.1: the passages the assistant was given (schemas/evidence.py); None: none sent
    evidence: tuple[GivenPassage, ...] | None = None
    # what the evidence limits left unread (parse_turn), for the verdict's status; not on the wire
    evidence_note: str | None = field(default=None, compare=False)

    def to_json(self) -> bytes:
        """The turn as a producer sends it (replay writes these): evidence as given, no note."""
        out = {k: getattr(self, k) for k in ("conversation_id", "turn_id", "speaker", "text", "check", "ts", "meta")}
        if self.evidence is not None:
            out["evidence"] = evidence_json(self.evidence)
        return orjson.dumps({k: v for k, v in out.items() if v is not None and v != {}})


SPEAKER_PATTERN = re.compile(r"[a-z][a-z0-9_.-]{0,31}")


def parse_turn(raw: bytes | str, max_text_chars: int = MAX_TEXT_CHARS, max_bytes: int | None = None,
               max_depth: int = MAX_JSON_DEPTH, evidence_limits=None) -> ChatTurn:
    """Bytes from the wire → ChatTurn (text and speaker normalised), or InvalidEvent with a reason.

    Only InvalidEvent leaves this function: size and depth are checked before anything recursive
    or quadratic runs (a 1,000-deep array once crashed jsonschema's error formatting). `evidence`
    goes through schemas/evidence.py first (its reasons name the passage; `evidence_limits`: an
    EvidenceLimits, None for schemas/limits.py's): what the limits leave unread is `evidence_note`."""
    obj = decode_record(raw, max_bytes, max_depth, "event")
    given = obj.get("evidence") if isinstance(obj, dict) else None
    evidence, note = parse_evidence(given, evidence_limits or EvidenceLimits()) if given is not None else (None, None)
    validate("chat_turn", obj)
    for name in ("conversation_id", "turn_id"):
        if has_invisible(obj[name]) or not obj[name].strip():
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
    return ChatTurn(**{**obj, "speaker": speaker, "text": clean,
                       "evidence": tuple(evidence) if evidence is not None else None, "evidence_note": note})
