"""The feedback contract (feedback.schema.json): one judgement of one published verdict, on chat.feedback.

Why a contract of its own: feedback comes from the live page, moderators' tools and annotation
exports, so it is validated at the boundary like a chat turn (bounded JSON, no duplicate keys, the
JSON Schema, then the rules the schema cannot say) and bad records are dead-lettered with a reason.
`key` is the store's natural key: a redelivered record (the stream is at-least-once) lands on the
same row instead of counting twice."""
from __future__ import annotations

import math
import unicodedata
from dataclasses import asdict, dataclass
from typing import Literal

import orjson

from schemas import InvalidEvent, Reason, clean_text, validate
from schemas.limits import MAX_JSON_DEPTH
from schemas.wire import decode_record

FEEDBACK_VERSION = "1.1"  # 1.1: optional corrected_label
JUDGEMENTS = ("right", "wrong", "unsure")
SOURCES = ("user", "moderator", "annotator")
MAX_FEEDBACK_BYTES = 16384


@dataclass(frozen=True)
class Feedback:
    conversation_id: str
    turn_id: str
    label_shown: str
    judgement: Literal["right", "wrong", "unsure"]
    source: Literal["user", "moderator", "annotator"]
    ts: float
    claim_id: str | None = None
    claim_index: int | None = None
    feedback_id: str | None = None
    confidence_shown: Literal["high", "medium", "low"] | None = None
    shown: bool | None = None
    note: str | None = None
    # 1.1: the label the judge would give, when they said one: a binary judge (supported or not)
    # writes SUPPORTS or NOT SUPPORTS; `dialcheck adapt` learns from it (lab/nli/judged.py)
    corrected_label: Literal["SUPPORTS", "REFUTES", "NOT ENOUGH INFO", "NOT SUPPORTS"] | None = None
    schema_version: str = FEEDBACK_VERSION

    @property
    def claim_ref(self) -> str:
        """The judged verdict within its turn: its claim id, else '#<claim index>'."""
        return self.claim_id if self.claim_id is not None else f"#{self.claim_index}"

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """(source, conversation, turn, claim, feedback id or time): one stored judgement each."""
        return (self.source, self.conversation_id, self.turn_id, self.claim_ref,
                self.feedback_id if self.feedback_id is not None else repr(float(self.ts)))

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def to_json(self) -> bytes:
        return orjson.dumps(self.to_dict())


def _plain_id(name: str, value: str) -> None:
    if any(ch in "\n\t" for ch in value) or clean_text(value) != unicodedata.normalize("NFKC", value) or not value.strip():
        raise InvalidEvent(Reason.INVALID_FIELD, f"{name} contains control or invisible characters, or only blanks")


def feedback_from_dict(obj: dict) -> Feedback:
    """A parsed JSON object → Feedback, or InvalidEvent: the schema, then the ids and the time."""
    if isinstance(obj, dict) and obj.get("claim_id") is None and obj.get("claim_index") is None:
        raise InvalidEvent(Reason.SCHEMA, "schema feedback: (root): names no verdict: claim_id or claim_index is required")
    validate("feedback", obj)
    for name in ("conversation_id", "turn_id", "claim_id", "feedback_id"):
        if obj.get(name) is not None:
            _plain_id(name, obj[name])
    if not math.isfinite(obj["ts"]):
        raise InvalidEvent(Reason.INVALID_FIELD, "ts is not a finite number")
    note = obj.get("note")
    return Feedback(**{**obj, "ts": float(obj["ts"]), "note": clean_text(note) if note else None})


def parse_feedback(raw: bytes | str, max_bytes: int = MAX_FEEDBACK_BYTES, max_depth: int = MAX_JSON_DEPTH) -> Feedback:
    """Bytes from the wire → Feedback, or InvalidEvent with a short reason (nothing else escapes
    for any input: size and depth are checked before anything recursive runs)."""
    obj = decode_record(raw, max_bytes, max_depth, "feedback")
    if not isinstance(obj, dict):
        raise InvalidEvent(Reason.SCHEMA, "schema feedback: (root): not a JSON object")
    return feedback_from_dict(obj)
