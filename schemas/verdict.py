"""The verdict contract (verdict.schema.json): what a worker publishes on chat.verdicts.

Readers of any schema version get the typed Verdict back (`parse_verdict`, `Verdict.from_dict`);
fields a later minor version adds are ignored, as the schema asks."""
from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass, field
from typing import Literal

import orjson

from schemas.wire import known_fields, validate

Label = Literal["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"]
LABELS: tuple[str, str, str] = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
# the probabilities of a verdict that read nothing and decided nothing (no evidence, an outage, a turn
# not checked): the workers' decision and the stream's error verdicts both publish these
NO_EVIDENCE: dict[str, float] = {"SUPPORTS": 0.0, "REFUTES": 0.0, "NOT ENOUGH INFO": 1.0}


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
    # schema 2.4: where the passage came from: "turn" (the turn's `evidence`), "conversation" (its
    # conversation's knowledge on chat.knowledge) or "index" (retrieved); None in verdicts before 2.4
    source: Literal["turn", "conversation", "index"] | None = None


@dataclass(frozen=True)
class ClaimSpan:
    """Schema 2.4: where a claim stands in its turn's text, character offsets [start, end) (Python
    str indices); a turn's summary verdict spans the whole text."""
    start: int
    end: int


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
    """Schema 2.1's display hint: what a chat app shows users (the rule: workers/display/)."""
    show: bool
    tone: Literal["supported", "disputed", "unverified"]
    confidence: Literal["high", "medium", "low"]


# the display's tone of each label (workers/display/ decides when a badge is shown; the tone is fixed)
TONES: dict[str, str] = {"SUPPORTS": "supported", "REFUTES": "disputed", "NOT ENOUGH INFO": "unverified"}


def hidden_display(label: str) -> Display:
    """The display of a verdict whose badge is not shown: the label's tone, confidence "low". Every
    verdict whose status is not "ok" (degraded, error) gets it, whatever its probabilities: an outage
    or a failed check is never shown as a finding. Here, in the contract, because the display policy
    (workers/display/) and the stream's error verdicts (streams/) both apply it."""
    return Display(show=False, tone=TONES[label], confidence="low")


@dataclass(frozen=True)
class Mismatch:
    """Schema 2.3: one structured check of the claim against the evidence its label rests on that did
    not agree (workers/decision/checks.py): which span of the claim, of what type, and what the
    evidence says there. A SUPPORTS with a mismatch is never shown as a badge."""
    check: Literal["slot", "structure", "subject", "rival"]  # a registered check's name (workers/decision/registry.py)
    # its `types`: slot: year | date | decade | percent | ordinal | number; structure (the claim's relation
    # the evidence gives otherwise): agent | patient | theme | attached | of | prep | be; subject: subject;
    # rival (another filler of a one-filler relation): capital_of | born_in | died_in | author_of | director_of | composer_of
    type: str
    span: str  # the claim's words, as written
    status: Literal["clash", "unstated", "differs"]  # clash: the evidence states it otherwise; unstated: not at all
    evidence: str | None = None  # what the evidence states in that slot or between those words (null: nothing)


SCHEMA_VERSION = "2.4"
# `timings_ms` keys that are not a stage's milliseconds: `batch_items` (2.1: how many claims shared a
# batched stage's time, a count) and `dense_client_side` (a flag: dense re-scoring encoded the
# passages itself). Readers that treat the rest as stage times skip these (metrics, `dialcheck check`).
TIMING_META_KEYS = frozenset({"batch_items", "dense_client_side"})


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
    # what to show users (schema 2.1; workers/display/ sets it on every verdict the pipeline makes;
    # None in verdicts read from before 2.1)
    display: Display | None = None
    created_at: float = field(default_factory=time.time)
    rationale: dict | None = None  # why this label: rule or layer, its numbers, the window it read (schema)
    schema_version: str = SCHEMA_VERSION  # verdict.schema.json's version; 1 had no rationale, 2.1 adds display and url, 2.2 uncovered, 2.3 mismatches, 2.4 evidence source and claim_span
    # set by the stream worker as it publishes (null from `check`/`eval`): the producer's `ts` echoed,
    # and milliseconds from that `ts` (or the record's Kafka timestamp) to publishing
    ts: float | None = None
    latency_ms: float | None = None
    # schema 2.2: the claim's names, numbers and words that the evidence the label rests on does not
    # state, as written in the claim (an app can grey them out); None where coverage was not checked
    uncovered: list[str] | None = None
    # schema 2.3: the structured checks (typed slots, the claim's relations, its subject) that did not
    # agree with the evidence the label rests on; [] where all that ran agreed, None where none ran
    mismatches: list[Mismatch] | None = None
    # schema 2.4: the claim's character offsets in the turn's text (None: not known, e.g. before 2.4)
    claim_span: ClaimSpan | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def with_note(self, reason: str, summary: str | None = None, replace_reason: bool = False) -> "Verdict":
        """This verdict saying `reason` in status.reason (after what it said, or instead with
        `replace_reason`) and `summary` (default: the reason as a sentence) at the end of its
        rationale's summary: how a grounded check, a cut or a cap is told without changing what was
        decided."""
        from dataclasses import replace

        said = None if replace_reason else self.status.reason
        why = dict(self.rationale or {})
        why["summary"] = f"{why.get('summary', '')} {summary or reason[:1].upper() + reason[1:] + '.'}".strip()
        return replace(self, status=replace(self.status, reason="; ".join(r for r in (said, reason) if r)),
                       rationale=why)

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
        odd = d.get("mismatches")
        span = d.get("claim_span")
        return cls(**{**known_fields(cls, d), "schema_version": d.get("schema_version", "1"), "surface": Surface(**s),
                      "mismatches": [Mismatch(**known_fields(Mismatch, m)) for m in odd] if isinstance(odd, list) else None,
                      "evidence": [Evidence(**known_fields(Evidence, e)) for e in d["evidence"]],
                      "status": Status(**known_fields(Status, d["status"])),
                      "claim_span": ClaimSpan(**known_fields(ClaimSpan, span)) if isinstance(span, dict) else None,
                      "display": Display(**known_fields(Display, shown)) if isinstance(shown, dict) else None})


def parse_verdict(raw: bytes) -> Verdict:
    obj = orjson.loads(raw)
    validate("verdict", obj)
    return Verdict.from_dict(obj)
