"""Rival queries: ask the knowledge base what fills a claim's one-filler slot before saying yes.

Why: retrieval's query is the claim, so for "Istanbul is the capital of Turkey" it finds Istanbul's
passage ("... the largest city in Turkey and was the capital of the Ottoman Empire"), and the window
stating Ankara is never read. Question-based checkers (Q², QAGS) ask the second question: what is
the capital of Turkey? This stage asks it of the same searcher — the claim with its varied end
taken out ("is the capital of Turkey."; relations.py `masked_query`) — and adds the passages that
state the claim's relation with another filler to the ones the verifier reads, so the decision's
`rival` check (decision/components/rival.py) sees them and the verdict can show them.

Only a claim whose parse states an exclusive functional relation queries (one search each, batched);
the rest cost one regular-expression pass over the claim. With given passages (protocol fv, a
grounded turn) there is no searcher: the check reads the given passages' windows only. Whether it
runs is `retrieval.rival_queries` (auto: when the decision's rival check is on)."""
from __future__ import annotations

from schemas.protocols import Passage, Searcher

from .decision.relations import claim_relation, masked_query, rivals, with_owner
from .state import BaseStage, ClaimState, component
from .stages import topic_of
from .windows import split_sentences

# the rival passages one claim may add to what the verifier reads: one states the other filler; a
# second guards against the first being a passing mention
MAX_ADDED = 2


@component(reads=("item", "fv_surface", "surfaces", "passages"), writes=("passages", "problems", "notes"),
           can=("beside_nli", "degrade"))
class RivalQueryStage(BaseStage):
    """For each claim with an exclusive functional relation, one masked query through the searcher;
    the hits (top `top_k`) whose sentences state the relation with another filler join the claim's
    passages (at most MAX_ADDED, none already there). `notes["rival_query"]` records the query."""
    name = "rival"

    def __init__(self, searcher: Searcher, top_k: int = 5):
        self.searcher, self.top_k = searcher, top_k

    def run(self, states: list[ClaimState]) -> None:
        asked = [(s, *q) for s in states if s.fv_surface is not None for q in [_query(s)] if q is not None]
        if not asked:
            return
        hits = self.searcher.search_many([query for _, query, _ in asked], self.top_k)
        for (s, query, claim), found in zip(asked, hits):
            s.notes["rival_query"] = query
            have = {p.id for p in s.passages}
            added = [p for p in found if p.id not in have and _states_rival(claim, p)][:MAX_ADDED]
            s.passages = [*s.passages, *added]

    def on_outage(self, states: list[ClaimState], error: Exception) -> None:
        for s in states:
            if s.fv_surface is not None and _query(s) is not None:
                s.problems.append(("degraded", f"rival query unavailable, the claim's own passages read: {error}"))


def _query(s: ClaimState):
    """(the masked query, the claim's relation) of a claim with an exclusive functional relation, else None."""
    topic = topic_of(s)
    claim = claim_relation(topic)
    query = masked_query(claim, topic) if claim is not None else None
    return (query, claim) if query is not None else None


def _states_rival(claim, passage: Passage) -> bool:
    """Does a sentence of the passage state the claim's relation with another filler?"""
    return any(rivals(claim, (with_owner(sentence, passage.title),)) for sentence in split_sentences(passage.text))
