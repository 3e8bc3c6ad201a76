"""The caches a chat stream earns (the same turns and passages come back) return what the uncached call returns and count hits."""
import pytest

from schemas.protocols import Passage
from workers.caches import CachedSearcher, memoize
from workers.windows import _windows, prescore, split_sentences, top_windows, window_cache_stats, windows

pytestmark = pytest.mark.unit


class Backend:
    def __init__(self):
        self.calls = []

    def search_many(self, queries, k):
        self.calls.append(list(queries))
        return [[Passage(f"{q}:{i}", q, f"text {i}").with_score(1.0 / (i + 1)) for i in range(k)] for q in queries]

    def vectors(self, ids):
        return None


def test_cached_searcher_returns_the_backends_hits_and_counts_hits():
    inner = Backend()
    cached = CachedSearcher(inner, 16)
    first = cached.search_many(["a turn", "the claim", "a turn"], 3)
    assert first == inner.search_many(["a turn", "the claim", "a turn"], 3)
    assert inner.calls[0] == ["a turn", "the claim"]  # one call, duplicates once
    again = cached.search_many(["a turn", "a follow-up"], 3)
    assert inner.calls[2] == ["a follow-up"]  # only the miss goes to the backend
    assert again[0] == first[0]
    assert cached.counts.as_dict() == {"hits": 2, "misses": 3}
    assert cached.search_many(["a turn"], 2) != first[:1]  # k is part of the key
    assert cached.vectors(["x"]) is None  # the rest is the backend's


def test_cached_searcher_is_bounded():
    cached = CachedSearcher(Backend(), 2)
    cached.search_many(["a", "b", "c"], 1)
    assert len(cached._cache) == 2


def test_memoize_counts():
    f = memoize(lambda x: x * 2, 4)
    assert [f(1), f(1), f(2)] == [2, 2, 4]
    assert f.counts.as_dict() == {"hits": 1, "misses": 2}


def test_window_cache_gives_the_uncached_windows():
    passage = "Paris is the capital of France. It has 2 million people! Is it big? Yes."
    sents = split_sentences(passage)
    expected = sents + [f"{a} {b}" for a, b in zip(sents, sents[1:])]
    before = window_cache_stats()["hits"]
    assert windows(passage) == expected
    assert windows(passage) == expected
    assert window_cache_stats()["hits"] == before + 1
    assert windows("") == [] and windows("One sentence") == ["One sentence"]
    assert _windows.cache_info().maxsize == 4096
    ranked = top_windows([passage], "Paris has 2 million people", 3)
    assert ranked[0].prescore == max(prescore(w, "Paris has 2 million people") for w in expected)
