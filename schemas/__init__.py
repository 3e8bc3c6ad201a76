"""Event contracts: JSON Schemas (the files next to this module) and their Python types.

Validation happens at the boundary (`parse_turn`); inside, code passes typed objects."""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import jsonschema
import orjson

SCHEMA_DIR = Path(__file__).resolve().parent
Label = Literal["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"]
LABELS: tuple[str, str, str] = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")


class InvalidEvent(ValueError):
    """Input that must go to the dead-letter topic; `reason` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@lru_cache(maxsize=None)
def _validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


def validate(name: str, obj: Any) -> None:
    errors = sorted(_validator(name).iter_errors(obj), key=lambda e: list(e.path))
    if errors:
        e = errors[0]
        where = "/".join(str(p) for p in e.path) or "(root)"
        raise InvalidEvent(f"schema {name}: {where}: {e.message}")


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


def parse_turn(raw: bytes | str, max_text_chars: int = 4000) -> ChatTurn:
    """Bytes from the wire → ChatTurn, or InvalidEvent with a reason."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidEvent(f"invalid UTF-8 at byte {e.start}") from None
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise InvalidEvent(f"malformed JSON: {e}") from None
    validate("chat_turn", obj)
    if not obj["text"].strip():
        raise InvalidEvent("empty text")
    if len(obj["text"]) > max_text_chars:
        raise InvalidEvent(f"text too long: {len(obj['text'])} > {max_text_chars} characters")
    return ChatTurn(**obj)


def claim_id(conversation_id: str, turn_id: str, claim: str) -> str:
    """Stable across redeliveries and workers: the downstream dedup key."""
    return hashlib.sha1(f"{conversation_id}\x00{turn_id}\x00{claim}".encode()).hexdigest()[:20]


@dataclass
class GateDecision:
    score: float
    e: float
    c: float
    sim: float
    threshold: float
    accepted: bool


@dataclass
class Surface:
    name: str
    text: str
    candidate: str | None = None
    candidate_text: str | None = None
    gate: GateDecision | None = None


@dataclass
class Evidence:
    passage_id: str
    title: str
    text: str
    window: str = ""
    retrieval_score: float | None = None
    prescore: float | None = None
    entail: float = 0.0
    neutral: float = 0.0
    contradict: float = 0.0


@dataclass
class Status:
    state: Literal["ok", "degraded", "error"] = "ok"
    reason: str | None = None


@dataclass
class Verdict:
    conversation_id: str
    turn_id: str
    claim_id: str
    claim: str
    surface: Surface
    label: str
    probabilities: dict[str, float]
    evidence: list[Evidence]
    model_versions: dict[str, str]
    timings_ms: dict[str, float]
    status: Status
    created_at: float = field(default_factory=time.time)
    rationale: dict | None = None  # why this label: rule or layer, its numbers, the window it read (schema)
    schema_version: str = "2"  # verdict.schema.json's version; 1 had no rationale

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> bytes:
        return orjson.dumps(self.to_dict(), option=orjson.OPT_SERIALIZE_NUMPY)

    @classmethod
    def from_dict(cls, d: dict) -> "Verdict":
        s = dict(d["surface"])
        s["gate"] = GateDecision(**s["gate"]) if s.get("gate") else None
        return cls(**{**d, "surface": Surface(**s), "evidence": [Evidence(**e) for e in d["evidence"]],
                      "status": Status(**d["status"])})


def parse_verdict(raw: bytes) -> Verdict:
    obj = orjson.loads(raw)
    validate("verdict", obj)
    return Verdict.from_dict(obj)
