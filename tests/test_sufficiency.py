"""Evidence sufficiency and the guarded rule: off-topic or silent evidence never REFUTES."""
from __future__ import annotations

import numpy as np
import pytest

from workers.decision import ClaimEvidence, method
from lab.tuning.fit import fit_guarded as fit
from workers.decision.sufficiency import coverage, key_terms, strength, subject_covered

pytestmark = pytest.mark.unit

EIFFEL = "It was built in 1889 for the World's Fair."
EIFFEL_R4 = "The Eiffel Tower was built in 1889 for the World's Fair."  # R4: the pronoun resolved from the context


def ev(claim, windows, probs, titles=None, topic=EIFFEL_R4):
    return ClaimEvidence(claim, np.array(probs, float).reshape(len(probs), 3), np.ones(len(probs)),
                         np.arange(len(probs)), [None] * len(probs), None, list(windows), list(titles or []), topic)


def test_key_terms_skip_chat_fillers_and_keep_names_and_numbers():
    anchors, content, numbers = key_terms("yeah I think Elvis was born in Tupelo in 1935")
    assert {"elvi", "tupelo"} <= set(anchors) and numbers == {"1935"} and "think" not in content | anchors


def test_a_window_about_something_else_covers_little():
    off, _ = coverage(EIFFEL, "Disneyland Paris opened in 1992 east of the city.", "Disneyland Paris")
    on, conflict = coverage(EIFFEL, "The tower was built for the 1889 World's Fair.", "Eiffel Tower")
    assert off < 0.5 <= on and not conflict


def test_a_different_year_in_the_same_slot_is_on_topic_and_a_conflict():
    cov, conflict = coverage(EIFFEL, "The tower was built for the 1887 World's Fair.")
    assert cov >= 0.9 and conflict


GUARDED = method("guarded", {"t_supports": 0.6, "t_refutes": 0.6, "on_topic": 0.5})


@pytest.mark.model  # parses with spaCy
@pytest.mark.parametrize("window,title,probs,label", [
    # the Disneyland-for-Eiffel case: strong contradiction from a window about something else
    ("Disneyland Paris opened in 1992 east of the city.", "Disneyland Paris", [0.02, 0.08, 0.90], "NOT ENOUGH INFO"),
    ("The tower was built for the 1887 World's Fair.", "Eiffel Tower", [0.02, 0.08, 0.90], "REFUTES"),
    ("The tower was built for the 1889 World's Fair.", "Eiffel Tower", [0.90, 0.08, 0.02], "SUPPORTS"),
    ("The tower is 330 metres tall.", "Eiffel Tower", [0.10, 0.85, 0.05], "NOT ENOUGH INFO"),
])
def test_guarded_rule(window, title, probs, label):
    assert GUARDED.predict([ev(EIFFEL, [window], [probs], [title])]) == [label]


@pytest.mark.model  # parses with spaCy
def test_no_refutes_about_another_subject_or_an_unresolved_pronoun():
    """Chicago's fair is a World's Fair with another year, but the window does not name the Eiffel
    Tower; and with the pronoun unresolved nothing can be shown to be about the claim."""
    chicago = ev(EIFFEL, ["The fair was built in 1893 in Chicago for the World's Fair."], [[0.02, 0.08, 0.90]], ["Chicago"])
    assert GUARDED.predict([chicago]) == ["NOT ENOUGH INFO"]
    d = GUARDED.decide(chicago)  # its contradiction is shown as NEI mass, not as REFUTES
    assert d.label == "NOT ENOUGH INFO" and d.probabilities["REFUTES"] == 0.0 and d.probabilities["NOT ENOUGH INFO"] > 0.9
    assert d.evidence == "weak" and "off the claim's topic" in d.note
    unresolved = ev(EIFFEL, ["The tower was built for the 1887 World's Fair."], [[0.02, 0.08, 0.90]], ["Eiffel Tower"],
                    topic="")
    assert GUARDED.predict([unresolved]) == ["NOT ENOUGH INFO"]


@pytest.mark.model  # parses with spaCy
def test_a_generic_word_of_the_subject_is_not_its_name():
    from workers.decision.sufficiency import subject_covered

    sears = "Major construction projects, including the Sears Tower, which in 1974 became the world's tallest building"
    assert not subject_covered(EIFFEL_R4, sears, "Chicago")
    assert subject_covered(EIFFEL_R4, "The tower was built for the 1887 World's Fair.", "Eiffel Tower")


@pytest.mark.model  # parses with spaCy
def test_subject_through_chat_wrappers():
    from workers.decision.sufficiency import subject_terms

    assert {t for _, t in subject_terms("I think Elvis Presley was born in Memphis.")} == {"elvi", "presley"}
    assert subject_terms("He was born in Tupelo, Mississippi.") is None


@pytest.mark.model  # parses with spaCy
def test_guarded_rule_never_refutes_when_a_window_supports():
    both = ev(EIFFEL, ["The tower was built for the 1889 World's Fair.", "The tower was built for the 1887 World's Fair."],
              [[0.9, 0.05, 0.05], [0.05, 0.05, 0.9]], ["Eiffel Tower", "Eiffel Tower"])
    assert GUARDED.decide(both).label == "SUPPORTS"


def test_evidence_strength():
    assert strength(None, 0.5) == "none" and strength(0.2, 0.5) == "weak" and strength(0.8, 0.5) == "strong"


@pytest.mark.model  # parses with spaCy
def test_fit_respects_the_refutes_precision_floor():
    """Off-topic windows with high contradiction are NEI in gold; a fit that let them refute would
    fall below the floor, so the fitted on-topic level must exclude them."""
    rng = np.random.default_rng(0)
    evs, labels = [], []
    for i in range(60):
        c = 0.7 + 0.2 * rng.random()
        evs.append(ev(EIFFEL, ["Disneyland Paris opened in 1992."], [[0.05, 1 - c - 0.05, c]], ["Disneyland Paris"]))
        labels.append("NOT ENOUGH INFO")
    for i in range(30):
        evs.append(ev(EIFFEL, ["The tower was built for the 1887 World's Fair."], [[0.05, 0.15, 0.8]], ["Eiffel Tower"]))
        labels.append("REFUTES")
        evs.append(ev(EIFFEL, ["The tower was built for the 1889 World's Fair."], [[0.8, 0.15, 0.05]], ["Eiffel Tower"]))
        labels.append("SUPPORTS")
    params = fit(evs, labels)
    layer = method("guarded", params)
    pred = layer.predict(evs)
    refutes = [g for g, p in zip(labels, pred) if p == "REFUTES"]
    assert refutes and all(g == "REFUTES" for g in refutes)
    assert params["on_topic"] > 0.22  # the Disneyland window's coverage


@pytest.mark.model  # parses with spaCy
def test_a_middle_name_is_not_required_but_first_and_last_names_are():
    # R4 writes the name as the context gives it ("Elvis Aaron Presley"); the article says "Elvis Presley"
    topic = "Elvis Aaron Presley's music career began in Seattle."
    assert subject_covered(topic, "His music career began in 1954 in Memphis.", title="Elvis Presley")
    assert not subject_covered(topic, "His music career began in 1954 in Memphis.", title="Aaron Copland")
    # two-word names keep both parts required
    assert not subject_covered("The Eiffel Tower was built in 1887.", "The tower was built in 1889.", title="Tower Bridge")


def test_the_runtime_reads_scikit_learns_stop_list_without_importing_it():
    """workers/text.py copies scikit-learn's English stop list (no scikit-learn at run time); the copy is
    the library's, and importing the pipeline loads no scikit-learn."""
    import subprocess
    import sys

    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS as library

    from workers.text import ENGLISH_STOP_WORDS

    assert ENGLISH_STOP_WORDS == frozenset(library)
    code = "import sys, workers.pipeline; sys.exit(any(m.startswith('sklearn') for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_the_decision_reads_one_tokeniser():
    """Key terms (sufficiency) and the claim features read words with workers/text.py's TERM: letters in
    any script, one word through an apostrophe or a hyphen, numbers apart."""
    from workers.decision.features import claim_words

    assert claim_words("Ramón’s well-known café opened in 1905.") == ["ramón's", "well-known", "café", "opened", "in"]
    assert key_terms("Ramón visited Mödling in 1905") == ({"modl"}, {"ramon", "visit"}, {"1905"})  # folded, stemmed
