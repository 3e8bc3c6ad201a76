"""Labels that are wrong fail here: obvious FV items per label through the real pipeline with the
shipped defaults (NLI model + decision layer), and a macro-F1 floor on a fixed slice of DialFact
testsmall. The shipped decision layer was fitted on all of testsmall, so the slice score is
in-sample: the floor guards against regressions, it is not a quality claim (README has the
cross-validated numbers)."""
from __future__ import annotations

import pytest

from schemas.items import CheckItem

ELVIS = [("Elvis Presley", "Elvis Aaron Presley (January 8, 1935 – August 16, 1977) was an American singer and "
                           "actor. He was born in Tupelo, Mississippi, and moved to Memphis, Tennessee, with his "
                           "family when he was 13 years old.")]
EIFFEL = [("Eiffel Tower", "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. "
                           "It is named after the engineer Gustave Eiffel, whose company designed and built the tower "
                           "from 1887 to 1889.")]
OBVIOUS = [
    ("SUPPORTS", "Elvis Presley was born in Tupelo, Mississippi.", ELVIS),
    ("SUPPORTS", "The Eiffel Tower is in Paris.", EIFFEL),
    ("REFUTES", "Elvis Presley was born in London, England.", ELVIS),
    ("REFUTES", "The Eiffel Tower is made of wood and stands in Berlin.", EIFFEL),
    ("NOT ENOUGH INFO", "That's cool, I didn't know that.", ELVIS),
    ("NOT ENOUGH INFO", "My grandmother saw Elvis Presley in concert once.", ELVIS),
]
# Known failure (issue 10 report): the shipped NLI model gives high contradiction to claims the
# evidence is silent about, and the decision layer (fitted on DialFact, where such claims are mostly
# REFUTES) follows it. Strict: these start failing the suite the day they are answered correctly.
KNOWN_WRONG = [
    ("NOT ENOUGH INFO", "Elvis Presley owned a pink Cadillac.", ELVIS),
    ("NOT ENOUGH INFO", "Bowling is a popular sport in Japan.", ELVIS),
    ("NOT ENOUGH INFO", "I would love to visit the Eiffel Tower one day!", EIFFEL),
]
SLICE = 90  # the first 90 records of testsmall, fixed


@pytest.fixture(scope="module")
def fv_pipeline(settings, nli, encoder):
    from workers.pipeline import Pipeline

    return Pipeline(settings, nli, encoder, None, protocol="fv", surface="r0")


@pytest.mark.parametrize("label,claim,evidence", OBVIOUS, ids=[f"{o[0]}:{o[1][:30]}" for o in OBVIOUS])
def test_obvious_items(fv_pipeline, label, claim, evidence):
    v = fv_pipeline.check_many([CheckItem("q", "1", ["Tell me something."], claim, evidence)])[0]
    assert v.label == label, (v.label, v.probabilities)


@pytest.mark.xfail(strict=True, reason="shipped NLI calls unsupported claims contradicted (issue 10)")
@pytest.mark.parametrize("label,claim,evidence", KNOWN_WRONG, ids=[f"{o[0]}:{o[1][:30]}" for o in KNOWN_WRONG])
def test_known_wrong_items(fv_pipeline, label, claim, evidence):
    v = fv_pipeline.check_many([CheckItem("q", "1", ["Tell me something."], claim, evidence)])[0]
    assert v.label == label, (v.label, v.probabilities)


def test_macro_f1_floor_on_fixed_slice(fv_pipeline, dialfact_records):
    from workers.scoring import label_metrics

    recs = dialfact_records[:SLICE]
    verdicts = fv_pipeline.check_many([r.to_check_item("fv") for r in recs])
    m = label_metrics([r.label for r in recs], [v.label for v in verdicts])
    assert m["macro_f1"] >= MACRO_F1_FLOOR, m
    assert min(m["predicted"].values()) > 0, m  # every label is used


MACRO_F1_FLOOR = 67.0  # measured 70.23 (in-sample: the shipped layer was fitted on all of testsmall)


def test_multi_sentence_turn_checked_claim_by_claim(settings, nli, encoder):
    """Segmentation on: one verdict per claim with its own id; the turn shows the worst label."""
    from workers.pipeline import Pipeline

    s = settings.updated(verify={"segment": True})
    pipe = Pipeline(s, nli, encoder, None, protocol="fv", surface="r0")
    turn = "Elvis Presley was born in Tupelo, Mississippi. Elvis Presley was born in London, England."
    item = CheckItem("q", "7", ["Who was Elvis?"], turn, ELVIS)
    (claims,) = pipe.check_segments([item])
    assert [v.claim for v in claims] == ["Elvis Presley was born in Tupelo, Mississippi.",
                                         "Elvis Presley was born in London, England."]
    assert [v.label for v in claims] == ["SUPPORTS", "REFUTES"]
    assert len({v.claim_id for v in claims}) == 2
    (summary,) = pipe.check_many([item])
    assert summary.label == "REFUTES" and summary.claim == turn
    # what the stream publishes for this turn: each claim's verdict, then the turn summary
    from schemas import claim_id
    from schemas.protocols import ClaimChecker

    assert isinstance(pipe, ClaimChecker)
    (published,) = pipe.check_turns([item])
    assert [v.claim_id for v in published[:2]] == [v.claim_id for v in claims]
    assert published[2].claim_id == claim_id("q", "7", turn) and published[2].label == "REFUTES"
    assert published[2].rationale["rule"] == "turn-summary"
    single = CheckItem("q", "8", ["Who was Elvis?"], "Elvis Presley was born in Tupelo, Mississippi.", ELVIS)
    assert len(pipe.check_turns([single])[0]) == 1  # a one-claim turn: one verdict, as before


def test_not_checkworthy_turn_skips_checking(settings, nli, encoder):
    from workers.pipeline import Pipeline

    pipe = Pipeline(settings.updated(verify={"checkworthy": True}), nli, encoder, None, protocol="fv", surface="r0")
    chat, fact = pipe.check_many([CheckItem("q", "1", [], "I love cheerleading!", ELVIS),
                                  CheckItem("q", "2", [], "Elvis Presley was born in Tupelo, Mississippi.", ELVIS)])
    assert chat.label == "NOT ENOUGH INFO" and chat.status.reason == "not check-worthy" and not chat.evidence
    assert "verify" not in chat.timings_ms
    assert fact.label == "SUPPORTS"
