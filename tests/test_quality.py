"""Labels that are wrong fail here: obvious FV items per label through the real pipeline with the
shipped defaults (NLI model v3 + the guarded decision), evidence that is merely silent (never
REFUTES), and a macro-F1 floor on a fixed slice of DialFact testsmall. testsmall is one of the five
sets the guarded rule's two thresholds were fitted on, so the slice score guards against
regressions; it is not a quality claim (the README has the leave-one-dataset-out numbers)."""
from __future__ import annotations

import pytest

from schemas.items import CheckItem
from schemas.protocols import turn_verdicts
from workers.pipeline import undecided

pytestmark = pytest.mark.model

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
    ("NOT ENOUGH INFO", "That's cool, I didn't know that.", ELVIS),
    ("NOT ENOUGH INFO", "My grandmother saw Elvis Presley in concert once.", ELVIS),
]
# Evidence that is silent about the claim (once known failures, answered since NLI v3 and the
# guarded rule: these were strict xfails before)
SILENT = [
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
    v = turn_verdicts(fv_pipeline.check_turns([CheckItem("q", "1", ["Tell me something."], claim, evidence)]))[0]
    assert v.label == label, (v.label, v.probabilities)
    assert v.status.state == "ok", v.status  # an outage's NOT ENOUGH INFO is degraded or error, not a pass


def read_and_decided(v, given: int) -> None:
    """An outage also publishes NOT ENOUGH INFO (nothing read): a NOT ENOUGH INFO passes only when the
    check was whole (status ok) and the evidence was read and scored. Its reason is attribution's, the
    `given` passages did not decide the claim (workers/pipeline.py `undecided`), and nothing else."""
    assert v.status.state == "ok", v.status
    assert v.status.reason == (undecided(given) if v.label == "NOT ENOUGH INFO" else None), v.status
    assert v.status.evidence in ("strong", "weak") and v.evidence, (v.status, v.evidence)
    assert all(abs(e.entail + e.neutral + e.contradict - 1) < 1e-3 for e in v.evidence), v.evidence  # NLI-scored


@pytest.mark.parametrize("label,claim,evidence", SILENT, ids=[f"{o[0]}:{o[1][:30]}" for o in SILENT])
def test_silent_evidence_items(fv_pipeline, label, claim, evidence):
    v = turn_verdicts(fv_pipeline.check_turns([CheckItem("q", "1", ["Tell me something."], claim, evidence)]))[0]
    assert v.label == label, (v.label, v.probabilities)
    read_and_decided(v, len(evidence))


# Known miss: NLI v3 trades REFUTES recall for precision (held-out fact-checking pairs:
# recall 0.69 → 0.50, precision 0.68 → 0.76); this false claim's contradiction (0.54) stays under the
# fitted t_refutes (0.56), so it is NOT ENOUGH INFO. Never SUPPORTS; strict: it fails the day it is REFUTES.
WOOD_AND_BERLIN = "The Eiffel Tower is made of wood and stands in Berlin."


def test_false_claim_is_never_supported(fv_pipeline):
    """REFUTES is right; NOT ENOUGH INFO is the known miss below, and only from evidence read on the
    claim's subject (the Eiffel Tower's own passage), never from an outage."""
    v = turn_verdicts(fv_pipeline.check_turns([CheckItem("q", "1", ["Tell me something."], WOOD_AND_BERLIN, EIFFEL)]))[0]
    assert v.label in ("REFUTES", "NOT ENOUGH INFO"), (v.label, v.probabilities)
    read_and_decided(v, len(EIFFEL))
    assert v.status.evidence == "strong", v.status
    assert v.probabilities["REFUTES"] > v.probabilities["SUPPORTS"], v.probabilities


@pytest.mark.xfail(strict=True, reason="v3 + guarded rule: contradiction 0.54 < t_refutes 0.56")
def test_known_miss_wood_and_berlin(fv_pipeline):
    v = turn_verdicts(fv_pipeline.check_turns([CheckItem("q", "1", ["Tell me something."], WOOD_AND_BERLIN, EIFFEL)]))[0]
    assert v.label == "REFUTES", (v.label, v.probabilities)


def test_macro_f1_floor_on_fixed_slice(fv_pipeline, dialfact_records):
    from lab.evaluation.scoring import label_metrics

    recs = dialfact_records[:SLICE]
    verdicts = turn_verdicts(fv_pipeline.check_turns([r.to_check_item("fv") for r in recs]))
    m = label_metrics([r.label for r in recs], [v.label for v in verdicts])
    assert m["macro_f1"] >= MACRO_F1_FLOOR, m
    assert min(m["predicted"].values()) > 0, m  # every label is used


MACRO_F1_FLOOR = 45.0  # measured 47.53 with NLI v3 + guarded (was 70.23 in-sample with the old layer fitted on testsmall)


def test_multi_sentence_turn_checked_claim_by_claim(settings, nli, encoder):
    """Segmentation on: one verdict per claim with its own id; the turn shows the worst label."""
    from workers.pipeline import Pipeline

    s = settings.updated(claims={"segment": True})
    pipe = Pipeline(s, nli, encoder, None, protocol="fv", surface="r0")
    turn = "Elvis Presley was born in Tupelo, Mississippi. Elvis Presley was born in London, England."
    item = CheckItem("q", "7", ["Who was Elvis?"], turn, ELVIS)
    (turn_result,) = pipe.check_turns([item])
    claims = turn_result.verdicts[:-1]
    assert [v.claim for v in claims] == ["Elvis Presley was born in Tupelo, Mississippi.",
                                         "Elvis Presley was born in London, England."]
    assert [v.label for v in claims] == ["SUPPORTS", "REFUTES"]
    assert len({v.claim_id for v in claims}) == 2
    (summary,) = turn_verdicts(pipe.check_turns([item]))
    assert summary.label == "REFUTES" and summary.claim == turn
    # what the stream publishes for this turn: each claim's verdict, then the turn summary
    from schemas import claim_id
    from schemas.protocols import Checker

    assert isinstance(pipe, Checker)
    published = turn_result.verdicts
    assert [v.claim_id for v in published[:2]] == [v.claim_id for v in claims]
    assert published[2].claim_id == claim_id("q", "7", turn) and published[2].label == "REFUTES"
    assert published[2].rationale["rule"] == "turn-summary"
    single = CheckItem("q", "8", ["Who was Elvis?"], "Elvis Presley was born in Tupelo, Mississippi.", ELVIS)
    assert len(pipe.check_turns([single])[0].verdicts) == 1  # a one-claim turn: one verdict, as before


def test_not_checkworthy_turn_skips_checking(settings, nli, encoder):
    from workers.pipeline import Pipeline

    pipe = Pipeline(settings.updated(claims={"checkworthy": True}), nli, encoder, None, protocol="fv", surface="r0")
    chat, fact = turn_verdicts(pipe.check_turns([CheckItem("q", "1", [], "I love cheerleading!", ELVIS),
                                  CheckItem("q", "2", [], "Elvis Presley was born in Tupelo, Mississippi.", ELVIS)]))
    assert chat.label == "NOT ENOUGH INFO" and chat.status.reason is None and not chat.evidence
    assert chat.rationale["rule"] == "not-check-worthy" and "not check-worthy" in chat.rationale["summary"]
    assert "verify" not in chat.timings_ms
    assert fact.label == "SUPPORTS"
