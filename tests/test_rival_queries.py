"""Rival queries (workers/rival.py) over a real BM25 index: a claim with a one-filler relation asks
the index what fills its slot and reads the passage that states another filler; a claim without
one, or with a relation of many fillers, asks nothing; the stage table adds the stage only where
it is wanted. And the aliases a passage's opening gives its subject (workers/decision/aliases.py)."""
from __future__ import annotations

import pytest

from schemas.items import CheckItem
from schemas.protocols import Passage, SearchUnavailable
from schemas import Surface
from workers.decision.aliases import aliases
from workers.retrieval.bm25 import EmbeddedIndex
from workers.rival import RivalQueryStage
from workers.state import ClaimState

pytestmark = pytest.mark.unit

KB = [Passage("istanbul", "Istanbul", "Istanbul is the largest city in Turkey. It was the capital of the Ottoman Empire."),
      Passage("ankara", "Ankara", "Ankara is the capital of Turkey. It lies in Central Anatolia."),
      Passage("lyon", "Lyon", "Lyon is the third-largest city of France."),
      Passage("paris", "Paris", "Paris is the capital and largest city of France."),
      Passage("hamlet", "Hamlet", "Hamlet is a tragedy written by William Shakespeare sometime between 1599 and 1601.")]


def state(claim: str, *have: str) -> ClaimState:
    s = ClaimState(CheckItem("c", "c#1", [], claim))
    s.fv_surface = s.ir_surface = Surface("r0", claim)
    s.passages = [p for p in KB if p.id in have]
    return s


@pytest.fixture(scope="module")
def stage():
    return RivalQueryStage(EmbeddedIndex.build(KB), top_k=3)


def test_the_slot_is_asked_and_the_rival_s_passage_read(stage):
    s = state("Istanbul is the capital of Turkey.", "istanbul")
    stage.run([s])
    assert s.notes["rival_query"] == "is the capital of Turkey."
    assert [p.id for p in s.passages] == ["istanbul", "ankara"]


def test_the_object_is_asked_where_the_object_is_the_one_filler(stage):
    s = state("Hamlet was written by Christopher Marlowe.")
    stage.run([s])
    assert s.notes["rival_query"] == "Hamlet was written by ." and [p.id for p in s.passages] == ["hamlet"]


@pytest.mark.parametrize("claim", ["Lyon is a city in France.", "Paris is the capital of France.",
                                   "The Moon is made of cheese."])
def test_no_rival_nothing_added(stage, claim):
    s = state(claim, "paris")
    stage.run([s])
    assert [p.id for p in s.passages] == ["paris"]
    assert ("rival_query" in s.notes) == (claim == "Paris is the capital of France.")


def test_a_search_outage_is_a_degraded_status_not_a_silent_drop():
    class Down:
        def search_many(self, queries, k):
            raise SearchUnavailable("index unreachable")

    s = state("Istanbul is the capital of Turkey.", "istanbul")
    stage = RivalQueryStage(Down())
    with pytest.raises(SearchUnavailable) as e:
        stage.run([s])
    stage.on_outage([s], e.value)
    assert s.problems == [("degraded", "rival query unavailable, the claim's own passages read: index unreachable")]


@pytest.mark.parametrize("passage,names", [
    ("New York City, often called the Big Apple, is the most populous city. It is big.", ("the Big Apple",)),
    ("Mount Everest (known locally as Sagarmatha) is Earth's highest mountain.", ("Sagarmatha",)),
    ("Lady Gaga (born Stefani Joanne Angelina Germanotta; March 28, 1986) is a singer.",
     ("Stefani Joanne Angelina Germanotta",)),
    ("The Moon is Earth's only natural satellite. It is also known as Luna.", ()),  # the opening only
])
def test_the_opening_gives_the_subject_s_other_names(passage, names):
    assert aliases(passage) == names


@pytest.mark.parametrize("mode,checks_on,searcher,wanted", [
    ("auto", ["rival"], True, True), ("auto", [], True, False), ("on", [], True, True),
    ("on", ["rival"], False, False),  # no searcher (fv, a grounded turn): the given passages only
])
def test_the_stage_is_built_where_it_is_wanted(mode, checks_on, searcher, wanted):
    from types import SimpleNamespace

    from schemas.settings import load_settings
    from workers.building import rival_queries_wanted

    parts = SimpleNamespace(settings=load_settings(retrieval={"rival_queries": mode}), searcher=object() if searcher else None,
                            decision=SimpleNamespace(params={"checks_on": checks_on}))
    assert rival_queries_wanted(parts) is wanted


@pytest.mark.model
def test_end_to_end_the_rival_s_passage_refutes_and_is_shown_as_the_evidence(settings, nli, encoder):
    """The shipped decision checks rivals, so the e2e chain asks the index (the stage table's "rival"
    row): the claim's own retrieval reads Istanbul's passages, the rival query brings Ankara's."""
    from workers.pipeline import Pipeline

    istanbul = [Passage(f"istanbul-{i}", "Istanbul", f"Istanbul is the largest city in Turkey. {text}") for i, text in enumerate((
        "It was the capital of the Ottoman Empire.", "Istanbul straddles the Bosphorus.",
        "Istanbul is Turkey's economic centre."))]
    index = EmbeddedIndex.build([*istanbul, KB[1], *KB[2:]])
    claim = [CheckItem("c", "t1", [], "Istanbul is the capital of Turkey.")]
    off = Pipeline(settings.updated(retrieval={"rival_queries": "off"}), nli, encoder, index, "e2e", "r0")
    [alone] = off.check_turns(claim)
    assert "rival" not in [st.name for st in off.stages] and "Ankara" not in [p.title for p in alone.states[0].passages]

    pipe = Pipeline(settings, nli, encoder, index, "e2e", "r0")
    [result] = pipe.check_turns(claim)
    v = result.verdict
    assert v.label == "REFUTES" and v.rationale["rival_query"] == "is the capital of Turkey."
    assert v.evidence[0].title == "Ankara" and v.rationale["numbers"]["rival"] is True
    assert [m.evidence for m in v.mismatches if m.check == "rival"] == ["Ankara — capital of — Turkey"]
