"""Badges that hold on chat responses: SUPPORTS only for what the evidence covers, the
uncovered terms named, a display policy fitted to a precision floor and refused for another NLI
model, and the FaithDial audit's labels mapped as ../shared/data/README.md says."""
from __future__ import annotations

import numpy as np
import pytest

from lab.tuning.datasets import NOT_SUPPORTS, EvalSet, attainable_coverage, faithdial_label, set_metrics
from lab.tuning.display_fit import BadgeRows, fit_badges, fit_display, share_right, shown_mask
from lab.tuning.fit import fit_decision
from lab.tuning.variants import guarded_method
from schemas import Status
from workers.decision import ClaimEvidence, Decision, method
from workers.decision.sufficiency import stated, uncovered
from workers.display import BADGE_FEATURES, CONSTANT, BadgeFacts, DisplayPolicy

pytestmark = pytest.mark.unit

EVIDENCE = "The Eiffel Tower was completed in 1889 for the World's Fair in Paris."


def _ev(claim: str, windows: list[str], probs: list[list[float]], title: str = "Eiffel Tower") -> ClaimEvidence:
    n = len(windows)
    return ClaimEvidence(claim, np.array(probs, float), np.ones(n), np.zeros(n, int), [None], None, windows, [title], "")


def test_uncovered_names_the_added_name_and_number_as_written():
    missing, conflict = uncovered("Yeah, the Eiffel Tower was completed in 1889 by Gustave Eiffel.", (EVIDENCE,))
    assert missing == ["Gustave"] and not conflict
    missing, conflict = uncovered("I think the Eiffel Tower was completed in 1887.", (EVIDENCE,))
    assert missing == ["1887"] and conflict  # a year stated differently: the same slot
    assert uncovered("Did you know the Eiffel Tower was completed in 1889?", (EVIDENCE,)) == ([], False)


@pytest.mark.model  # parses with spaCy
@pytest.mark.parametrize("claim,term", [
    ("Oh cool, the Eiffel Tower was completed in 1889 by Gustave Eiffel.", "Gustave"),
    ("The Eiffel Tower was completed in 1889 and it has 108 floors.", "108"),
    ("Yeah, the Eiffel Tower was completed in 1889 for the World's Fair in Lyon.", "Lyon"),
])
def test_a_reply_that_adds_a_detail_is_not_supported_when_coverage_is_asked(claim, term):
    """The NLI entails all three (0.9): the old rule says SUPPORTS; with the coverage guard the
    claim is at most NOT ENOUGH INFO and the verdict names what is not covered."""
    ev = _ev(claim, [EVIDENCE], [[0.9, 0.08, 0.02]])
    old = method("guarded", {"t_supports": 0.35, "t_refutes": 0.56, "on_topic": 0.5})
    assert old.decide(ev).label == "SUPPORTS"
    for cover in ("names", "all"):
        new = method("guarded", {"t_supports": 0.35, "t_refutes": 0.56, "on_topic": 0.5, "cover": cover})
        d = new.decide(ev)
        assert d.label == "NOT ENOUGH INFO" and term in d.uncovered, (cover, d)


@pytest.mark.model  # parses with spaCy
def test_two_windows_together_may_cover_a_claim():
    claim = "The Eiffel Tower was completed in 1889 and designed by Gustave Eiffel."
    windows = ["The Eiffel Tower was completed in 1889.", "Its design is credited to Gustave Eiffel's company."]
    ev = _ev(claim, windows, [[0.8, 0.15, 0.05], [0.6, 0.35, 0.05]])
    d = method("guarded", {"t_supports": 0.35, "t_refutes": 0.56, "on_topic": 0.5, "cover": "names"}).decide(ev)
    assert d.label == "SUPPORTS" and d.window == 0 and d.uncovered == ()


@pytest.mark.model  # parses with spaCy
def test_a_same_slot_value_refutes_only_with_slot_refutes():
    ev = _ev("The Eiffel Tower was completed in 1887.", [EVIDENCE], [[0.7, 0.2, 0.1]])
    base = {"t_supports": 0.35, "t_refutes": 0.56, "on_topic": 0.5, "cover": "names", "clash_refutes": False}
    assert method("guarded", base).decide(ev).label == "NOT ENOUGH INFO"
    assert guarded_method({**base, "slot_refutes": True}).decide(ev).label == "REFUTES"
    # the shipped `clash_refutes` reaches it too: every other term stated, the year stated otherwise
    assert method("guarded", {**base, "clash_refutes": True}).decide(ev).label == "REFUTES"
    with pytest.raises(ValueError, match="lab/tuning/variants.py"):  # the runtime knows the shipped rule only
        method("guarded", {**base, "slot_refutes": True})


@pytest.mark.model  # parses with spaCy
def test_the_dialogue_scopes_ask_a_standalone_claim_nothing_or_its_names():
    """"The Moon is made of cheese." against a Cheese passage the NLI entails: a reply in a
    conversation is held to `cover`; without context "dialogue" reads it as it stands, and
    "dialogue+names" still asks that the evidence name the Moon (the fit scores the same levels)."""
    from dataclasses import replace

    window = "The solid curds are then separated from the whey and pressed into finished cheese."
    alone = _ev("The Moon is made of cheese.", [window], [[0.68, 0.2, 0.12]], title="Cheese")
    reply = replace(alone, in_dialogue=True)
    base = {"t_supports": 0.35, "t_refutes": 0.56, "on_topic": 0.5, "cover": "half"}
    chat = method("guarded", {**base, "cover_scope": "dialogue"})
    names = guarded_method({**base, "cover_scope": "dialogue+names"})
    assert chat.decide(alone).label == "SUPPORTS" and chat.decide(reply).label == "NOT ENOUGH INFO"
    d = names.decide(alone)
    assert d.label == "NOT ENOUGH INFO" and d.uncovered == ("Moon",)
    assert names.decide(reply).label == "NOT ENOUGH INFO"
    plain = _ev("The Eiffel Tower was completed in 1889.", [EVIDENCE], [[0.9, 0.08, 0.02]])
    assert names.decide(plain).label == "SUPPORTS"  # names stated: a standalone claim is read as it stands
    topic = guarded_method({**base, "cover_scope": "dialogue+topic"})  # the window must be about the Moon
    assert alone.on_topic[0] < 0.5 <= plain.on_topic[0]
    assert topic.decide(alone).label == "NOT ENOUGH INFO" and topic.decide(plain).label == "SUPPORTS"
    subject = guarded_method({**base, "cover_scope": "dialogue+subject"})  # window or title names the Moon
    assert subject.decide(alone).label == "NOT ENOUGH INFO" and subject.decide(plain).label == "SUPPORTS"
    fitted = fit_decision("guarded", [alone] * 10 + [plain] * 10, ["NOT ENOUGH INFO"] * 10 + ["SUPPORTS"] * 10,
                          cover="half", cover_scope="dialogue+names")
    assert fitted.params["cover_scope"] == "dialogue+names" and fitted.predict([alone, plain]) == ["NOT ENOUGH INFO", "SUPPORTS"]


@pytest.mark.model  # parses with spaCy
def test_the_shipped_decision_with_a_standalone_level_from_lab():
    """lab/tuning/variants.py `with_standalone`: the shipped thresholds, standalone claims asked their
    names ("The Moon is made of cheese." against a Cheese passage is then NOT ENOUGH INFO)."""
    from pathlib import Path

    from lab.tuning.variants import with_standalone
    from workers.decision.methods import load

    shipped = load(Path(__file__).resolve().parent.parent / "workers" / "decision" / "params" / "decision.json")
    alone = _ev("The Moon is made of cheese.", ["It is pressed into finished cheese."], [[0.9, 0.08, 0.02]],
                title="Cheese")
    assert shipped.decide(alone).label == "SUPPORTS"  # the shipped "dialogue" scope reads it as it stands
    names = with_standalone(shipped, "names")
    assert names.typed.t_supports == shipped.typed.t_supports and names.params["cover_scope"] == "dialogue+names"
    assert (names.decide(alone).label, names.decide(alone).uncovered) == ("NOT ENOUGH INFO", ("Moon",))
    with pytest.raises(ValueError, match="standalone level"):
        with_standalone(shipped, "everything")


def test_the_cli_offers_every_coverage_scope_the_rule_knows():
    from dialcheck.cli import build_parser
    from lab.tuning.variants import COVER_SCOPES

    for scope in COVER_SCOPES:
        assert build_parser().parse_args(["tune", "fit", "--method", "guarded", "--cover-scope", scope]).cover_scope == scope
    with pytest.raises(SystemExit):
        build_parser().parse_args(["tune", "fit", "--cover-scope", "everywhere"])


@pytest.mark.model  # parses with spaCy
def test_the_fit_knows_the_coverage_guard():
    """Claims that add a name are NEI in gold: without the guard the fit cannot tell them apart
    (same entailment), with it the fitted rule gets them right."""
    added = [_ev("The Eiffel Tower was completed in 1889 by Gustave Eiffel.", [EVIDENCE], [[0.9, 0.08, 0.02]])] * 20
    plain = [_ev("The Eiffel Tower was completed in 1889.", [EVIDENCE], [[0.9, 0.08, 0.02]])] * 20
    labels = ["NOT ENOUGH INFO"] * 20 + ["SUPPORTS"] * 20
    guarded = fit_decision("guarded", added + plain, labels, cover="names")
    assert guarded.params["cover"] == "names"
    assert guarded.predict(added + plain) == labels
    blind = fit_decision("guarded", added + plain, labels)  # the same entailment: it must err on one half
    assert blind.predict(added) == blind.predict(plain) and blind.predict(added + plain) != labels


def _rows(n: int, p_right: float, seed: int) -> BadgeRows:
    """SUPPORTS badges whose chance of being right grows with p."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.3, 1.0, n)
    right = rng.random(n) < np.clip(p * p_right, 0, 1)
    return BadgeRows(np.zeros(n, int), p, np.ones(n, bool), np.zeros(n, bool), right)


def test_the_display_fit_holds_its_floors_on_every_training_set():
    sets = {"a": _rows(400, 1.0, 1), "b": _rows(400, 0.9, 2)}
    policy = fit_display(sets)
    for rows in sets.values():
        m = shown_mask(rows, (policy.show["SUPPORTS"], policy.show["REFUTES"]), policy.evidence)
        assert m.sum() >= 10 and rows.right[m].mean() >= 0.80
        h = shown_mask(rows, (policy.high["SUPPORTS"], policy.high["REFUTES"]), ("strong",))
        assert h.sum() == 0 or rows.right[h].mean() >= 0.90
    assert policy.high["SUPPORTS"] >= policy.show["SUPPORTS"]
    # the largest coverage: one grid step lower breaks the floor on some set
    lower = round(policy.show["SUPPORTS"] - 0.02, 2)
    assert any(rows.right[shown_mask(rows, (lower, 2.0), policy.evidence)].mean() < 0.80 for rows in sets.values())


def test_a_policy_round_trips_and_decides_like_its_numbers(tmp_path):
    policy = DisplayPolicy({"SUPPORTS": 0.7, "REFUTES": 0.5}, {"SUPPORTS": 0.9, "REFUTES": 0.8}, ("strong",),
                           {"nli_model": {"version": "nli-a"}})
    policy.save(tmp_path / "display.json")
    again = DisplayPolicy.load(tmp_path / "display.json")
    assert again == policy
    ok = Status("ok", None, "strong")
    assert again.display("SUPPORTS", {"SUPPORTS": 0.69}, ok).show is False
    assert again.display("SUPPORTS", {"SUPPORTS": 0.75}, ok).confidence == "medium"
    assert again.display("SUPPORTS", {"SUPPORTS": 0.95}, ok).confidence == "high"
    assert again.display("SUPPORTS", {"SUPPORTS": 0.95}, Status("ok", None, "weak")).show is False
    assert again.display("REFUTES", {"REFUTES": 0.95}, Status("degraded", "x", "strong")).show is False
    assert again.display("NOT ENOUGH INFO", {"NOT ENOUGH INFO": 1.0}, ok).show is False
    # the constant rule is what it was: medium from 0.60 on weak evidence
    assert CONSTANT.display("SUPPORTS", {"SUPPORTS": 0.65}, Status("ok", None, "weak")).confidence == "medium"


def test_a_display_policy_for_another_nli_model_is_refused(tmp_path):
    from schemas.settings import DecisionSettings
    from workers.decision import DecisionModelMismatch
    from workers.display import load_display

    DisplayPolicy({"SUPPORTS": 0.7, "REFUTES": 0.5}, {"SUPPORTS": 0.9, "REFUTES": 0.8}, ("strong",),
                  {"nli_model": {"version": "nli-a"}}).save(tmp_path / "display.json")
    settings = DecisionSettings(display_params=str(tmp_path / "display.json"))
    assert load_display(settings, "nli-a").show["SUPPORTS"] == 0.7
    with pytest.raises(DecisionModelMismatch, match="'nli-a'.*'nli-b'"):
        load_display(settings, "nli-b")


@pytest.mark.parametrize("begin,label", [
    ("Entailment", "SUPPORTS"), ("entailment,uncooperative", "SUPPORTS"), ("entailment. uncooperative", "SUPPORTS"),
    ("hallucination", NOT_SUPPORTS), ("partial hallucination", NOT_SUPPORTS), ("entailment,hallucination", NOT_SUPPORTS),
    ("hallucinated", NOT_SUPPORTS), ("generic", None), ("uncooperative", None), ("", None)])
def test_faithdial_labels_map_as_the_data_readme_says(begin, label):
    assert faithdial_label(begin) == label


@pytest.mark.model  # parses with spaCy
def test_a_decision_carries_its_uncovered_terms_only_when_coverage_was_asked():
    ev = _ev("The Eiffel Tower was completed in 1889 by Gustave Eiffel.", [EVIDENCE], [[0.9, 0.08, 0.02]])
    assert method("guarded", {"t_supports": 0.35, "t_refutes": 0.56, "on_topic": 0.5}).decide(ev).uncovered == ()
    d = method("guarded", {"t_supports": 0.35, "t_refutes": 0.56, "on_topic": 0.5, "cover": "names"}).decide(ev)
    assert isinstance(d, Decision) and d.uncovered == ("Gustave",)


def test_a_set_that_cannot_reach_the_floor_does_not_hide_every_badge_elsewhere():
    """Half of "noisy"'s badges are wrong at every p: it cannot reach 80 %, so it is named in the
    policy's meta and puts no floor on the fit; "clean" keeps its coverage."""
    rng = np.random.default_rng(5)
    n = 400
    noisy = BadgeRows(np.zeros(n, int), rng.uniform(0.3, 1.0, n), np.ones(n, bool), np.zeros(n, bool),
                      rng.random(n) < 0.5)
    clean = _rows(400, 1.0, 6)
    both = fit_display({"clean": clean, "noisy": noisy})
    alone = fit_display({"clean": clean})
    assert both.meta["unreachable"] == ["noisy"] and alone.meta["unreachable"] == []
    assert both.show == alone.show


def test_coverage_reads_names_in_any_script_and_ordinals_as_numbers():
    """"Mödling" is one word (it was "M" + "dling", never covered), "4th" the number 4."""
    assert uncovered("Mödling is a town.", ("Mödling The Mödlingbach flows through the town.",)) == ([], False)
    assert uncovered("Ramón Tapia won the silver.", ("Ramón Tapia was a Chilean boxer who won the silver medal.",)) \
        == ([], False)
    assert uncovered("It is the 4th season.", ("the 4th season of the League",)) == ([], False)
    assert uncovered("It is the 5th season.", ("the 4th season of the League",)) == (["5th"], True)


@pytest.mark.parametrize("reply,kept", [
    ("Yeah, pretty cute . Did you know Tupac was a ballet dancer ?", "Did you know Tupac was a ballet dancer ?"),
    ("Do you eat the meat? Hunting wildlife is done by humans for food.", "Hunting wildlife is done by humans for food."),
    ("True. The pain of a broken heart is part of the survival instinct.",
     "The pain of a broken heart is part of the survival instinct."),
    ("Do you like animation movies?", "Do you like animation movies?"),  # nothing else: read whole
])
def test_coverage_asks_nothing_of_sentences_that_state_nothing(reply, kept):
    assert stated(reply) == kept


def test_an_added_name_is_still_uncovered_beside_a_reaction():
    missing, _ = uncovered("How interesting! The Eiffel Tower was completed in 1889 by Gustave Eiffel.", (EVIDENCE,))
    assert missing == ["Gustave"]


def _badge_rows(n: int, seed: int) -> BadgeRows:
    """SUPPORTS badges at one p, right exactly when nothing is uncovered: p cannot tell them apart,
    the scorer's `uncovered` feature can."""
    rng = np.random.default_rng(seed)
    unc = rng.integers(0, 2, n)
    x = np.zeros((n, len(BADGE_FEATURES)))
    x[:, 0], x[:, BADGE_FEATURES.index("uncovered")], x[:, BADGE_FEATURES.index("strong")] = 0.9, unc, 1.0
    return BadgeRows(np.zeros(n, int), np.full(n, 0.9), np.ones(n, bool), np.zeros(n, bool), unc == 0, x, unc == 0)


def test_the_badge_scorer_shows_what_p_alone_cannot_tell_apart():
    sets = {"a": _badge_rows(200, 1), "b": _badge_rows(200, 2)}
    by_p = fit_display(sets)
    shown = shown_mask(sets["a"], (by_p.show["SUPPORTS"], by_p.show["REFUTES"]), by_p.evidence)
    # half wrong at every p: no threshold reaches 80 %, the sets are unreachable and what shows is a coin toss
    assert by_p.meta["unreachable"] == ["a", "b"] and sets["a"].right[shown].mean() < 0.6
    for complete in (False, True):
        policy = fit_badges(sets, scorer=True, complete=complete)
        rows = sets["a"].scored(policy.scorer, policy.complete)
        m = shown_mask(rows, (policy.show["SUPPORTS"], policy.show["REFUTES"]), policy.evidence)
        assert m.sum() >= 90 and rows.right[m].all()


def test_a_badge_policy_round_trips_and_hides_an_incomplete_supports(tmp_path):
    policy = fit_badges({"a": _badge_rows(200, 3), "b": _badge_rows(200, 4)})
    policy.save(tmp_path / "display.json")
    again = DisplayPolicy.load(tmp_path / "display.json")
    assert again == policy and again.complete and again.scorer is not None
    ok = Status("ok", None, "strong")
    assert again.checked  # the structured checks must agree (True: a verdict whose `mismatches` were empty)
    full = BadgeFacts(0.9, 0.02, 0, True, 3, 1.0, False, checks=True)
    assert again.display("SUPPORTS", {"SUPPORTS": 0.9}, ok, full).show is True
    assert again.display("SUPPORTS", {"SUPPORTS": 0.9}, ok, BadgeFacts(0.9, 0.02, 1, True, 3, 1.0, False, checks=True)).show is False
    assert again.display("SUPPORTS", {"SUPPORTS": 0.9}, ok, BadgeFacts(0.9, 0.02, 0, True, 3, 1.0, False, checks=False)).show is False
    assert again.display("SUPPORTS", {"SUPPORTS": 0.9}, ok).show is False  # nothing to score it on
    assert "badge score" in again.describe()


def test_a_floor_held_one_standard_error_below_asks_more_of_few_badges():
    """`share_right` with z: ten of ten right is 0.909 at one standard error (Wilson), nine of ten
    0.760 — below the 80 % floor that the share itself (0.90) passes."""
    assert share_right(np.ones(10, bool)) == 1.0
    assert share_right(np.ones(10, bool), z=1.0) == pytest.approx(1 / 1.1)
    nine = np.array([True] * 9 + [False])
    assert share_right(nine) == pytest.approx(0.9) and share_right(nine, z=1.0) < 0.80
    sets = {"a": _rows(400, 1.0, 1), "b": _rows(400, 0.9, 2)}
    plain, held = fit_display(sets), fit_display(sets, show_z=1.0, high_z=1.0)
    assert held.show["SUPPORTS"] >= plain.show["SUPPORTS"] and held.meta["high_z"] == 1.0
    for rows in sets.values():
        m = shown_mask(rows, (held.show["SUPPORTS"], held.show["REFUTES"]), held.evidence)
        assert share_right(rows.right[m], z=1.0) >= 0.80


@pytest.mark.model  # parses with spaCy
@pytest.mark.parametrize("reply,thin", [("I have an iguana.", True), ("Seems so!", True),
                                        ("Iguanas are lizards.", False)])
def test_a_reply_too_thin_to_check_is_not_supported(reply, thin):
    """Every word of "I have an iguana." stands in the evidence, but it says something about the
    speaker the evidence does not: a reply of fewer than MIN_TERMS key terms is never covered.
    A claim without context is read as it stands (the dialogue scope)."""
    from dataclasses import replace

    from workers.decision.guarded import MIN_TERMS

    assert MIN_TERMS == 2
    window = "Iguana is a genus of herbivorous lizards that are native to tropical areas of the Americas."
    alone = _ev(reply, [window], [[0.8, 0.15, 0.05]], title="Iguana")
    chat = method("guarded", {"t_supports": 0.35, "t_refutes": 0.56, "on_topic": 0.5, "cover": "half",
                              "cover_scope": "dialogue"})
    assert chat.decide(alone).label == "SUPPORTS"
    d = chat.decide(replace(alone, in_dialogue=True))
    assert d.label == ("NOT ENOUGH INFO" if thin else "SUPPORTS")
    assert ("too little to check" in d.note) == thin


def test_the_attainable_coverage_is_every_right_badge_plus_the_wrong_ones_the_floor_allows():
    """8 right and 5 wrong badges among 40 claims: at 80 % a display can show the 8 and 2 wrong ones
    (10 of 40, 25 %), never more, whatever it scores; with no wrong badge it can show all it has."""
    right = [True] * 8 + [False] * 5
    assert attainable_coverage(right, 40) == 25.0
    assert attainable_coverage([True] * 8, 40) == 20.0
    assert attainable_coverage([False] * 3, 40) == 0.0
    s = EvalSet("toy", [None] * 40, ["SUPPORTS"] * 8 + ["NOT ENOUGH INFO"] * 32, [str(i) for i in range(40)],
                ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO"))
    pred = ["SUPPORTS"] * 13 + ["NOT ENOUGH INFO"] * 27
    shown = [CONSTANT.display(p, {p: 0.9}, Status("ok", None, "strong")) for p in pred]
    assert set_metrics(s, pred, shown)["shown"]["attainable"] == 25.0
