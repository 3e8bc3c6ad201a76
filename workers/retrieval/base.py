"""The search interface (pyserini-style: one `search()` whatever the backend)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol, Sequence, runtime_checkable

import numpy as np


class SearchUnavailable(RuntimeError):
    """The index or search server failed; the pipeline degrades with this reason."""


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    text: str
    score: float = 0.0
    doc_id: str = ""  # the source document (title for Wikipedia); passages of one doc share it

    def with_score(self, score: float) -> "Passage":
        return replace(self, score=float(score))


@runtime_checkable
class Searcher(Protocol):
    name: str

    def search(self, query: str, k: int) -> list[Passage]:
        """BM25 (k1 1.5, b 0.4) top-k passages, best first."""

    def vectors(self, passage_ids: Sequence[str]) -> np.ndarray | None:
        """Stored encoder vectors for these passages, or None if the backend keeps none
        (dense re-scoring then encodes the passages client-side)."""

    def dense_search(self, query_vector: np.ndarray, k: int) -> list[Passage] | None:
        """Server-side kNN, or None where the backend has none."""
