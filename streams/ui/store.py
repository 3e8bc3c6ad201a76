"""What the page shows, kept in memory: the most recently active conversations (LRU), each with
its last turns and the verdicts on them.

Why here and not in the browser: a page opened late gets the current state as one snapshot, and
the bound holds for the server however long it follows a busy topic."""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

EVIDENCE_FIELDS = ("passage_id", "title", "text", "window", "entail", "neutral", "contradict")


@dataclass
class Conversation:
    id: str
    turns: "OrderedDict[str, dict]" = field(default_factory=OrderedDict)  # turn id → turn
    verdicts: dict[str, dict] = field(default_factory=dict)  # turn id → first verdict

    def to_dict(self) -> dict:
        return {"id": self.id, "turns": list(self.turns.values()), "verdicts": list(self.verdicts.values())}


def turn_view(turn: dict) -> dict:
    return {k: turn.get(k) for k in ("conversation_id", "turn_id", "speaker", "text", "check", "ts")}


def verdict_view(v: dict) -> dict:
    """The part of a verdict the page renders (no timings, no model versions)."""
    surface = v.get("surface") or {}
    return {"conversation_id": v["conversation_id"], "turn_id": v["turn_id"], "claim_id": v["claim_id"],
            "claim": v.get("claim", ""), "label": v.get("label"), "probabilities": v.get("probabilities") or {},
            "status": v.get("status") or {"state": "ok"},
            "surface": {k: surface.get(k) for k in ("name", "text", "candidate", "candidate_text", "gate")},
            "evidence": [{k: e.get(k) for k in EVIDENCE_FIELDS} for e in v.get("evidence") or []]}


class Store:
    """Bounded: at most `max_conversations` (least recently active evicted first) and
    `max_turns` turns per conversation. Verdicts are deduplicated by claim id like
    streams.verdicts.VerdictLog (the worker is at-least-once)."""

    def __init__(self, max_conversations: int = 200, max_turns: int = 100):
        if max_conversations < 1 or max_turns < 1:
            raise ValueError("max_conversations and max_turns must be at least 1")
        self.max_conversations, self.max_turns = max_conversations, max_turns
        self.conversations: "OrderedDict[str, Conversation]" = OrderedDict()
        self.seen_claims: "OrderedDict[str, None]" = OrderedDict()
        self.counts = {"turns": 0, "verdicts": 0, "duplicates": 0, "evicted": 0, "unreadable": 0}

    def _touch(self, conv_id: str) -> tuple[Conversation, list[dict]]:
        conv = self.conversations.get(conv_id)
        if conv is None:
            conv = self.conversations[conv_id] = Conversation(conv_id)
        self.conversations.move_to_end(conv_id)
        events = []
        while len(self.conversations) > self.max_conversations:
            old, _ = self.conversations.popitem(last=False)
            self.counts["evicted"] += 1
            events.append({"type": "evict", "conversation_id": old})
        return conv, events

    def add_turn(self, turn: dict) -> list[dict]:
        conv, events = self._touch(turn["conversation_id"])
        view = turn_view(turn)
        conv.turns[view["turn_id"]] = view
        while len(conv.turns) > self.max_turns:
            old_id, _ = conv.turns.popitem(last=False)
            conv.verdicts.pop(old_id, None)
        self.counts["turns"] += 1
        return events + [{"type": "turn", "turn": view}]

    def add_verdict(self, verdict: dict) -> list[dict]:
        cid = verdict["claim_id"]
        if cid in self.seen_claims:
            self.counts["duplicates"] += 1
            return []
        self.seen_claims[cid] = None
        while len(self.seen_claims) > 20 * self.max_conversations * self.max_turns:
            self.seen_claims.popitem(last=False)
        conv, events = self._touch(verdict["conversation_id"])
        view = verdict_view(verdict)
        conv.verdicts[view["turn_id"]] = view
        self.counts["verdicts"] += 1
        return events + [{"type": "verdict", "verdict": view}]

    def snapshot(self) -> dict:
        """Most recently active first."""
        return {"conversations": [c.to_dict() for c in reversed(self.conversations.values())],
                "counts": dict(self.counts), "max_conversations": self.max_conversations}
