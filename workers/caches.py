"""Per-process caches that leave verdicts unchanged (settings section `perf`).

Why: a conversation's context turns are parsed by spaCy for every claim in it, `dialcheck eval`
builds the same surfaces once per surface mode, and the gate and retrieval encode texts that
repeat. Each cache is keyed by exactly the inputs of a deterministic function, so a hit returns
what a miss would have computed (the E5 engine's vectors do not depend on batch neighbours:
bench/bench_pipeline.py compares labels with the caches off and on)."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from cachetools import LRUCache


class CachedEncoder:
    """An Encoder that remembers vectors by (text, is_query); misses go to the wrapped encoder in
    one call."""

    def __init__(self, encoder, entries: int):
        self.inner = encoder
        self.version, self.dim = encoder.version, encoder.dim
        self._cache: LRUCache = LRUCache(maxsize=entries)

    def encode(self, texts: Sequence[str], *, is_query: bool = False) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if (t, is_query) not in self._cache))
        if missing:
            for text, vec in zip(missing, self.inner.encode(missing, is_query=is_query)):
                self._cache[(text, is_query)] = vec
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._cache[(t, is_query)] for t in texts])

    def __getattr__(self, name):  # ready(), close() ... of the wrapped backend
        return getattr(self.inner, name)


def memoize(fn: Callable, entries: int) -> Callable:
    """`fn` with an LRU cache of `entries` results keyed by its (hashable) arguments; 0: `fn`."""
    if entries <= 0:
        return fn
    cache: LRUCache = LRUCache(maxsize=entries)

    def cached(*args):
        try:
            return cache[args]
        except KeyError:
            cache[args] = value = fn(*args)
            return value

    cached.cache = cache  # so a batched producer can fill it ahead (see pronouns.parse_ahead)
    return cached
