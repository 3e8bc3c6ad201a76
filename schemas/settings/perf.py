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
