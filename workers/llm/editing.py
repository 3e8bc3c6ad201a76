"""SuCEA's evidence-guided editing: a sub-claim and its top retrieved evidence → a retrieval query
that fills in what the sub-claim leaves vague (names, numbers, places) from the evidence, and
adds no fact the evidence does not state.

Why: a colloquial sub-claim ("that movie won it in 1998") retrieves poorly; the first retrieval
usually finds a passage naming the thing, and a query that names it retrieves the passages that
decide the claim (SuCEA: FoolMeTwice retrieval accuracy@10 47.5 → 54.0)."""
from __future__ import annotations

from dataclasses import dataclass

from schemas.protocols import Passage

from ..windows import top_windows

SYSTEM = ("You edit a claim into a search query for an encyclopedia. Use the evidence only to fill in what the "
          "claim leaves vague: replace pronouns and vague references with the names, numbers and places the "
          "evidence gives for them. Never add a fact that is not in the claim or the evidence, and keep what the "
          "claim asserts, even if the evidence disagrees. Answer with the query, one sentence, nothing else.")
EXAMPLE_CLAIM = "that movie won best picture in 1998"
EXAMPLE_EVIDENCE = "Titanic is a 1997 American epic romance film directed by James Cameron."
EXAMPLE_QUERY = "Titanic won best picture in 1998."
EVIDENCE_CHARS = 600  # the evidence window shown, cut to this


def block(claim: str, evidence: str) -> str:
    return f"Claim: {claim}\nEvidence: {evidence[:EVIDENCE_CHARS]}\nQuery:"


def prompt(sub_claim: str, evidence: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": block(EXAMPLE_CLAIM, EXAMPLE_EVIDENCE)},
            {"role": "assistant", "content": EXAMPLE_QUERY},
            {"role": "user", "content": block(sub_claim, evidence)}]


def sub_claims(text: str, limit: int) -> list[str]:
    """The claim's sub-claims (workers/segment.py: sentences, stand-alone and/but clauses); a
    one-claim text is itself."""
    from ..segment import segment

    return [s.text for s in segment(text)][:limit] or [text]


@dataclass
class TopEvidence:
    passage: Passage
    window: str


def top_evidence(sub_claim: str, passages: list[Passage]) -> TopEvidence | None:
    """The first retrieval's window that shares most with the sub-claim (the verifier's lexical
    pre-score), with its passage; None when nothing was retrieved."""
    if not passages:
        return None
    best = top_windows([p.text for p in passages], sub_claim, 1)
    if not best:
        return None
    return TopEvidence(passages[best[0].passage_index], best[0].text)


def merge(first: list[Passage], again: list[list[Passage]], k: int) -> list[Passage]:
    """SuCEA's pooling: the first retrieval's passages and every edited query's, one per id at its
    best cosine (all lists are dense-rescored by the same encoder), top k."""
    best: dict[str, Passage] = {}
    for p in [*first, *(p for hits in again for p in hits)]:
        if p.id not in best or p.score > best[p.id].score:
            best[p.id] = p
    return sorted(best.values(), key=lambda p: -p.score)[:k]
