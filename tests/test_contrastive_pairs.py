"""The contrastive generator (lab/nli/contrastive.py) makes the right twins from parsed sentences:
each wrong twin beside its entailed twin, labelled by the documented rule. Real spaCy parses."""
from __future__ import annotations

import random

import pytest

from lab.nli.contrastive import generate, twins_of

pytestmark = pytest.mark.unit


def _pairs(text, kind):
    tw = [t for t in twins_of(text, random.Random(0)) if t.kind == kind]
    groups = {}
    for t in tw:
        groups.setdefault(t.group, {})[t.twin] = t
    return [(g["entailed"], g["wrong"]) for g in groups.values()]


def test_subject_object_swap_beside_its_entailed_twin():
    pairs = _pairs("The committee fined the club for the late payment.", "swap")
    assert [(r.claim, w.claim) for r, w in pairs] == [("The committee fined the club.", "The club fined the committee.")]
    assert (pairs[0][0].label, pairs[0][1].label) == ("entailment", "neutral")
    assert pairs[0][0].evidence == pairs[0][1].evidence == "The committee fined the club for the late payment."


def test_active_passive_inversion_keeps_and_swaps_the_roles():
    pairs = _pairs("The committee fined the club for the late payment.", "passive")
    assert [(r.claim, w.claim) for r, w in pairs] == [("The club was fined by the committee.",
                                                         "The committee was fined by the club.")]


def test_symmetric_verbs_make_no_swap():
    assert _pairs("The senator met the actor in Paris.", "swap") == []


def test_predicates_recombined_across_coordinated_clauses():
    pairs = _pairs("The Danube flows into the Black Sea, and the Rhine flows into the North Sea.", "recombine")
    got = {(r.claim, w.claim) for r, w in pairs}
    assert ("The Danube flows into the Black Sea.", "The Rhine flows into the Black Sea.") in got
    assert ("The Rhine flows into the North Sea.", "The Danube flows into the North Sea.") in got


def test_relative_clause_noun_gets_the_main_predicate():
    pairs = _pairs("The actor who met the senator was famous.", "recombine")
    assert [(r.claim, w.claim) for r, w in pairs] == [("The actor was famous.", "The senator was famous.")]


def test_changed_year_is_a_contradiction_and_ranges_are_skipped():
    pairs = _pairs("The bridge opened to traffic in 1937.", "number")
    assert len(pairs) == 1 and pairs[0][0].claim == "The bridge opened in 1937."
    right, wrong = pairs[0]
    assert wrong.label == "contradiction" and "1937" not in wrong.claim and wrong.claim.startswith("The bridge opened in ")
    assert _pairs("The music was written between 1901 and 2000.", "number") == []
    assert _pairs("The city has more than 300 bridges.", "number") == []


def test_entity_replaced_by_one_of_its_type_from_the_same_passage():
    text = "Gustave Eiffel was born in Dijon. Maurice Koechlin was an engineer."
    pairs = _pairs(text, "entity")
    got = {(r.claim, w.claim) for r, w in pairs}
    assert ("Maurice Koechlin was an engineer.", "Gustave Eiffel was an engineer.") in got
    assert all(w.label == "neutral" and w.evidence == text for _, w in pairs)


def test_generation_is_deterministic_for_a_seed():
    texts = [("a", "The committee fined the club in 1937. The bridge opened to traffic in 1921."),
             ("b", "Marie Curie won the prize in 1903, and Pierre Curie won the medal in 1911.")]
    assert generate(texts, seed=5) == generate(list(reversed(texts)), seed=5)
