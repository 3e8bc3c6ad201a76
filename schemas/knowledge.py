"""The conversation-knowledge contract (knowledge.schema.json): a passage a conversation's assistant
was given, on chat.knowledge, or its deletion.

Why a contract of its own: a chat app sends what its assistant retrieved once per conversation
instead of on every turn; the record is validated at the boundary like a turn or a feedback record
(bounded JSON, no duplicate keys, the JSON Schema, then the rules the schema cannot say), and a bad
one is dead-lettered with a short reason (streams/knowledge.py). The passage itself is held to a
turn's `evidence` rules (schemas/evidence.py: text cleaned, title, url and id checked the same way),
and its text is never quoted in a reason."""
from __future__ import annotations

from dataclasses import dataclass

from schemas.errors import InvalidEvent, Reason
from schemas.evidence import EvidenceLimits, parse_evidence
from schemas.items import GivenPassage
from schemas.limits import MAX_JSON_DEPTH
from schemas.turn import has_invisible
from schemas.wire import decode_record, validate

KNOWLEDGE_VERSION = "1.0"


@dataclass(frozen=True)
class KnowledgeRecord:
    """One record of chat.knowledge: a passage to keep (`passage`, source "conversation", its id the
    doc_id) or a doc_id to forget (`passage` None)."""
    conversation_id: str
    doc_id: str
    passage: GivenPassage | None = None

    @property
    def delete(self) -> bool:
        return self.passage is None


def _shape(obj: dict) -> None:
    """What the schema would say while quoting the passage (a dead letter's reason is logged)."""
    if obj.get("delete") is True and any(k in obj for k in ("text", "title", "url")):
        raise InvalidEvent(Reason.SCHEMA, "schema knowledge: a delete carries no text, title or url")
    if "text" in obj and not isinstance(obj["text"], str):
        kind = type(obj["text"]).__name__ if obj["text"] is not None else "null"
        raise InvalidEvent(Reason.SCHEMA, f"schema knowledge: text: a {kind}, not a string")


def knowledge_from_dict(obj: dict) -> KnowledgeRecord:
    """A parsed JSON object → KnowledgeRecord, or InvalidEvent: shape, schema, ids, then the passage."""
    _shape(obj)
    validate("knowledge", obj)
    for name in ("conversation_id", "doc_id"):
        if has_invisible(obj[name]) or not obj[name].strip():
            raise InvalidEvent(Reason.INVALID_FIELD, f"{name} contains control or invisible characters, or only blanks")
    if obj.get("delete"):
        return KnowledgeRecord(obj["conversation_id"], obj["doc_id"])
    given = {k: obj[k] for k in ("text", "title", "url") if obj.get(k) is not None}
    whole = EvidenceLimits(1, len(obj["text"]), len(obj["text"]))  # kept whole; the table's bounds apply later
    (passage,), _ = parse_evidence([{**given, "id": obj["doc_id"]}], whole, source="conversation", name="knowledge")
    return KnowledgeRecord(obj["conversation_id"], obj["doc_id"], passage)


def parse_knowledge(raw: bytes | str, max_bytes: int | None = None, max_depth: int = MAX_JSON_DEPTH) -> KnowledgeRecord:
    """Bytes from the wire → KnowledgeRecord, or InvalidEvent with a short reason (nothing else
    escapes: size and depth are checked before anything recursive runs)."""
    obj = decode_record(raw, max_bytes, max_depth, "knowledge record")
    if not isinstance(obj, dict):
        raise InvalidEvent(Reason.SCHEMA, "schema knowledge: (root): not a JSON object")
    return knowledge_from_dict(obj)
