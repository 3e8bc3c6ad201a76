"""Passage retrieval: one Searcher interface over an embedded BM25 index and OpenSearch."""
from schemas.protocols import Passage, Searcher, SearchUnavailable

__all__ = ["Passage", "Searcher", "SearchUnavailable"]
