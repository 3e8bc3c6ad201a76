"""Per-process caches that leave verdicts unchanged (settings section `perf`).

Why: a conversation's context turns are parsed by spaCy for every claim in it, `dialcheck eval`
builds the same surfaces once per surface mode, and the gate and retrieval encode texts that
repeat. In a chat stream, follow-up turns of one conversation search the same context turns again
(retrieval reads the top hit of every context turn) and read the same retrieved passages again.
Each cache is keyed by exactly the inputs of a deterministic function, so a hit returns what a miss
would have computed (the E5 engine's vectors do not depend on batch neighbours:
bench/bench_pipeline.py compares labels with the caches off and on). Each keeps hit and miss counts
(`cache_stats`: hits, misses, entries and capacity per cache, exported on the worker's /metrics
as dialcheck_cache_*)."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from cachetools import LRUCache

from schemas.protocols import Passage


class Counts:
    """Hits and misses of one cache (read by /metrics and the benchmarks)."""

    def __init__(self) -> None:
        self.hits = self.misses = 0

    def as_dict(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses}

    def stats(self, cache: LRUCache) -> dict[str, int]:
        """Hits, misses, entries held and the bound (what /metrics exports per cache)."""
        return {**self.as_dict(), "entries": len(cache), "capacity": int(cache.maxsize)}


class CachedEncoder:
    """An Encoder that remembers vectors by (text, is_query); misses go to the wrapped encoder in
    one call."""

    def __init__(self, encoder, entries: int):
        self.inner = encoder
        self.version, self.dim = encoder.version, encoder.dim
        self._cache: LRUCache = LRUCache(maxsize=entries)
        self.counts = Counts()

    def encode(self, texts: Sequence[str], *, is_query: bool = False) -> np.ndarray:
        found = {t: self._cache[(t, is_query)] for t in dict.fromkeys(texts) if (t, is_query) in self._cache}
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        self.counts.misses += len(missing)
        self.counts.hits += len(texts) - len(missing)
        if missing:
            for text, vec in zip(missing, self.inner.encode(missing, is_query=is_query)):
                found[text] = self._cache[(text, is_query)] = vec
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([found[t] for t in texts])

    def stats(self) -> dict[str, int]:
        return self.counts.stats(self._cache)

    def __getattr__(self, name):  # ready(), close() ... of the wrapped backend
        return getattr(self.inner, name)


class CachedSearcher:
    """A Searcher that remembers BM25 hits by (query, k). In a conversation every claim's retrieval
    also searches each context turn (top-1 per turn joins the candidates), so a follow-up turn
    repeats all but one of its searches; only the misses go to the backend, in one `search_many`.
    The hits are the backend's own (the index does not change while a worker runs)."""

    def __init__(self, searcher, entries: int):
        self.inner = searcher
        self._cache: LRUCache = LRUCache(maxsize=entries)
        self.counts = Counts()

    def search_many(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        found = {q: self._cache[(q, k)] for q in dict.fromkeys(queries) if (q, k) in self._cache}
        missing = [q for q in dict.fromkeys(queries) if q not in found]
        self.counts.misses += len(missing)
        self.counts.hits += len(queries) - len(missing)
        if missing:
            for q, hits in zip(missing, self.inner.search_many(missing, k)):
                found[q] = self._cache[(q, k)] = hits
        return [list(found[q]) for q in queries]

    def search(self, query: str, k: int) -> list[Passage]:
        return self.search_many([query], k)[0]

    def stats(self) -> dict[str, int]:
        return self.counts.stats(self._cache)

    def __getattr__(self, name):  # vectors(), dense_search(), ready(), meta ... of the wrapped backend
        return getattr(self.inner, name)


def memoize(fn: Callable, entries: int) -> Callable:
    """`fn` with an LRU cache of `entries` results keyed by its (hashable) arguments; 0: `fn`."""
    if entries <= 0:
        return fn
    cache: LRUCache = LRUCache(maxsize=entries)
    counts = Counts()

    def cached(*args):
        try:
            value = cache[args]
            counts.hits += 1
            return value
        except KeyError:
            counts.misses += 1
            cache[args] = value = fn(*args)
            return value

    cached.cache = cache  # so a batched producer can fill it ahead (see pronouns.parse_ahead)
    cached.counts = counts
    cached.stats = lambda: counts.stats(cache)
    return cached


def cache_stats(searcher=None, encoder=None, surface_builder=None, parse=None) -> dict[str, dict[str, int]]:
    """Per cache that is on: hits, misses, entries and capacity. `bm25` (the searcher's hit cache),
    `encoder` (E5 vectors), `surfaces` (claim surfaces) are the Pipeline's own; `parse` (spaCy parses,
    the memoized `parse`) and `windows` (a passage's evidence windows) are per process. Read by the
    worker's /metrics."""
    from .windows import window_cache_stats

    out = {name: part.stats() for name, part in (("bm25", searcher), ("encoder", encoder),
                                                 ("surfaces", surface_builder), ("parse", parse))
           if callable(getattr(part, "stats", None))}
    out["windows"] = window_cache_stats()
    return out
