"""What a request to check a claim may hold, for every way in that is not a chat turn on Kafka:
`dialcheck serve-api`'s POST /check (dialcheck/api.py) and the Python API (dialcheck/python_api.py).

Why one module: both hold a request to the stream's rules for a turn, so a claim accepted by one is
accepted by the other and by the worker. Each text (the claim, every context turn, every evidence
text) goes through `schemas.turn.parse_turn` with the stream's limits (DIALCHECK_MAX_TEXT_CHARS,
MAX_EVENT_BYTES for a whole HTTP body, JSON depth 16, no duplicate keys); at most
DIALCHECK_CONTEXT_TURNS context turns. No aiohttp and no models here: cheap to import.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import orjson

from schemas.errors import DialcheckError, InvalidEvent, Reason
from schemas.evidence import EvidenceLimits, parse_evidence
from schemas.items import CheckItem
from schemas.limits import MAX_JSON_DEPTH
from schemas.settings import Settings
from schemas.turn import parse_turn
from schemas.wire import load_bounded_json, no_duplicate_keys

MAX_DEPTH = MAX_JSON_DEPTH
FIELDS = ("claim", "context", "evidence", "conversation_id")
PROTOCOLS = ("e2e", "fv")


class InvalidInput(DialcheckError, ValueError):
    """A request dialcheck refuses: `message` is one short line for people (str(error)), `code` a
    schemas.Reason value for machines, `status` the HTTP status serve-api answers with."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass(frozen=True)
class Limits:
    max_text_chars: int
    max_body_bytes: int
    max_context_turns: int
    evidence: EvidenceLimits = field(default_factory=EvidenceLimits)  # how much given evidence is read

    @classmethod
    def of(cls, settings: Settings) -> "Limits":
        st = settings.stream
        return cls(st.max_text_chars, st.max_event_bytes, st.context_turns, EvidenceLimits.of(settings.grounding))


def _refused(e: InvalidEvent, name: str | None = None) -> InvalidInput:
    """A contract's refusal as a request's: 413 for too large, else 400; `name` prefixed when given."""
    status = 413 if e.code == Reason.TOO_LARGE else 400
    return InvalidInput(status, e.code.value, f"{name}: {e.reason}" if name else e.reason)


def clean_text(value, name: str, limits: Limits, speaker: str = "user") -> str:
    """One text through the turn contract's rules (parse_turn): NFKC, invisible characters removed,
    not empty, at most max_text_chars."""
    if not isinstance(value, str):
        raise InvalidInput(400, Reason.SCHEMA.value, f"{name} must be a string")
    turn = orjson.dumps({"conversation_id": "api", "turn_id": name, "speaker": speaker, "text": value})
    try:
        return parse_turn(turn, limits.max_text_chars).text
    except InvalidEvent as e:
        raise _refused(e, name) from None


def texts(values, name: str, limits: Limits, unit: str, what: str) -> list[str]:
    """A list of texts (`what`: what the list holds, for the one line), each through clean_text; at
    most max_context_turns of them."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
        raise InvalidInput(400, Reason.SCHEMA.value, f"{name} must be a list of {what}")
    if len(values) > limits.max_context_turns:
        raise InvalidInput(413, Reason.TOO_LARGE.value, f"{name} has {len(values)} {unit} > {limits.max_context_turns} "
                           "(DIALCHECK_CONTEXT_TURNS, as the stream keeps)")
    return [clean_text(t, f"{name}[{i}]", limits) for i, t in enumerate(values)]


def check_item(obj: Mapping[str, Any], limits: Limits, protocol: str, turn_id: str | None = None) -> CheckItem:
    """A request's fields (claim, context, evidence, conversation_id) → a CheckItem, or InvalidInput.
    `turn_id` None: a fresh one per request (`api-<ns>`)."""
    unknown = sorted(set(obj) - set(FIELDS))
    if unknown:
        raise InvalidInput(400, Reason.SCHEMA.value, f"unknown field {str(unknown[0])[:64]!r}: expected {', '.join(FIELDS)}")
    if "claim" not in obj:
        raise InvalidInput(400, Reason.SCHEMA.value, "no claim: the body needs \"claim\"")
    claim = clean_text(obj["claim"], "claim", limits, "assistant")
    context = texts(obj.get("context", []), "context", limits, "turns", "turns (strings), oldest first")
    evidence, note = given_evidence(obj.get("evidence"), limits)
    if protocol == "fv" and not evidence:
        raise InvalidInput(400, Reason.SCHEMA.value, "this checker checks against given evidence (protocol fv): "
                           "add \"evidence\": [\"...\"]")
    conversation = obj.get("conversation_id", "api")
    if not isinstance(conversation, str) or not conversation.strip() or len(conversation) > 256:
        raise InvalidInput(400, Reason.INVALID_FIELD.value,
                           "conversation_id must be a non-empty string of at most 256 characters")
    return CheckItem(conversation, turn_id or f"api-{time.time_ns()}", context, claim, evidence, evidence_note=note)


def given_evidence(raw, limits: Limits) -> tuple[list | None, str | None]:
    """A request's `evidence` → its passages (None: none given, the checker retrieves) and what the
    limits left unread, or InvalidInput; a tuple is taken as a list (a Python caller's)."""
    if raw is None:
        return None, None
    try:
        return parse_evidence(list(raw) if isinstance(raw, tuple) else raw, limits.evidence)
    except InvalidEvent as e:
        raise _refused(e) from None


def parse_request(raw: bytes, limits: Limits, protocol: str, turn_id: str | None = None) -> CheckItem:
    """An HTTP body (JSON bytes) → a CheckItem, or InvalidInput with the status, a reason code and one line."""
    if len(raw) > limits.max_body_bytes:
        raise InvalidInput(413, Reason.TOO_LARGE.value, f"body too large: {len(raw)} bytes > {limits.max_body_bytes}")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidInput(400, Reason.INVALID_UTF8.value, f"invalid UTF-8 at byte {e.start}") from None
    try:
        obj = load_bounded_json(raw, MAX_DEPTH)
        json.loads(raw, object_pairs_hook=no_duplicate_keys)
    except InvalidEvent as e:
        raise InvalidInput(400, e.code.value, e.reason) from None
    except (ValueError, RecursionError) as e:
        raise InvalidInput(400, Reason.MALFORMED_JSON.value, f"malformed JSON: {str(e)[:200]}") from None
    if not isinstance(obj, dict):
        raise InvalidInput(400, Reason.SCHEMA.value, 'expected a JSON object: {"claim": "...", "context": ["..."]}')
    return check_item(obj, limits, protocol, turn_id)
