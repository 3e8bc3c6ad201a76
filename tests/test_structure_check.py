"""The structured checks (workers/decision/structure.py, checks.py) and what they do to a decided
claim: a SUPPORTS badge whose roles, relations, slots or subject the evidence does not back is never
shown, a wrong year in an otherwise supported claim is REFUTES, and the verdict names the span."""
from __future__ import annotations

import numpy as np
import pytest

from schemas import Status
from workers.decision import ClaimEvidence, method
from workers.decision.structure import check
from workers.display import DisplayPolicy, display_of

pytestmark = pytest.mark.model  # every check parses the claim and the window with spaCy

COMMITTEE = "The committee fined the club for the late payment."
KYOTO = "Kyoto was the imperial capital for more than a thousand years, while Tokyo is the capital of Japan today."
HAMBURG = "Hamburg is the second-largest city in Germany; the capital, Berlin, is the largest."
ACTOR = "The actor who met the senator was famous."
EINSTEIN = "Einstein was born in Ulm and died in Princeton."
# the everyday probe's deciding window (starter base, "Kyoto"): "the capital city of X" is the capital of X
KYOTO_CITY = "Kyoto is the capital city of Kyoto Prefecture in the Kansai region of Japan's largest island, Honshu."

# (evidence, a claim that swaps its roles or relation, its entailed twin)
SWAPS = [
    (COMMITTEE, "The club fined the committee.", "The committee fined the club."),
    (COMMITTEE, "The committee was fined by the club.", "The club was fined by the committee."),
    (KYOTO, "Kyoto is the capital of Japan.", "Tokyo is the capital of Japan."),
    (HAMBURG, "Hamburg is the capital of Germany.", "Hamburg is a city in Germany."),
    (ACTOR, "The senator who met the actor was famous.", "The famous actor met the senator."),
    (EINSTEIN, "Einstein was born in Princeton.", "Einstein died in Princeton."),
    ("Sydney is the largest city in Australia, but Canberra is its capital.",
     "Sydney is the capital of Australia.", "Canberra is the capital of Australia."),
    (KYOTO_CITY, "Kyoto is the capital of Japan.", "Kyoto is the capital of Kyoto Prefecture."),
]


@pytest.mark.parametrize("evidence,false,twin", SWAPS)
def test_a_role_or_relation_swap_fails_and_its_entailed_twin_passes(evidence, false, twin):
    wrong, right = check(false, (evidence,)), check(twin, (evidence,))
    assert not wrong.agreed and wrong.failed is not None and wrong.evidence
    assert right.agreed and right.asked >= 2  # asked, not waved through


def test_the_failure_names_both_relations():
    r = check("The club fined the committee.", (COMMITTEE,))
    assert (r.failed.role, r.failed.text(), r.evidence) == \
        ("agent", "club → fined (who does it)", "committee → fined (who does it)")
    assert check("Kyoto is the capital of Japan.", (KYOTO,)).evidence == "Tokyo is capital"


def test_words_the_evidence_does_not_relate_at_all_are_not_a_finding():
    # a paraphrase, a nominalisation, and two words in different sentences: the NLI model's job, no veto
    assert check("The Eiffel Tower was finished in 1889.", ("The Eiffel Tower was completed in 1889.",)).agreed
    assert check("In 1997 ESPN broadcast a competition.",
                 ("The global presentation was led by the 1997 broadcast of ESPN's competition.",)).agreed
    assert check("The club fined the committee.", ("The committee met. The club fined a player.",)).agreed


def ev(claim, window, probs, title=""):
    return ClaimEvidence(claim, np.array([probs], float), np.ones(1), np.zeros(1, int), [None], None, [window], [title])


GUARDED = method("guarded", {"t_supports": 0.4, "t_refutes": 0.56, "on_topic": 0.5})
CHECKED = DisplayPolicy({"SUPPORTS": 0.5, "REFUTES": 0.5}, {"SUPPORTS": 0.9, "REFUTES": 0.9}, ("strong", "weak"),
                        checked=True)
UNCHECKED = DisplayPolicy(CHECKED.show, CHECKED.high, CHECKED.evidence)


def shown(policy, e):
    d = GUARDED.decide(e)
    return d, display_of(d, e, Status("ok", None, d.evidence), policy).show


def test_the_display_never_shows_a_supports_the_checks_disagree_with():
    swap = ev("The club fined the committee.", COMMITTEE, [0.83, 0.1, 0.07])
    twin = ev("The committee fined the club.", COMMITTEE, [0.81, 0.1, 0.09])
    d, was = shown(UNCHECKED, swap)
    assert d.label == "SUPPORTS" and was  # the shipped defaults before the structured checks: a wrong, shown badge
    d, now = shown(CHECKED, swap)
    assert d.label == "SUPPORTS" and not now
    assert [(m.check, m.type, m.status) for m in d.checks.mismatches()] == [("structure", "agent", "differs")]
    assert shown(CHECKED, twin)[1] and shown(CHECKED, twin)[0].checks.mismatches() == []


def test_a_wrong_year_in_a_supported_claim_is_refutes_naming_the_span():
    d = GUARDED.decide(ev("The bridge opened in 1837.", "The bridge opened to traffic in 1937.", [0.94, 0.04, 0.02]))
    assert d.label == "REFUTES" and d.probabilities["REFUTES"] == pytest.approx(0.94)
    assert [(m.check, m.type, m.span, m.status, m.evidence) for m in d.checks.mismatches()] == \
        [("slot", "year", "1837", "clash", "1937")]
    assert "1937" in d.note
    off = method("guarded", {**GUARDED.params, "slots": False})
    assert off.decide(ev("The bridge opened in 1837.", "The bridge opened to traffic in 1937.",
                         [0.94, 0.04, 0.02])).label == "SUPPORTS"


def test_a_number_the_evidence_does_not_state_is_never_a_shown_supports():
    e = ev("The bridge opened in 1937 after 4 years of work.", "The bridge opened to traffic in 1937.", [0.9, 0.08, 0.02])
    d, is_shown = shown(CHECKED, e)
    assert d.label == "SUPPORTS" and not is_shown
    assert [(m.span, m.status) for m in d.checks.mismatches()] == [("4 years", "unstated")]


def test_a_named_subject_the_window_does_not_name_is_never_shown():
    e = ev("Hamburg opened the bridge in 1937.", "The city opened the bridge in 1937.", [0.9, 0.08, 0.02])
    d, is_shown = shown(CHECKED, e)
    assert d.label == "SUPPORTS" and not is_shown and d.checks.subject is False
    assert shown(CHECKED, ev("Hamburg opened the bridge in 1937.", "The city opened the bridge in 1937.",
                             [0.9, 0.08, 0.02], title="Hamburg"))[1]


def test_the_structural_parse_runs_only_for_a_supports_that_would_be_shown():
    low = ev("The club fined the committee.", COMMITTEE, [0.45, 0.35, 0.2])  # SUPPORTS, below the show threshold
    d, is_shown = shown(CHECKED, low)
    assert d.label == "SUPPORTS" and not is_shown and not d.checks.structure_ran


# a named participant replaced by another name of the same passage, the rest of the statement kept:
# the evidence says it of the other name, in another sentence than the one naming the claim's
ENTITIES = [
    ("Guadalajara is the capital of the state of Jalisco. Guadalajara has the second-highest population density "
     "in Mexico.", "Jalisco has the second-highest population density in Mexico.",
     "Guadalajara has the second-highest population density in Mexico."),
    ("McClintock received her PhD from Cornell University in 1927. McClintock studied chromosomes in maize.",
     "Cornell University studied chromosomes.", "McClintock studied chromosomes."),
    ("Benin is a country in West Africa. The capital is Porto-Novo.", "The capital is West Africa.",
     "The capital is Porto-Novo."),
    # a passive subject that is a name: its part ("Summer") stands in the name's role
    ("The Winter Olympic Games were created out of the success of the Summer Olympic Games.",
     "The Summer Olympics were created out of the success of the Summer Olympic Games.",
     "The Winter Olympic Games were created out of the success of the Summer Olympic Games."),
]


@pytest.mark.parametrize("evidence,false,twin", ENTITIES)
def test_another_named_entity_of_the_passage_fails_and_the_right_one_passes(evidence, false, twin):
    wrong, right = check(false, (evidence,)), check(twin, (evidence,))
    assert not wrong.agreed and wrong.evidence
    assert right.agreed


def test_a_named_participant_the_verb_already_relates_is_no_replacement():
    # "Sogdiana was conquered by Cyrus the Great": the parse may hang "Great" on the verb, but the verb
    # relates Sogdiana too, so nothing was replaced
    assert check("Sogdiana was conquered by Cyrus the Great.",
                 ("Sogdiana was first conquered by Cyrus the Great, the founder of the Achaemenid Empire, and was "
                  "later annexed by the Macedonian ruler Alexander the Great in 328 BC.",)).agreed


CHECKED_LABEL = method("guarded", {**GUARDED.params, "checked": True})
NOCLASH = method("guarded", {**GUARDED.params, "clash_refutes": False})


def test_checked_makes_a_supports_the_checks_disagree_with_not_enough_info():
    swap = ev("The club fined the committee.", COMMITTEE, [0.83, 0.1, 0.07])
    assert GUARDED.decide(swap).label == "SUPPORTS"  # off by default: the yardstick did not hold it
    d = CHECKED_LABEL.decide(swap)
    assert d.label == "NOT ENOUGH INFO" and d.probabilities["SUPPORTS"] == 0.0
    assert "club → fined" in d.note and [m.check for m in d.checks.mismatches()] == ["structure"]
    assert CHECKED_LABEL.decide(ev("The committee fined the club.", COMMITTEE, [0.81, 0.1, 0.09])).label == "SUPPORTS"


def test_checked_rests_a_supports_on_another_window_that_states_the_relation():
    e = ClaimEvidence("The club fined the committee.", np.array([[0.83, 0.1, 0.07], [0.6, 0.3, 0.1]]), np.ones(2),
                      np.zeros(2, int), [None, None], None, [COMMITTEE, "Last May the club fined the committee."],
                      ["", ""])
    d = CHECKED_LABEL.decide(e)
    assert d.label == "SUPPORTS" and d.window == 1 and d.checks.agreed


def test_clash_refutes_an_undecided_claim_stated_but_for_one_value():
    e = ev("Crete covers 780 km.", "Crete covers 260 km from west to east.", [0.3, 0.45, 0.25])
    assert NOCLASH.decide(e).label == "NOT ENOUGH INFO"  # the NLI model decides nothing here
    d = GUARDED.decide(e)
    assert d.label == "REFUTES" and "260 km" in d.note
    assert [(m.span, m.status, m.evidence) for m in d.checks.mismatches()] == [("780 km", "clash", "260 km")]
    # another term of the claim the window does not state: not the same statement, no REFUTES
    assert GUARDED.decide(ev("Crete covers 780 km of coast.", "Crete covers 260 km from west to east.",
                           [0.3, 0.45, 0.25])).label == "NOT ENOUGH INFO"


RELATION_CLASH = method("guarded", {**GUARDED.params, "relation_clash": True})


def test_relation_clash_turns_only_a_clash_into_not_enough_info():
    """`relation_clash` (shipped): the label changes where the window gives the claim's relation
    to another word, not where it is merely silent (an unstated number stays a hidden SUPPORTS)."""
    swap = ev("The club fined the committee.", COMMITTEE, [0.83, 0.1, 0.07])
    d = RELATION_CLASH.decide(swap)
    assert d.label == "NOT ENOUGH INFO" and d.probabilities["SUPPORTS"] == 0.0 and "committee → fined" in d.note
    assert d.checks.structure.rival == "agent"  # the verb's agent is another word of the claim
    unstated = ev("The bridge opened in 1937 after 4 years of work.", "The bridge opened to traffic in 1937.",
                  [0.9, 0.08, 0.02])
    d = RELATION_CLASH.decide(unstated)
    assert d.label == "SUPPORTS" and not d.checks.agreed  # silence: the display's veto, not the label's
    assert RELATION_CLASH.decide(ev("The committee fined the club.", COMMITTEE, [0.81, 0.1, 0.09])).label == "SUPPORTS"


# the broad test (the display's veto) finds a rival here, the precise one (what `relation_clash` relabels) none:
# a symmetric verb, a description that may be the named participant itself, the predicate's own apposition
BROAD_ONLY = [
    ("Panama borders Colombia.", "Panama is bordered by Costa Rica to the west and Colombia to the southeast."),
    ("Wagner had three children.", "Wagner married Bertha in 1916; the couple had three children."),
    ("Todd Watson is the head coach.", "Jackalopes hire Todd Watson as new Head Coach | North American Hockey League"),
]


def test_a_name_of_the_claims_kind_is_a_precise_rival_a_part_of_a_name_is_not():
    yucatan = ("The Yucatán Peninsula is a large peninsula in southeast Mexico. The peninsula separates the Gulf "
               "of Mexico from the Caribbean Sea to the east.")
    assert check("The Caribbean Sea is a large peninsula in southeast Mexico.", (yucatan,)).precise.evidence \
        == "Yucatán is peninsula"  # "the Yucatán Peninsula" is another peninsula
    falls = "The three waterfalls are the Horseshoe Falls, the American Falls and the Bridal Veil Falls."
    found = check(falls, ("From largest to smallest, t" + falls[1:],))  # a right claim the parse reads otherwise
    assert not found.agreed and found.precise is None  # "American" is a part of one of its names, not another


@pytest.mark.parametrize("claim,evidence", BROAD_ONLY)
def test_relation_clash_relabels_only_what_the_precise_test_finds(claim, evidence):
    found = check(claim, (evidence,))
    assert not found.agreed and found.precise is None  # a finding for the veto, none for the label
    e = ev(claim, evidence, [0.85, 0.1, 0.05])
    d = RELATION_CLASH.decide(e)
    assert d.label == "SUPPORTS" and not display_of(d, e, Status("ok", None, d.evidence), CHECKED).show


@pytest.mark.parametrize("evidence,false,twin", SWAPS)
def test_every_relabelled_supports_is_one_the_veto_hides_and_the_display_fits_before_it(evidence, false, twin):
    """The precise finding implies the broad one, so the display, fitted on the decisions before the
    relabel (lab/tuning/lodo.py `display_basis`), shows exactly the badges it showed without it."""
    from lab.tuning.lodo import display_basis

    basis = display_basis(RELATION_CLASH)
    assert basis.params == GUARDED.params and display_basis(GUARDED) is GUARDED
    for claim in (false, twin):
        found = check(claim, (evidence,))
        assert found.precise is None or (not found.agreed and found.precise.failed is not None)
        e = ev(claim, evidence, [0.85, 0.1, 0.05])
        d, before = RELATION_CLASH.decide(e), basis.decide(e)
        assert (d.label == "NOT ENOUGH INFO") == (found.precise is not None and before.label == "SUPPORTS")
        shown = [display_of(x, e, Status("ok", None, x.evidence), CHECKED).show for x in (d, before)]
        assert shown[0] == shown[1] and not (shown[1] and found.precise is not None)
    assert RELATION_CLASH.decide(ev(false, evidence, [0.85, 0.1, 0.05])).label == "NOT ENOUGH INFO"


@pytest.mark.parametrize("claim,evidence,rival", [
    ("The club fined the committee.", COMMITTEE, "agent"),
    ("Jalisco has the second-highest population density in Mexico.",
     "Guadalajara has the second-highest population density in Mexico; Jalisco is a state.", "replaced"),
    ("Kyoto is the capital of Japan.", KYOTO, "predicate"),
    ("Kyoto is the capital of Japan.", KYOTO_CITY, "of"),
    ("Einstein was born in Princeton.", EINSTEIN, "place"),
])
def test_the_check_says_how_the_evidence_relates_the_words_otherwise(claim, evidence, rival):
    assert check(claim, (evidence,)).rival == rival


# the everyday probe's deciding window (starter base, "Brave New World"): it never says who wrote the
# novel, and it gives Orwell another work
ORWELL = "This novel is often used as a companion piece or inversion counterpart to George Orwell's Nineteen Eighty-Four (1949)."


def test_a_name_the_window_has_only_as_owner_of_another_name_is_a_broad_finding_only():
    wrong = check("George Orwell wrote Brave New World.", (ORWELL,))
    assert (wrong.rival, wrong.evidence, wrong.precise) == ("possessed", "Nineteen Eighty-Four of George Orwell", None)  # display only
    assert check("Orwell wrote Animal Farm.", (ORWELL,)).rival == "possessed"
    assert check("George Orwell wrote Nineteen Eighty-Four.", (ORWELL,)).agreed  # his own work
    # the window relates the two names itself, or has the verb: no silence to read
    assert check("Orwell wrote Animal Farm.", (ORWELL + " Orwell's Animal Farm followed.",)).agreed
    assert check("Orwell used Animal Farm.", (ORWELL,)).agreed
