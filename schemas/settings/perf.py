"""Optimisations that leave verdicts unchanged."""
from __future__ import annotations

from schemas.settings.base import Section, env


class PerfSettings(Section):
    """Optimisations that leave verdicts unchanged (bench/bench_pipeline.py turns them off and on)."""
    batch_query_encoding: bool = env("BATCH_QUERY_ENCODING", True,
                                      "Encode the retrieval queries of a batch in one encoder call (identical vectors).")
    cache_entries: int = env("CACHE_ENTRIES", 4096,
                              "Entries of the per-process caches of encoder vectors, claim surfaces and spaCy parses "
                              "(0: no caches).", ge=0, le=10_000_000)
    search_cache_entries: int = env("SEARCH_CACHE_ENTRIES", 4096,
                                     "Entries of the BM25 hit cache, by (query, k): a conversation's follow-up turns "
                                     "search its context turns again (0: no cache).", ge=0, le=10_000_000)
    batch_parsing: bool = env("BATCH_PARSING", True,
                              "Parse a batch's turns and claim topics with one spaCy `pipe` pass each, into the parse "
                              "cache (identical parses; needs cache_entries > 0).")
    overlap_parts: int = env("OVERLAP_PARTS", 2,
                             "Split a batch into this many parts and run a part's check-worthiness, surfaces and "
                             "retrieval while the NLI model reads the part before (a thread; the same verdicts). "
                             "1: one part, no overlap. Only on paths whose earlier stages never call the NLI model "
                             "(not with the gate or R5).", ge=1, le=64)
