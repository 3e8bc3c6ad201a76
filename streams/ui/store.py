"""What the page shows, kept in memory: the most recently active conversations (LRU), each with
its last turns and the verdicts on them.

Why here and not in the browser: a page opened late gets the current state as one snapshot, and
the bound holds for the server however long it follows a busy topic.

Why every record is validated here although the worker already validated it: anyone who can
produce to chat.verdicts or chat.turns reaches every open page through this store. A record enters
only if it fits the contract the worker publishes (schemas/*.schema.json, then the ChatTurn /
Verdict types of schemas/), is no deeper and no larger than the bounds, and serialises back
(`orjson.dumps` is tried once, here, so serving a snapshot can never fail on a stored item).
Anything else is counted with its reason and never stored. Every bound is a setting (UISettings)."""
from __future__ import annotations

import dataclasses
import math
import statistics
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import orjson

from schemas.feedback import parse_feedback
from schemas.limits import MAX_JSON_DEPTH, MAX_TEXT_CHARS

from ..precision import ALL_VERSIONS, UNKNOWN_VERSION, buckets_of, nli_version_of, rows_by_version
from schemas import (LABELS, ChatTurn, Evidence, GateDecision, InvalidEvent, Reason, Status, Surface, Verdict, known_fields,
                     load_bounded_json, parse_turn, validate)

EVIDENCE_FIELDS = ("passage_id", "title", "text", "window", "entail", "neutral", "contradict")
EVIDENCE_SOURCES = ("turn", "conversation", "index")  # schema 2.4's evidence[].source (anything else: None)
SUMMARY_RULE = "turn-summary"  # the rationale rule of a turn's summary verdict (workers/verdict.py turn_summary)
# schema 2.1's display hint: the only values the page may receive (anything else is treated as absent)
DISPLAY_VALUES = {"show": (True, False), "tone": ("supported", "disputed", "unverified"),
                  "confidence": ("high", "medium", "low")}
MAX_URL_CHARS = 2048
# bytes a conversation adds to the snapshot besides its items: id, keys, and its summary (at most 4
# label counts and 3 numbers, under 256 bytes serialised)
CONVERSATION_OVERHEAD = 64 + 256
MAX_REASON_KINDS = 64  # distinct kinds counted by name (a guard; schemas.Reason has fewer)
MAX_JUDGEMENTS = 1_000_000  # judgements the live precision remembers by key (redelivery dedup; oldest forgotten)
# the live precision per NLI model version: distinct versions kept apart (a guard: whoever can produce to
# chat.verdicts names one; more count as OTHER_VERSIONS), their longest name, and the claim ids and turns
# whose version is remembered for the judgements that name them (oldest forgotten)
MAX_VERSIONS = 32
MAX_VERSION_CHARS = 200
OTHER_VERSIONS = "other"
MAX_VERSION_KEYS = 100_000


class LivePrecision:
    """The page's live precision from what the ui reads: each judgement on chat.feedback once (its
    natural key; a later one with the same key replaces it, as in the store), and the shown badges
    among the verdicts read (deduplicated by claim id), for the coverage; pooled and per NLI model
    version of the judged verdict (its claim id, else its turn: a turn's verdicts come from one
    batch, so one model), so a rollout is judged before and after. The numbers come from
    streams/precision.py, the function /metrics and `dialcheck feedback stats` use; the worker's
    figures read its store instead, so the two agree when both read the same topics from the start."""

    def __init__(self, target: float = 0.85, confidence: float = 0.9, max_judgements: int = MAX_JUDGEMENTS):
        self.target, self.confidence, self.max_judgements = target, confidence, max_judgements
        # key → (buckets, judgement, ts, (claim id, conversation, turn), version when its verdict was read first)
        self.judgements: "OrderedDict[tuple, tuple]" = OrderedDict()
        self.shown: dict[str, dict[str, int]] = {}  # version → bucket → shown badges
        self.verdicts: dict[str, int] = {}  # version → verdicts read
        self.version_of: "OrderedDict[object, str]" = OrderedDict()  # claim id, or (conversation, turn) → version
        self.totals = {"right": 0, "wrong": 0, "unsure": 0}

    def _version(self, v: Verdict) -> str:
        name = nli_version_of({"model_versions": v.model_versions})[:MAX_VERSION_CHARS]
        return name if name in self.verdicts or len(self.verdicts) < MAX_VERSIONS else OTHER_VERSIONS

    def verdict(self, v: Verdict) -> None:
        version = self._version(v)
        self.verdicts[version] = self.verdicts.get(version, 0) + 1
        for key in (v.claim_id, (v.conversation_id, v.turn_id)):
            self.version_of[key] = version
            self.version_of.move_to_end(key)
        while len(self.version_of) > MAX_VERSION_KEYS:
            self.version_of.popitem(last=False)
        d = display_view(v.display) or {}  # as read from the topic: a dict (or a Display)
        if d.get("show") is True:
            per = self.shown.setdefault(version, {})
            for b in buckets_of(v.label, d.get("confidence"), True):
                per[b] = per.get(b, 0) + 1

    def _version_of(self, ref: tuple) -> str | None:
        claim, conversation, turn = ref
        found = self.version_of.get(claim) if claim is not None else None
        return found if found is not None else self.version_of.get((conversation, turn))

    def judgement(self, f) -> bool:
        """Count one judgement; False when it changes nothing (a redelivery, or older than the one kept)."""
        old = self.judgements.get(f.key)
        if old is not None and old[2] > f.ts:
            return False
        ref = (f.claim_id, f.conversation_id, f.turn_id)
        entry = (buckets_of(f.label_shown, f.confidence_shown, f.shown), f.judgement, f.ts, ref, self._version_of(ref))
        if old is not None and old[:4] == entry[:4]:
            return False
        if old is not None:
            self.totals[old[1]] -= 1
        self.judgements[f.key] = entry
        self.judgements.move_to_end(f.key)
        self.totals[f.judgement] += 1
        while len(self.judgements) > self.max_judgements:
            self.totals[self.judgements.popitem(last=False)[1][1]] -= 1
        return True

    def view(self) -> dict:
        """The pooled rows (`rows`, `alarm`) and per NLI version (`versions`: first read first)."""
        judged: dict[str, dict[str, list[int]]] = {}
        for buckets, j, _, ref, version in self.judgements.values():
            if j == "unsure":
                continue
            per = judged.setdefault(version or self._version_of(ref) or UNKNOWN_VERSION, {})
            for b in buckets:
                per.setdefault(b, [0, 0])[0 if j == "right" else 1] += 1
        by_version = rows_by_version({v: {b: (r, w) for b, (r, w) in per.items()} for v, per in judged.items()},
                                     self.shown, self.verdicts, self.target, self.confidence)
        rows = by_version.pop(ALL_VERSIONS)
        return {"target": self.target, "confidence": self.confidence, "feedback": dict(self.totals),
                "rows": [r.to_dict() for r in rows], "alarm": [r.label for r in rows if r.alarm],
                "versions": [{"nli_version": v, "rows": [r.to_dict() for r in vr], "alarm": [r.label for r in vr if r.alarm]}
                             for v, vr in by_version.items()]}


def read_verdict(raw: bytes, max_bytes: int, max_depth: int) -> Verdict:
    """chat.verdicts bytes → Verdict, or InvalidEvent with a short reason: size and depth first (nothing
    recursive runs on a hostile record), then verdict.schema.json, then the schemas.Verdict types
    (a gate without `score` fits the schema's loose gate object but is no GateDecision). Schema 2.1's
    `display` is kept as read (the page's `display_view` checks it), `evidence[].url` likewise (`safe_url`)."""
    if len(raw) > max_bytes:
        raise InvalidEvent(Reason.TOO_LARGE, f"verdict too large: {len(raw)} bytes > {max_bytes}")
    obj = load_bounded_json(raw, max_depth)
    validate("verdict", obj)
    try:
        s = known_fields(Surface, obj["surface"])
        s["gate"] = GateDecision(**known_fields(GateDecision, s["gate"])) if s.get("gate") is not None else None
        return Verdict(**{**known_fields(Verdict, obj), "surface": Surface(**s),
                          "status": Status(**known_fields(Status, obj["status"])),
                          "evidence": [Evidence(**known_fields(Evidence, e)) for e in obj["evidence"]]})
    except (TypeError, ValueError, KeyError) as e:
        raise InvalidEvent(Reason.SCHEMA, f"verdict does not fit schemas.Verdict: {str(e)[:200]}") from None


def safe_url(u) -> str | None:
    """An evidence source link the page may draw as <a href>: an absolute http(s) URL with a host, no
    credentials, no whitespace or control characters, at most MAX_URL_CHARS; anything else is None
    (javascript:, data:, relative paths, …). The page checks the scheme again before drawing it."""
    if not isinstance(u, str) or not u or len(u) > MAX_URL_CHARS or any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127
                                                                         for ch in u):
        return None
    try:
        parts = urlsplit(u)
        _ = parts.port  # raises on a malformed port
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
        return None
    return u


def display_view(d) -> dict | None:
    """Schema 2.1's display hint with only the known keys and values; None when absent or unusable
    (an older verdict, or a hint that is not an object)."""
    if dataclasses.is_dataclass(d) and not isinstance(d, type):
        d = dataclasses.asdict(d)
    if not isinstance(d, dict):
        return None
    out = {k: d[k] for k, allowed in DISPLAY_VALUES.items()
           if k in d and type(d[k]) is type(allowed[0]) and d[k] in allowed}
    return out or None


def _finite(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def turn_view(turn: ChatTurn) -> dict:
    return {"conversation_id": turn.conversation_id, "turn_id": turn.turn_id, "speaker": turn.speaker,
            "text": turn.text, "check": turn.check, "ts": turn.ts}


def claim_span_view(span) -> dict | None:
    """Schema 2.4's claim_span as {"start", "end"} when usable (ints, 0 <= start <= end); else None.
    The page checks the offsets against its turn's text again before underlining."""
    if dataclasses.is_dataclass(span) and not isinstance(span, type):
        span = dataclasses.asdict(span)
    if not isinstance(span, dict):
        return None
    start, end = span.get("start"), span.get("end")
    if type(start) is not int or type(end) is not int or not 0 <= start <= end:
        return None
    return {"start": start, "end": end}


def is_turn_summary(v: Verdict) -> bool:
    """Whether the verdict is a turn's summary over its claims (the badge), not one claim's."""
    return isinstance(v.rationale, dict) and v.rationale.get("rule") == SUMMARY_RULE


def _evidence_view(e: Evidence) -> dict:
    return {**{k: getattr(e, k) for k in EVIDENCE_FIELDS}, "url": safe_url(e.url),
            "source": e.source if e.source in EVIDENCE_SOURCES else None}


def verdict_view(v: Verdict) -> dict:
    """The part of a verdict the page renders (no stage timings, no model versions, no unknown fields):
    with `ts`, `latency_ms` (produce→verdict), the display hint and each evidence item's source link
    when the verdict has them (schema 2.1), each evidence item's `source` and the claim's `claim_span`
    (schema 2.4), each None when absent or unusable; `summary`: a turn's summary over its claims."""
    gate = v.surface.gate
    return {"conversation_id": v.conversation_id, "turn_id": v.turn_id, "claim_id": v.claim_id, "claim": v.claim,
            "label": v.label, "probabilities": {k: v.probabilities[k] for k in LABELS if k in v.probabilities},
            "status": {"state": v.status.state, "reason": v.status.reason},
            "surface": {"name": v.surface.name, "text": v.surface.text, "candidate": v.surface.candidate,
                        "candidate_text": v.surface.candidate_text,
                        "gate": dataclasses.asdict(gate) if gate is not None else None},
            "ts": _finite(getattr(v, "ts", None)), "latency_ms": _finite(getattr(v, "latency_ms", None)),
            "display": display_view(v.display), "claim_span": claim_span_view(v.claim_span),
            "summary": is_turn_summary(v), "evidence": [_evidence_view(e) for e in v.evidence]}


def _size(view: dict) -> int:
    """Serialised size; raises InvalidEvent if the item could not be served."""
    try:
        return len(orjson.dumps(view))
    except (orjson.JSONEncodeError, TypeError) as e:
        raise InvalidEvent(Reason.UNREADABLE, f"cannot be served as JSON: {str(e)[:200]}") from None


@dataclass
class Conversation:
    id: str
    turns: "OrderedDict[str, tuple[dict, int]]" = field(default_factory=OrderedDict)  # turn id → (view, bytes)
    verdicts: "OrderedDict[str, tuple[dict, int]]" = field(default_factory=OrderedDict)  # turn id → (its badge, bytes)
    # (turn id, claim id) → (one claim's verdict with a claim_span, bytes): what the page underlines
    claims: "OrderedDict[tuple[str, str], tuple[dict, int]]" = field(default_factory=OrderedDict)
    bytes: int = 0

    def to_dict(self) -> dict:
        return {"id": self.id, "turns": [t for t, _ in self.turns.values()],
                "verdicts": [v for v, _ in self.verdicts.values()], "claims": [c for c, _ in self.claims.values()],
                "summary": self.summary()}

    def drop_turn(self, turn_id: str) -> int:
        """A turn's verdict and claims leave with it; returns the bytes freed."""
        freed = self.verdicts.pop(turn_id, (None, 0))[1]
        for key in [k for k in self.claims if k[0] == turn_id]:
            freed += self.claims.pop(key)[1]
        self.bytes -= freed
        return freed

    def summary(self) -> dict:
        """What the page's per-conversation line says, for /api/state readers: turns held, checked
        turns, verdicts by label ("error" for status error), the last turn's time (its producer `ts`,
        else the verdicts' echoed `ts`) and the median produce→verdict latency of its verdicts."""
        labels: dict[str, int] = {}
        for v, _ in self.verdicts.values():
            label = "error" if v["status"]["state"] == "error" else v["label"]
            labels[label] = labels.get(label, 0) + 1
        lat = [v["latency_ms"] for v, _ in self.verdicts.values() if v.get("latency_ms") is not None]
        stamps = [t["ts"] for t, _ in self.turns.values() if _finite(t.get("ts")) is not None]
        stamps += [v["ts"] for v, _ in self.verdicts.values() if v.get("ts") is not None]
        return {"turns": len(self.turns), "checked": len(self.verdicts), "labels": labels,
                "last_ts": max(stamps) if stamps else None,
                "latency_ms_median": round(statistics.median(lat), 1) if lat else None, "latency_n": len(lat)}


class Store:
    """Bounded: at most `max_conversations` (least recently active evicted first), `max_turns` turns
    and `max_verdicts` verdicts per conversation (verdicts for turns never seen included), and
    `max_bytes` of serialised items in all (the snapshot's size). Verdicts are deduplicated by claim id
    like streams.verdicts.VerdictLog (the worker is at-least-once)."""

    def __init__(self, max_conversations: int = 200, max_turns: int = 100, max_verdicts: int = 100,
                 max_bytes: int = 16 << 20, max_verdict_bytes: int = 1 << 20, max_turn_bytes: int = 262144,
                 max_text_chars: int = MAX_TEXT_CHARS, max_depth: int = MAX_JSON_DEPTH, precision: LivePrecision | None = None):
        if min(max_conversations, max_turns, max_verdicts, max_bytes) < 1:
            raise ValueError("max_conversations, max_turns, max_verdicts and max_bytes must be at least 1")
        self.max_conversations, self.max_turns, self.max_verdicts = max_conversations, max_turns, max_verdicts
        self.max_bytes, self.max_verdict_bytes, self.max_turn_bytes = max_bytes, max_verdict_bytes, max_turn_bytes
        self.max_text_chars, self.max_depth = max_text_chars, max_depth
        self.conversations: "OrderedDict[str, Conversation]" = OrderedDict()
        self.seen_claims: "OrderedDict[str, None]" = OrderedDict()
        self.bytes = 0
        self.counts = {"turns": 0, "verdicts": 0, "duplicates": 0, "evicted": 0, "rejected": 0}
        self.rejected: dict[str, int] = {}  # reason kind → count (at most MAX_REASON_KINDS + "other")
        self.last_rejected: deque[dict] = deque(maxlen=20)
        self.precision = precision or LivePrecision()

    @classmethod
    def from_settings(cls, settings, max_conversations: int | None = None) -> "Store":
        ui, stream = settings.ui, settings.stream
        return cls(max_conversations or ui.max_conversations, ui.max_turns, ui.max_verdicts, ui.max_snapshot_bytes,
                   ui.max_verdict_bytes, stream.max_event_bytes, stream.max_text_chars, stream.max_json_depth,
                   LivePrecision(stream.precision_target, stream.precision_confidence))

    # -- reading records -------------------------------------------------------------------------
    def reject(self, what: str, code: str, reason: str, where: str = "") -> list[dict]:
        """Counted by kind (`what: code`, a schemas.Reason), the last 20 kept with their reasons."""
        kind = f"{what}: {code}"
        if kind not in self.rejected and len(self.rejected) >= MAX_REASON_KINDS:
            kind = f"{what}: other"
        self.rejected[kind] = self.rejected.get(kind, 0) + 1
        self.counts["rejected"] += 1
        self.last_rejected.append({"what": what, "where": where, "code": str(code), "reason": reason[:300]})
        return [{"type": "counts", "counts": dict(self.counts)}]

    def add_turn_raw(self, raw: bytes, where: str = "") -> list[dict]:
        """A chat.turns record: parsed like the worker parses it (schemas.parse_turn, same limits)."""
        try:
            turn = parse_turn(raw, max_text_chars=self.max_text_chars, max_bytes=self.max_turn_bytes,
                              max_depth=self.max_depth)
            return self.add_turn(turn)
        except InvalidEvent as e:  # the worker dead-letters it; the page never shows it
            return self.reject("turn", e.code, e.reason, where)

    def add_verdict_raw(self, raw: bytes, where: str = "") -> list[dict]:
        try:
            return self.add_verdict(read_verdict(raw, self.max_verdict_bytes, self.max_depth))
        except InvalidEvent as e:
            return self.reject("verdict", e.code, e.reason, where)

    def add_feedback_raw(self, raw: bytes, where: str = "") -> list[dict]:
        """A chat.feedback record: validated like the worker does (schemas.feedback); counted in the
        live precision; a `precision` event when it changed anything."""
        try:
            f = parse_feedback(raw, max_depth=self.max_depth)
        except InvalidEvent as e:
            return self.reject("feedback", e.code, e.reason, where)
        self.counts["feedback"] = self.counts.get("feedback", 0) + 1
        if not self.precision.judgement(f):
            return []
        return [{"type": "precision", "precision": self.precision.view()}]

    # -- storing ---------------------------------------------------------------------------------
    def _touch(self, conv_id: str) -> tuple[Conversation, list[dict]]:
        conv = self.conversations.get(conv_id)
        if conv is None:
            conv = self.conversations[conv_id] = Conversation(conv_id, bytes=len(conv_id) + CONVERSATION_OVERHEAD)
            self.bytes += conv.bytes
        self.conversations.move_to_end(conv_id)
        events = []
        while len(self.conversations) > self.max_conversations:
            events += self._evict_oldest()
        return conv, events

    def _evict_oldest(self) -> list[dict]:
        old_id, old = self.conversations.popitem(last=False)
        self.bytes -= old.bytes
        self.counts["evicted"] += 1
        return [{"type": "evict", "conversation_id": old_id}]

    def _put(self, conv: Conversation, table: "OrderedDict[str, tuple[dict, int]]", key: str, view: dict, size: int,
             limit: int) -> list[str]:
        """Store one item, drop the oldest beyond `limit`; returns the dropped keys."""
        old = table.pop(key, None)
        table[key] = (view, size)
        delta, dropped = size - (old[1] if old else 0), []
        while len(table) > limit:
            k, (_, n) = table.popitem(last=False)
            delta -= n
            dropped.append(k)
        conv.bytes += delta
        self.bytes += delta
        return dropped

    def _fit_bytes(self, conv: Conversation, keep: tuple) -> list[dict]:
        """Over max_bytes: least recently active conversations go first, then the oldest items of the
        current one (never the item just stored, `keep` = (table, its key))."""
        events = []
        while self.bytes > self.max_bytes and len(self.conversations) > 1:
            events += self._evict_oldest()
        while self.bytes > self.max_bytes:
            table = next((t for name, t in (("turns", conv.turns), ("verdicts", conv.verdicts), ("claims", conv.claims))
                          if t and (name, next(iter(t))) != keep), None)
            if table is None:
                break
            _, (_, n) = table.popitem(last=False)
            conv.bytes -= n
            self.bytes -= n
        return events

    def _check_size(self, view: dict) -> int:
        size = _size(view)
        if 2 * size > self.max_bytes:
            raise InvalidEvent(Reason.TOO_LARGE, f"item of {size} bytes does not fit the ui store ({self.max_bytes} bytes)")
        return size

    def add_turn(self, turn: ChatTurn) -> list[dict]:
        view = turn_view(turn)
        size = self._check_size(view)
        conv, events = self._touch(turn.conversation_id)
        for old_turn in self._put(conv, conv.turns, turn.turn_id, view, size, self.max_turns):
            self.bytes -= conv.drop_turn(old_turn)
        self.counts["turns"] += 1
        return events + self._fit_bytes(conv, ("turns", turn.turn_id)) + [{"type": "turn", "turn": view}]

    def add_verdict(self, v: Verdict) -> list[dict]:
        if v.claim_id in self.seen_claims:
            self.counts["duplicates"] += 1
            return []
        view = verdict_view(v)
        size = self._check_size(view)
        self.seen_claims[v.claim_id] = None
        self.precision.verdict(v)
        while len(self.seen_claims) > self.max_conversations * self.max_verdicts:
            self.seen_claims.popitem(last=False)
        conv, events = self._touch(v.conversation_id)
        badge = conv.verdicts.get(v.turn_id)
        keep: tuple = ("verdicts", v.turn_id)
        if view["summary"] or badge is None or not badge[0]["summary"]:  # a claim never replaces its turn's summary
            self._put(conv, conv.verdicts, v.turn_id, view, size, self.max_verdicts)
        elif view["claim_span"] is not None:
            keep = ("claims", (v.turn_id, v.claim_id))
        if view["claim_span"] is not None and not view["summary"]:
            self._put(conv, conv.claims, (v.turn_id, v.claim_id), view, size, self.max_verdicts)
        self.counts["verdicts"] += 1
        return events + self._fit_bytes(conv, keep) + [{"type": "verdict", "verdict": view}]

    def snapshot(self) -> dict:
        """Most recently active first; its size is bounded by max_bytes plus the counters."""
        return {"conversations": [c.to_dict() for c in reversed(self.conversations.values())],
                "counts": dict(self.counts), "rejected": dict(self.rejected), "last_rejected": list(self.last_rejected),
                "bytes": self.bytes, "limits": {"max_conversations": self.max_conversations, "max_turns": self.max_turns,
                                                "max_verdicts": self.max_verdicts, "max_bytes": self.max_bytes},
                "max_conversations": self.max_conversations, "precision": self.precision.view()}
