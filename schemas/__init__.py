"""Event contracts, one module per contract (as faust/types does): the JSON Schemas (the files
next to this package) and their Python types.

- schemas.turn: ChatTurn and `parse_turn` (chat.turns)
- schemas.verdict: Verdict and its parts, `parse_verdict` (chat.verdicts)
- schemas.errors: dead-letter reasons (`Reason`, `InvalidEvent`) and `DataMissing`
- schemas.wire: bounded JSON parsing and schema validation
- schemas.items, schemas.protocols, schemas.secrets, schemas.settings: claims in flight, the
  stage protocols, the secret scrubber, the settings sections

The names below are re-exported so `from schemas import Verdict` reads as before."""
from __future__ import annotations

from schemas.errors import DataMissing, InvalidEvent, Reason
from schemas.turn import SPEAKER_PATTERN, ChatTurn, clean_text, normalise_role, parse_turn
from schemas.verdict import (LABELS, SCHEMA_VERSION, TIMING_META_KEYS, ClaimSpan, Display, Evidence, GateDecision, Label, Status,
                             Surface, Verdict, claim_id, parse_verdict)
from schemas.wire import SCHEMA_DIR, json_depth, known_fields, load_bounded_json, validate

__all__ = ["LABELS", "SCHEMA_DIR", "SCHEMA_VERSION", "SPEAKER_PATTERN", "TIMING_META_KEYS", "ChatTurn", "ClaimSpan", "DataMissing",
           "Display", "Evidence", "GateDecision", "InvalidEvent", "Label", "Reason", "Status", "Surface", "Verdict",
           "claim_id", "clean_text", "json_depth", "known_fields", "load_bounded_json", "normalise_role", "parse_turn",
           "parse_verdict", "validate"]
