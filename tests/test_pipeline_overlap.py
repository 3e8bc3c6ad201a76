"""settings `perf.overlap_parts`: a batch goes through in parts, the NLI model reading one part on a
thread while check-worthiness, surfaces and retrieval run on the next (workers/overlap.py).
It may change speed only: the verdicts must be those of the unsplit batch, an NLI outage on the
thread must give the verdicts it gives unsplit, and paths whose earlier stages call the NLI model
(the gate) must not be split."""
from __future__ import annotations

import threading

import orjson
import pytest

from schemas.protocols import ModelUnavailable, turn_verdicts
from workers.pipeline import Pipeline, PipelineHooks

VOLATILE = ("timings_ms", "created_at", "ts", "latency_ms")


class ThreadsSeen:
    """The real NLI model, noting the thread of every call (and failing on demand: an outage)."""

    def __init__(self, inner, fail: bool = False):
        self.inner, self.fail, self.threads = inner, fail, []

    def predict(self, premises, hypotheses):
        self.threads.append(threading.current_thread().name)
        if self.fail:
            raise ModelUnavailable("nli down (test)")
        return self.inner.predict(premises, hypotheses)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def published(pipe: Pipeline, items) -> list[dict]:
    out = []
    for v in turn_verdicts(pipe.check_turns(items)):
        d = orjson.loads(v.to_json())
        out.append({k: x for k, x in d.items() if k not in VOLATILE})
    return out


@pytest.fixture(scope="module")
def items(dialfact_records):
    return [r.to_check_item("fv") for r in dialfact_records[:14]]


@pytest.mark.model
@pytest.mark.parametrize("parts", [2, 3, 5])
def test_parts_give_the_verdicts_of_the_unsplit_batch(settings, nli, encoder, items, parts):
    one = published(Pipeline(settings.updated(perf={"overlap_parts": 1}), nli, encoder, None, "fv", "r0"), items)
    seen = ThreadsSeen(nli)
    split = Pipeline(settings.updated(perf={"overlap_parts": parts}), seen, encoder, None, "fv", "r0")
    assert published(split, items) == one
    assert seen.threads and all(t.startswith("dialcheck-overlap") for t in seen.threads), seen.threads
    assert len(seen.threads) == parts  # one NLI call per part


@pytest.mark.model
def test_an_nli_outage_on_the_thread_gives_the_unsplit_verdicts(settings, nli, encoder, items):
    unsplit = published(Pipeline(settings.updated(perf={"overlap_parts": 1}), ThreadsSeen(nli, fail=True),
                                 encoder, None, "fv", "r0"), items)
    split = published(Pipeline(settings.updated(perf={"overlap_parts": 2}), ThreadsSeen(nli, fail=True),
                               encoder, None, "fv", "r0"), items)
    assert split == unsplit
    assert {v["status"]["state"] for v in split} - {"ok"}, "the outage must show in the verdicts"


@pytest.mark.model
def test_only_paths_whose_earlier_stages_never_call_the_nli_model_are_split(settings, nli, encoder):
    s = settings.updated(perf={"overlap_parts": 2})
    r0, r4g = Pipeline(s, nli, encoder, None, "fv", "r0"), Pipeline(s, nli, encoder, None, "fv", "r4g")
    verify_at = [st.name for st in r0.stages].index("verify")
    assert split_at(r0, 8) == verify_at
    assert split_at(r0, 1) is None  # fewer claims than parts
    assert split_at(r4g, 8) is None  # the gate calls the NLI model
    hooked = Pipeline(s, nli, encoder, None, "fv", "r0", hooks=PipelineHooks(verify_forward=nli.predict))
    assert split_at(hooked, 8) is None  # a hook's forward stays on the caller's thread
    off = Pipeline(settings.updated(perf={"overlap_parts": 1}), nli, encoder, None, "fv", "r0")
    assert split_at(off, 8) is None

    class ThreadBound:  # a wrapper that does not say its predict may run on another thread (the lab's cache)
        version = nli.version

        def predict(self, premises, hypotheses):
            return nli.predict(premises, hypotheses)

    bound = Pipeline(s, ThreadBound(), encoder, None, "fv", "r0")
    assert split_at(bound, 8) is None


def split_at(pipe: Pipeline, claims: int):
    """Where the Pipeline would split a batch of `claims` (workers/overlap.py; None: unsplit)."""
    return pipe._split_at(pipe._chain, claims)
