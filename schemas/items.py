"""What flows into a Checker: CheckItem, and the DialFact record format that replay and eval read."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class GivenPassage:
    """A passage the assistant was given (grounded turns, docs/integration.md#grounded-turns): from
    the turn's own `evidence` (source "turn") or its conversation's knowledge on chat.knowledge
    (source "conversation"). `id` is the producer's id (or the knowledge record's doc_id); title and
    url are carried to the verdict's evidence as given."""
    text: str
    title: str | None = None
    url: str | None = None
    id: str | None = None
    source: str = "turn"  # "turn" | "conversation"


@dataclass
class CheckItem:
    """One claim to check, with the dialogue before it."""
    conversation_id: str
    turn_id: str
    context: list[str]  # previous turns, oldest first
    claim: str
    # the passages to check against instead of the index (protocol "fv", a grounded turn): (title, text)
    # pairs (DialFact records) or GivenPassage; None: retrieve (e2e)
    gold_evidence: list[tuple[str, str] | GivenPassage] | None = None
    # grounded turns: what the limits stopped from being read (passages or characters), for the status
    evidence_note: str | None = None


@dataclass(frozen=True)
class DialFactRecord:
    """A line of a DialFact-format JSONL (../shared/data/dialfact/testsmall.jsonl)."""
    id: str
    context_id: str
    context: list[str]
    response: str
    label: str
    type_label: str
    evidence: list[tuple[str, str]]  # (title, text)

    def to_check_item(self, protocol: str = "e2e") -> CheckItem:
        return CheckItem(conversation_id=self.id, turn_id=f"{self.id}#response", context=list(self.context),
                         claim=self.response, gold_evidence=list(self.evidence) if protocol == "fv" else None)


def response_claim_id(record: DialFactRecord, prefix: str = "") -> str:
    """The claim id a DialFact record's response gets from the evaluator (no prefix) and from the
    replay (conversation ids may be prefixed): scoring matches run rows to gold records by it."""
    from schemas.verdict import claim_id

    conv = f"{prefix}{record.id}"
    return claim_id(conv, f"{conv}#response", record.response)


def load_dialfact(path: str | Path, limit: int | None = None) -> list[DialFactRecord]:
    """Read DialFact JSONL; a record without the DialFact fields is a ValueError naming its line."""
    out: list[DialFactRecord] = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
                ev = [(str(e[0]), str(e[2])) for e in r.get("evidence_list", []) if len(e) >= 3]
                out.append(DialFactRecord(id=str(r["id"]), context_id=str(r.get("context_id", r["id"])),
                                          context=[c.strip() for c in r["context"]], response=r["response"].strip(),
                                          label=r["response_label"], type_label=r.get("type_label", ""),
                                          evidence=ev))
            except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as e:
                raise ValueError(f"{path}:{n}: not a DialFact record ({type(e).__name__}: {e})") from None
            if limit and len(out) >= limit:
                break
    return out
