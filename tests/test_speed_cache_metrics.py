"""The caches' hit rates on the worker's /metrics (dialcheck_cache_*{cache=...}).

The caches are the real ones (workers/caches.py over a real bm25s index of a few passages, the
real window cache); what is under test is that /metrics reports their own counts, live, by name.
`CachingStandIn` is the stream stand-in (tests/stream_standin.py) plus those real caches, for the
real worker in tests/test_observability.py (`--pipeline tests.test_speed_cache_metrics:create`)."""
from __future__ import annotations

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from schemas.protocols import Passage
from schemas.settings import load_settings
from schemas.protocols import CacheStats
from streams.observability import Observability
from workers.caches import CachedSearcher, cache_stats, memoize
from workers.retrieval.bm25 import EmbeddedIndex
from workers.windows import top_windows, window_cache_stats

from tests.stream_standin import StandIn

pytestmark = pytest.mark.unit

PASSAGES = [
    ("Elvis Presley", "Elvis Presley was born in Tupelo, Mississippi. He moved to Memphis at 13."),
    ("Tupelo", "Tupelo is a city in Lee County, Mississippi. It is the birthplace of Elvis Presley."),
    ("Memphis", "Memphis is a city on the Mississippi River. Graceland is in Memphis."),
    ("Paris", "Paris is the capital of France. It has about two million people."),
]


def real_searcher(entries: int = 64) -> CachedSearcher:
    index = EmbeddedIndex.build([Passage(f"p{i}", t, x) for i, (t, x) in enumerate(PASSAGES)])
    return CachedSearcher(index, entries)


class CachingStandIn(StandIn):
    """The stand-in's verdicts, and per item a real cached BM25 search of every context turn and the
    claim, then the hits' windows: as the pipeline's retrieval reads a conversation's turns again."""

    def __init__(self, settings):
        super().__init__(settings)
        self.searcher = real_searcher()

    def check_turns(self, items):
        for it in items:
            hits = self.searcher.search_many([*it.context, it.claim], 2)
            top_windows([p.text for h in hits for p in h], it.claim, 4)
        return super().check_turns(items)

    def cache_stats(self):
        return cache_stats(self.searcher)


def create(settings, protocol: str = "e2e", surface: str = "r4g") -> CachingStandIn:
    return CachingStandIn(settings)


def samples(text: str) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_cache_stats_are_the_caches_own_counts():
    searcher = real_searcher(entries=2)
    searcher.search_many(["Where was Elvis born?", "Graceland", "Where was Elvis born?"], 2)
    searcher.search_many(["Where was Elvis born?", "capital of France"], 2)
    surfaces = memoize(str.upper, 8)
    surfaces("a"), surfaces("a")
    stats = cache_stats(searcher, encoder=None, surface_builder=surfaces)
    assert stats["bm25"] == {"hits": 2, "misses": 3, "entries": 2, "capacity": 2}  # bounded: 3 keys, 2 kept
    assert stats["surfaces"] == {"hits": 1, "misses": 1, "entries": 1, "capacity": 8}
    assert "encoder" not in stats  # a cache that is off is not reported (no made-up zeros)
    assert set(stats["windows"]) == {"hits", "misses", "entries", "capacity"} and stats["windows"]["capacity"] == 4096
    assert cache_stats(searcher.inner)["windows"] == window_cache_stats()  # an uncached backend: no bm25 row
    assert "bm25" not in cache_stats(searcher.inner)


def test_metrics_export_the_checkers_caches_live():
    checker = CachingStandIn(load_settings())
    assert isinstance(checker, CacheStats) and not isinstance(StandIn(load_settings()), CacheStats)
    obs = Observability(load_settings())
    obs.attach(None, None, checker=StandIn(load_settings()))
    assert not any(n.startswith("dialcheck_cache") for n, _ in samples(generate_latest(obs.registry).decode()))
    obs.attach(None, None, checker=checker)
    checker.searcher.search_many(["Elvis Presley", "Tupelo Mississippi"], 2)
    s = samples(generate_latest(obs.registry).decode())
    bm25 = (("cache", "bm25"),)
    assert s[("dialcheck_cache_hits_total", bm25)] == 0 and s[("dialcheck_cache_misses_total", bm25)] == 2
    assert s[("dialcheck_cache_entries", bm25)] == 2 and s[("dialcheck_cache_capacity", bm25)] == 64
    checker.searcher.search_many(["Elvis Presley"], 2)  # a follow-up turn: read at the next scrape
    s = samples(generate_latest(obs.registry).decode())
    assert s[("dialcheck_cache_hits_total", bm25)] == 1 and s[("dialcheck_cache_misses_total", bm25)] == 2
    w = window_cache_stats()
    assert s[("dialcheck_cache_hits_total", (("cache", "windows"),))] == w["hits"]
    assert s[("dialcheck_cache_capacity", (("cache", "windows"),))] == 4096


def test_a_failing_cache_report_never_fails_a_scrape():
    class Broken:
        def cache_stats(self):
            raise RuntimeError("boom")

    obs = Observability(load_settings())
    obs.attach(None, None, checker=Broken())
    s = samples(generate_latest(obs.registry).decode())
    assert ("dialcheck_ready", ()) in s and not any(n.startswith("dialcheck_cache") for n, _ in s)


@pytest.mark.model  # spaCy's English pipeline
def test_parses_made_ahead_count_as_misses():
    """parse_ahead fills the parse cache in one spaCy pass: those parses are misses, the later
    `parse` of the same turn a hit (else /metrics showed more entries than misses)."""
    from workers.surfaces import pronouns

    pronouns.set_parse_cache(load_settings().perf.cache_entries)
    cached, before = pronouns.cached_parse(), pronouns.cached_parse().stats()
    texts = ["Cache metrics test: Elvis was born in Tupelo.", "Cache metrics test: he moved to Memphis."]
    pronouns.parse_ahead(texts + texts[:1])
    pronouns.parse(texts[0])
    after = cached.stats()
    assert (after["misses"] - before["misses"], after["hits"] - before["hits"]) == (2, 1)
    assert after["entries"] - before["entries"] == 2


def test_metrics_export_what_the_llm_steps_replied_by_step_and_kind():
    """The counts of workers/llm/replies.py (what the real model answered, each fallback's reason) on
    /metrics: the Pipeline's own `llm_replies`, read live at each scrape."""
    from schemas.protocols import ReplyStats
    from workers.llm.replies import COUNTS
    from workers.pipeline import Pipeline

    class Replying(StandIn):
        llm_replies = Pipeline.llm_replies  # the method the worker's real checker has

    checker = Replying(load_settings())
    assert isinstance(checker, ReplyStats) and not isinstance(StandIn(load_settings()), ReplyStats)
    COUNTS.clear()
    obs = Observability(load_settings())
    obs.attach(None, None, checker=checker)
    assert not any(n.startswith("dialcheck_llm_replies") for n, _ in samples(generate_latest(obs.registry).decode()))
    COUNTS.count("r5", "ok"), COUNTS.count("r5", "echo"), COUNTS.count("r5", "echo"), COUNTS.count("judge", "unavailable")
    s = samples(generate_latest(obs.registry).decode())
    assert s[("dialcheck_llm_replies_total", (("kind", "echo"), ("step", "r5")))] == 2
    assert s[("dialcheck_llm_replies_total", (("kind", "ok"), ("step", "r5")))] == 1
    assert s[("dialcheck_llm_replies_total", (("kind", "unavailable"), ("step", "judge")))] == 1
    COUNTS.clear()
