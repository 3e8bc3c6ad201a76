"""Dense re-scoring of BM25 candidates with the sentence encoder (the paper's E5 stage), and the
dialogue-context union of Chamoun et al. (top-k for the claim ∪ top-1 per context turn)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from schemas.protocols import Encoder, Passage, Searcher


def dense_rescore(encoder: Encoder, searcher: Searcher, query: str, candidates: list[Passage], k: int,
                  query_vector: np.ndarray | None = None) -> tuple[list[Passage], str]:
    """Order candidates by cosine to the query. Uses the index's stored vectors when it has them,
    else encodes the candidates here (and says so in the returned mode)."""
    if not candidates:
        return [], "none"
    qv = query_vector if query_vector is not None else encoder.encode([query], is_query=True)[0]
    pv = searcher.vectors([p.id for p in candidates])
    mode = "stored-vectors"
    if pv is None:
        pv = encoder.encode([f"{p.title}: {p.text}" for p in candidates], is_query=False)
        mode = "client-side-encoding"
    scores = pv @ qv
    order = np.argsort(-scores)[:k]
    return [candidates[i].with_score(scores[i]) for i in order], mode


def context_union(searcher: Searcher, claim_query: str, context: Sequence[str], k: int,
                  per_turn: int = 1) -> list[Passage]:
    """Top-k passages for the claim, then the top `per_turn` for each context turn that are not
    already in; claim hits keep their rank order in front (one `search_many` round trip)."""
    return merge_context_hits(searcher.search_many([claim_query, *context], k), per_turn)


def merge_context_hits(results: Sequence[Sequence[Passage]], per_turn: int = 1) -> list[Passage]:
    """results[0]: the claim's hits; results[1:]: each context turn's. See `context_union`."""
    out = list(results[0])
    seen = {p.id for p in out}
    for hits in results[1:]:
        for p in hits[:per_turn]:
            if p.id not in seen:
                seen.add(p.id)
                out.append(p)
    return out


def unique_docs(passages: Sequence[Passage]) -> list[str]:
    """Ranked, de-duplicated document ids (document-level retrieval metrics)."""
    seen: set[str] = set()
    out = []
    for p in passages:
        d = p.doc_id or p.title
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out
