"""Claim segmentation: a chat turn → the claims it makes (sentences, then clauses joined by
"and"/"but" when each side stands alone with its own subject and verb), each with a stable
claim_id, and the turn-level summary label (worst wins: REFUTES > SUPPORTS > NOT ENOUGH INFO).

A turn that is one claim stays exactly one segment with the turn's own text, so its claim_id and
verdict are the same as without segmentation."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from schemas import claim_id

SEVERITY = {"REFUTES": 2, "SUPPORTS": 1, "NOT ENOUGH INFO": 0}  # the turn shows its worst claim
# a grounded turn (checked against the passages its assistant was given) is supported only when every
# claim is: a claim its passages do not decide makes the turn NOT ENOUGH INFO (attribution)
ATTRIBUTION = {"REFUTES": 2, "NOT ENOUGH INFO": 1, "SUPPORTS": 0}


def order_in_words(severity: dict[str, int]) -> str:
    """"REFUTES > SUPPORTS > NOT ENOUGH INFO": the turn summary's rationale names its order."""
    return " > ".join(sorted(severity, key=lambda lab: -severity[lab]))
_SPLIT_CC = {"and", "but"}
_MIN_WORDS = 3


@dataclass(frozen=True)
class Segment:
    index: int
    text: str
    start: int  # character offsets in the turn
    end: int

    def claim_id(self, conversation_id: str, turn_id: str) -> str:
        return claim_id(conversation_id, turn_id, self.text)


def _nlp():
    from .surfaces.pronouns import nlp

    return nlp()


def _stands_alone(text: str) -> bool:
    """A clause stands alone if, parsed on its own, it has a subject, a verb and a few words."""
    doc = _nlp()(text)
    words = [t for t in doc if t.is_alpha]
    return (any(t.dep_ in ("nsubj", "nsubjpass", "expl") for t in doc) and any(t.pos_ in ("VERB", "AUX") for t in doc)
            and len(words) >= _MIN_WORDS)


def _clauses(sent) -> list[tuple[int, int]]:
    """Token ranges of the sentence's stand-alone coordinated clauses: cut before the "and"/"but"
    that precedes a verb coordinated with the root, keep the cut only if every piece stands alone."""
    root, doc = sent.root, sent.doc
    cuts = []
    for c in root.children:
        if c.dep_ != "conj" or c.pos_ not in ("VERB", "AUX") or c.i < root.i:
            continue
        cc = [t for t in doc[root.i + 1:c.i] if t.dep_ == "cc" and t.lower_ in _SPLIT_CC]
        if cc:
            cuts.append(cc[-1].i)
    if not cuts:
        return [(sent.start, sent.end)]
    ranges, start = [], sent.start
    for cc_i in sorted(set(cuts)):
        ranges.append((start, cc_i))
        start = cc_i + 1  # drop the conjunction itself
    ranges.append((start, sent.end))
    if all(_stands_alone(doc[a:b].text) for a, b in ranges):
        return ranges
    return [(sent.start, sent.end)]


@dataclass
class TurnSegments(Sequence):
    """The claims of one turn, in order, and `note`: None, or what the per-turn cap left unchecked
    (`unchecked` sentences or clauses), for the turn verdict's status reason and rationale
    (`capped`). A sequence of its segments."""
    claims: list = field(default_factory=list)
    note: str | None = None
    unchecked: int = 0

    def __getitem__(self, i):
        return self.claims[i]

    def __len__(self) -> int:
        return len(self.claims)


def capped(turn_verdict, claims) -> object:
    """The turn verdict saying what the cap left unchecked (status reason and rationale); as it
    was when nothing was left. The state stays: what was checked was checked normally."""
    note = getattr(claims, "note", None)
    if not note:
        return turn_verdict
    noted = turn_verdict.with_note(note, f"Not all of the turn was checked: {note}.")
    noted.rationale["numbers"] = {**noted.rationale.get("numbers", {}),
                                  "unchecked_claims": getattr(claims, "unchecked", 0) or None}
    return noted


def segment(turn: str, max_claims: int | None = None) -> TurnSegments:
    """The turn's claims, in order. With `max_claims`, only the first `max_claims` are kept (and
    the costly clause test runs only for them); the rest are counted by sentence and named in `note`.

    Why a cap: one 4,000-character turn once became 666 claims, and checking them made another
    conversation's turn in the same batch miss the worker's batch deadline."""
    text = turn.strip()
    out = TurnSegments()
    if not text:
        return out
    doc = _nlp()(text)
    spans: list[tuple[int, int]] = []
    unchecked, unchecked_from = 0, None
    for sent in doc.sents:
        if max_claims is not None and len(spans) >= max_claims:
            if any(t.is_alpha for t in sent):  # beyond the cap: counted, not split, not checked
                unchecked += 1
                unchecked_from = sent.start_char if unchecked_from is None else unchecked_from
            continue
        for a, b in _clauses(sent):
            toks = doc[a:b]
            while len(toks) and toks[-1].is_punct and toks[-1].text in {",", ";", "-", "–"}:
                toks = toks[:-1]
            if len(toks) and any(t.is_alpha for t in toks):
                if max_claims is not None and len(spans) >= max_claims:
                    unchecked += 1
                    unchecked_from = toks.start_char if unchecked_from is None else unchecked_from
                else:
                    spans.append((toks.start_char, toks.end_char))
    if len(spans) <= 1 and not unchecked:
        out.claims.append(Segment(0, text, 0, len(text)))
        return out
    out.claims.extend(Segment(i, text[s:e], s, e) for i, (s, e) in enumerate(spans))
    if unchecked:
        out.unchecked = unchecked
        out.note = (f"only the first {len(spans)} claims of this turn were checked "
                    f"(DIALCHECK_MAX_CLAIMS_PER_TURN={max_claims}); {unchecked} more sentence(s) or clause(s) "
                    f"from character {unchecked_from} on ({len(text) - unchecked_from} characters) were not checked")
    return out


def turn_label(labels: Iterable[str], severity: dict[str, int] = SEVERITY) -> str:
    """Worst label wins: any REFUTES → REFUTES; else any SUPPORTS → SUPPORTS; else NOT ENOUGH INFO
    (`severity` ATTRIBUTION, a grounded turn: any NOT ENOUGH INFO before SUPPORTS)."""
    labels = list(labels)
    return max(labels, key=lambda lab: severity[lab]) if labels else "NOT ENOUGH INFO"
