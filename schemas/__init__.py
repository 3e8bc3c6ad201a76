"""Event contracts: JSON Schemas (the files next to this module) and their Python types.

Validation happens at the boundary (`parse_turn`); inside, code passes typed objects."""
from __future__ import annotations

import hashlib
import json
import math
import re
import time
import unicodedata
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import jsonschema
import jsonschema.exceptions
import orjson

SCHEMA_DIR = Path(__file__).resolve().parent
Label = Literal["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"]
LABELS: tuple[str, str, str] = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")


class Reason(StrEnum):
    """Why a record went to the dead-letter topic (or a batch got error verdicts): the one list of
    machine codes. A code rides with every dead letter (header `dialcheck.reason.code`, next to the
    short human reason) and is the `reason` label of `dialcheck_dead_letters_total`; it is never
    parsed back out of the human text. A new reason is a member here, raised where it is detected."""

    TOMBSTONE = "tombstone"            # null value (a Kafka delete marker)
    KEY = "key"                        # key missing, too large, or not the conversation_id
    INVALID_UTF8 = "invalid_utf8"      # value is not UTF-8
    MALFORMED_JSON = "malformed_json"  # not JSON, a duplicate key, or nested too deep
    SCHEMA = "schema"                  # JSON that breaks the JSON Schema (chat_turn, verdict)
    TOO_LARGE = "too_large"            # event bytes or text characters over the limit
    EMPTY_TEXT = "empty_text"          # nothing visible left after NFKC and invisibles removed
    INVALID_FIELD = "invalid_field"    # an id, speaker or ts the schema allows but the rules do not
    UNREADABLE = "unreadable"          # validation itself failed on the input (never seen; guarded)
    POISON = "poison"                  # the pipeline call crashed the worker `poison_attempts` times
    DEADLINE = "deadline"              # a pipeline batch ran past `batch_deadline_s` (error verdicts, no dead letter)


class InvalidEvent(ValueError):
    """Input that must go to the dead-letter topic: `code` (a Reason) for machines, `reason` (short,
    may quote the input) for people."""

    def __init__(self, code: Reason, reason: str):
        super().__init__(reason)
        self.code = Reason(code)
        self.reason = reason


class DataMissing(FileNotFoundError):
    """A data file a command needs is not in the data dir. `dataset` is the set's name in the data
    manifest (`dialcheck data fetch <dataset>`), `title` its readable name, `looked_in` the data dirs
    tried; the CLI turns it into one line that says what to run (dialcheck/errors.py)."""

    def __init__(self, dataset: str, title: str, path: str, looked_in: tuple[str, ...] = ()):
        super().__init__(2, f"{title} data not found", path)
        self.dataset, self.title, self.path, self.looked_in = dataset, title, path, tuple(looked_in)

    def __str__(self) -> str:
        where = ", ".join(self.looked_in) or self.path
        return (f"{self.title} data not found (looked in {where}): run `dialcheck data fetch {self.dataset}` "
                "or set DIALCHECK_DATA_DIR")


@lru_cache(maxsize=None)
def _validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


def validate(name: str, obj: Any) -> None:
    """Raise InvalidEvent with the most relevant schema error (jsonschema's `best_match`), its message
    cut short: messages repr the offending value, which may be huge."""
    err = jsonschema.exceptions.best_match(_validator(name).iter_errors(obj))
    if err is not None:
        where = "/".join(str(p) for p in err.absolute_path) or "(root)"
        msg = err.message if len(err.message) <= 200 else err.message[:200] + "…"
        raise InvalidEvent(Reason.SCHEMA, f"schema {name}: {where}: {msg}")


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


def json_depth(obj: Any) -> int:
    """Nesting depth of parsed JSON, without recursion (the input may be adversarial)."""
    depth, stack = 0, [(obj, 1)]
    while stack:
        o, d = stack.pop()
        if isinstance(o, (dict, list)):
            depth = max(depth, d)
            stack.extend((v, d + 1) for v in (o.values() if isinstance(o, dict) else o))
    return depth


def load_bounded_json(raw: bytes, max_depth: int) -> Any:
    """Parse untrusted JSON bytes and refuse nesting deeper than `max_depth` (InvalidEvent), before
    anything recursive runs on it."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise InvalidEvent(Reason.MALFORMED_JSON, f"malformed JSON: {str(e)[:200]}") from None
    depth = json_depth(obj)
    if depth > max_depth:
        raise InvalidEvent(Reason.MALFORMED_JSON, f"JSON nested too deep: {depth} > {max_depth} levels")
    return obj


def _no_duplicate_keys(pairs: list) -> dict:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise InvalidEvent(Reason.MALFORMED_JSON, f"duplicate JSON key {dup[:64]!r} (readers disagree on which value wins)")
    return dict(pairs)


def parse_turn(raw: bytes | str, max_text_chars: int = 4000, max_bytes: int | None = None,
               max_depth: int = 16) -> ChatTurn:
    """Bytes from the wire → ChatTurn (text and speaker normalised), or InvalidEvent with a reason.

    Only InvalidEvent leaves this function: size and depth are checked before anything recursive
    or quadratic runs (a 1,000-deep array once crashed jsonschema's error formatting)."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if max_bytes is not None and len(raw) > max_bytes:
        raise InvalidEvent(Reason.TOO_LARGE, f"event too large: {len(raw)} bytes > {max_bytes}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidEvent(Reason.INVALID_UTF8, f"invalid UTF-8 at byte {e.start}") from None
    obj = load_bounded_json(raw, max_depth)
    try:
        json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except InvalidEvent:
        raise
    except (ValueError, RecursionError) as e:  # orjson accepted it; json should too
        raise InvalidEvent(Reason.MALFORMED_JSON, f"malformed JSON: {str(e)[:200]}") from None
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
    url: str | None = None  # schema 2.1: the passage's source link (its own, or derived for Wikipedia)


@dataclass
class Status:
    state: Literal["ok", "degraded", "error"] = "ok"
    # why the state is not ok; when ok, null unless the check itself was incomplete (no passage
    # retrieved, claims left unchecked): weak evidence is `evidence`, not-check-worthy the rationale
    reason: str | None = None
    # how well the evidence the decision read bears on the claim: strong (the deciding window is
    # about the claim's subject), weak (only off-topic or silent windows), none (nothing was read)
    evidence: Literal["strong", "weak", "none"] | None = None


@dataclass(frozen=True)
class Display:
    """Schema 2.1's display hint: what a chat app shows users (the rule: workers/display.py)."""
    show: bool
    tone: Literal["supported", "disputed", "unverified"]
    confidence: Literal["high", "medium", "low"]


SCHEMA_VERSION = "2.2"
# `timings_ms` keys that are not a stage's milliseconds: `batch_items` (2.1: how many claims shared a
# batched stage's time, a count) and `dense_client_side` (a flag: dense re-scoring encoded the
# passages itself). Readers that treat the rest as stage times skip these (metrics, `dialcheck check`).
TIMING_META_KEYS = frozenset({"batch_items", "dense_client_side"})


def known_fields(cls, d: dict) -> dict:
    """Only the fields `cls` has: readers ignore fields they do not know (a later minor version's)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in d.items() if k in names}


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
    # what to show users (schema 2.1; workers/display.py sets it on every verdict the pipeline makes;
    # None in verdicts read from before 2.1)
    display: Display | None = None
    created_at: float = field(default_factory=time.time)
    rationale: dict | None = None  # why this label: rule or layer, its numbers, the window it read (schema)
    schema_version: str = SCHEMA_VERSION  # verdict.schema.json's version; 1 had no rationale, 2.1 adds display and url, 2.2 uncovered
    # set by the stream worker as it publishes (null from `check`/`eval`): the producer's `ts` echoed,
    # and milliseconds from that `ts` (or the record's Kafka timestamp) to publishing
    ts: float | None = None
    latency_ms: float | None = None
    # schema 2.2: the claim's names, numbers and words that the evidence the label rests on does not
    # state, as written in the claim (an app can grey them out); None where coverage was not checked
    uncovered: list[str] | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> bytes:
        """The published form: probabilities and retrieval scores rounded to 4 places (run files keep
        full precision)."""
        d = self.to_dict()
        d["probabilities"] = {k: round(float(p), 4) for k, p in d["probabilities"].items()}
        for e in d["evidence"]:
            for k in ("entail", "neutral", "contradict"):
                e[k] = round(float(e[k]), 4)
            if e.get("retrieval_score") is not None:
                e["retrieval_score"] = round(float(e["retrieval_score"]), 4)
        return orjson.dumps(d, option=orjson.OPT_SERIALIZE_NUMPY)

    @classmethod
    def from_dict(cls, d: dict) -> "Verdict":
        """A published verdict of any version back to a Verdict: version 1 (no `schema_version`, no
        rationale), 2 and 2.1; fields this version does not know are ignored, as the schema asks."""
        s = known_fields(Surface, d["surface"])
        s["gate"] = GateDecision(**known_fields(GateDecision, s["gate"])) if s.get("gate") else None
        shown = d.get("display")
        return cls(**{**known_fields(cls, d), "schema_version": d.get("schema_version", "1"), "surface": Surface(**s),
                      "evidence": [Evidence(**known_fields(Evidence, e)) for e in d["evidence"]],
                      "status": Status(**known_fields(Status, d["status"])),
                      "display": Display(**known_fields(Display, shown)) if isinstance(shown, dict) else None})


def parse_verdict(raw: bytes) -> Verdict:
    obj = orjson.loads(raw)
    validate("verdict", obj)
    return Verdict.from_dict(obj)
