"""The rival check (workers/decision/components/rival.py) in the guarded decision: with "rival" in
`checks_on`, a SUPPORTS whose windows state another filler of the claim's one-filler relation is
REFUTES; a relation with many fillers, the claim's own filler, or the check switched off change
nothing. And "subject" in `checks_on`: a SUPPORTS from windows that never name the subject is withdrawn."""
from __future__ import annotations

import numpy as np
import pytest

from workers.decision import ClaimEvidence, method
from workers.decision.registry import CHECKS

pytestmark = pytest.mark.unit

BASE = {"t_supports": 0.4, "t_refutes": 0.56, "on_topic": 0.5}
MUNICH = ("Munich", "Munich is the capital and most populous city of Bavaria, Germany.")
BERLIN = ("Berlin", "Berlin is the capital and largest city of Germany.")


def claim_with(claim: str, *windows: tuple[str, str], entail=(0.8, 0.1)) -> ClaimEvidence:
    """A claim whose first window entails it; each window (title, text) from its own passage."""
    probs = np.array([[entail[i], 1 - entail[i] - 0.05, 0.05] for i in range(len(windows))], float)
    n = len(windows)
    return ClaimEvidence(claim, probs, np.ones(n), np.arange(n), [None] * n, None,
                         [w for _, w in windows], [t for t, _ in windows])


def decide(claim_evidence: ClaimEvidence, *on: str):
    return method("guarded", {**BASE, **({"checks_on": list(on)} if on else {})}).decide(claim_evidence)


def test_another_capital_in_a_window_about_it_refutes_when_switched_on():
    ev = claim_with("Munich is the capital of Germany.", MUNICH, BERLIN)
    off = decide(ev)
    assert off.label == "SUPPORTS" and CHECKS["rival"].mismatches(off.checks) == []
    on = decide(ev, "rival")
    assert (on.label, on.numbers.get("rival")) == ("REFUTES", True) and "Berlin" in on.note
    [m] = CHECKS["rival"].mismatches(on.checks)
    assert (m.check, m.type, m.status) == ("rival", "capital_of", "clash") and m.evidence.startswith("Berlin")


def test_the_claim_s_own_filler_is_no_rival():
    ev = claim_with("Berlin is the capital of Germany.", BERLIN, MUNICH)
    assert decide(ev, "rival").label == "SUPPORTS"


@pytest.mark.parametrize("claim,window", [
    ("Lyon is a city in France.", ("Lyon", "Lyon is a city in Switzerland.")),
    ("Paris is in Europe.", ("Paris", "Paris is in France.")),
])
def test_a_relation_with_many_fillers_keeps_its_supports(claim, window):
    assert decide(claim_with(claim, window, window), "rival").label == "SUPPORTS"


def test_a_rival_in_a_window_the_guards_doubt_only_hides_the_badge():
    # the rival's window is off the claim's topic (it does not name Munich) and its passage is about
    # neither party: a passing mention
    doubted = ("Football", "The Bundesliga final was played in Berlin, the capital of Germany.")
    ev = claim_with("Munich is the capital of Germany.", MUNICH, ("History", "Berlin is the capital of Germany."))
    d = decide(ev, "rival")
    assert [(s.subject, firm) for s, firm, _ in d.checks.finding("rival")] == [("Berlin", False)]
    assert d.label == "SUPPORTS" and not CHECKS["rival"].agrees(d.checks)
    assert decide(claim_with("Munich is the capital of Germany.", MUNICH, doubted), "rival").label == "SUPPORTS"


def test_a_firm_rival_refutes_a_claim_the_windows_left_undecided_and_is_the_window_shown():
    # the verifier decided nothing (no window entails or contradicts); the rival's passage is about it
    ev = claim_with("Istanbul is the capital of Turkey.",
                    ("Istanbul", "Istanbul is the largest city in Turkey."),
                    ("Ankara", "Ankara is the capital of Turkey."), entail=(0.2, 0.3))
    assert decide(ev).label == "NOT ENOUGH INFO"
    d = decide(ev, "rival")
    assert (d.label, d.window, d.numbers.get("rival")) == ("REFUTES", 1, True) and "Ankara" in d.note


def test_a_past_filler_is_no_rival_of_a_present_one():
    # capitals move: "Bonn was the capital" and "Berlin is the capital" are both true
    ev = claim_with("Berlin is the capital of Germany.", BERLIN, ("Bonn", "Bonn was the capital of Germany."))
    assert decide(ev, "rival").label == "SUPPORTS"
    assert decide(claim_with("Bonn was the capital of Germany.", ("Bonn", "Bonn was the capital of Germany."), BERLIN),
                  "rival").label == "SUPPORTS"


@pytest.mark.model  # the subject check reads the claim's proper nouns (spaCy)
def test_a_true_claim_whose_strongest_window_is_another_passage_s_rests_on_one_that_names_it():
    # Nepal's "It is mainly situated in the Himalayas" entails most; Mount Everest's own window names it
    ev = claim_with("Mount Everest is in the Himalayas.",
                    ("Nepal", "It is mainly situated in the Himalayas."),
                    ("Mount Everest", "It lies in the Mahalangur Himal sub-range of the Himalayas."), entail=(0.9, 0.8))
    d = decide(ev, "subject")
    assert (d.label, d.window) == ("SUPPORTS", 1)


@pytest.mark.model  # the subject check reads the claim's proper nouns (spaCy)
def test_a_supports_whose_windows_never_name_the_subject_is_withdrawn_when_switched_on():
    ev = claim_with("The Moon is made of cheese.", ("Cheese", "The curds are pressed into finished cheese."))
    assert decide(ev).label == "SUPPORTS"
    d = decide(ev, "subject")
    assert (d.label, d.numbers.get("subject_unnamed")) == ("NOT ENOUGH INFO", True)


def test_a_given_passage_without_a_title_is_about_the_reply():
    # a grounded turn's passage (no title): what the assistant was given states another capital
    ev = claim_with("Istanbul is the capital of Turkey.", ("", "Ankara is the capital of Turkey."), entail=(0.3,))
    d = decide(ev, "rival")
    assert (d.label, d.numbers.get("rival")) == ("REFUTES", True)


@pytest.mark.model  # the subject check reads the claim's proper nouns (spaCy)
@pytest.mark.parametrize("claim,text,named", [
    ("Albert Einstein was born in France.", "Albert Camus. Albert Camus was born in French Algeria.", False),
    ("Albert Einstein was born in Germany.", "Einstein was born in Ulm.", True),  # the head name
    ("The Book of Leviticus was named after a Greek word.", "Leviticus. The English name comes from the Latin.", True),
    ("New York City is the largest city in the United States.", "New York is the most populous city.", True),
])
def test_a_subject_is_named_by_its_head_name_not_a_first_name(claim, text, named):
    from workers.decision.components.subject import subject_named

    assert subject_named(claim, (text,)) is named
