"""The product path with the shipped defaults (E2E: default index, NLI model and decision), and the
verifier's hardest habit: calling evidence that is merely silent a contradiction.

A wrong REFUTES badge on a true chat message is the worst thing dialcheck can do, so the checks
here are mostly "never REFUTES", plus obvious items per label so that an always-NOT-ENOUGH-INFO
decision fails too."""
from __future__ import annotations

import pytest

from schemas.items import CheckItem
from schemas.protocols import turn_verdicts

pytestmark = pytest.mark.model

ELVIS_CHAT = ["Do you like Elvis Presley?", "I do! Elvis Presley was the King of Rock and Roll."]
EIFFEL_CHAT = ["Have you ever been to the Eiffel Tower?", "Yes, the Eiffel Tower in Paris is stunning."]


@pytest.fixture(scope="module")
def e2e(settings, nli, encoder, index_dir):
    from workers.pipeline import Pipeline
    from workers.retrieval.factory import load_searcher

    s = settings.updated(retrieval={"index_dir": str(index_dir)})
    return Pipeline(s, nli, encoder, load_searcher(s, encoder), protocol="e2e", surface="r4g")


# two examples a first user tried: the Eiffel Tower's article is not in the default index
# (a Disneyland Paris passage came back as REFUTES at 0.63), and Elvis's birthplace is not either
NEVER_REFUTES = [("eiffel-1889", EIFFEL_CHAT, "It was built in 1889 for the World's Fair."),
                 ("elvis-tupelo", ELVIS_CHAT, "He was born in Tupelo, Mississippi.")]


@pytest.mark.parametrize("name,context,claim", NEVER_REFUTES, ids=[n for n, *_ in NEVER_REFUTES])
def test_true_claims_without_their_article_are_never_refuted(e2e, name, context, claim):
    v = turn_verdicts(e2e.check_turns([CheckItem("c", name, context, claim)]))[0]
    assert v.label != "REFUTES", (v.label, v.rationale["summary"])
    assert v.status.state == "ok" and v.status.evidence in ("strong", "weak", "none")


# the index holds DialFact's Elvis passage: "His music career began there in 1954, recording at Sun
# Records with producer Sam Phillips ..."
E2E_OBVIOUS = [("SUPPORTS", "His music career began in 1954, recording at Sun Records."),
               ("REFUTES", "His music career began in 1964, recording at Motown Records.")]


@pytest.mark.parametrize("label,claim", E2E_OBVIOUS, ids=[lab for lab, _ in E2E_OBVIOUS])
def test_e2e_obvious_items(e2e, label, claim):
    v = turn_verdicts(e2e.check_turns([CheckItem("c", "elvis-career", ELVIS_CHAT, claim)]))[0]
    assert v.label == label, (v.label, v.rationale["summary"])
    assert v.status.evidence == "strong" and v.evidence and "Sun Records" in v.evidence[0].text


ELVIS_CAREER = [("Elvis Presley", "His music career began there in 1954, recording at Sun Records with producer Sam "
                                  "Phillips, who wanted to bring the sound of African American music to a wider audience.")]


@pytest.fixture(scope="module")
def fv(settings, nli, encoder):
    from workers.pipeline import Pipeline

    return Pipeline(settings, nli, encoder, None, protocol="fv", surface="r0")


# evidence about the claim's subject that says nothing about what the claim states: one claim per
# gold label it would have with the right evidence; each must be NOT ENOUGH INFO here
SILENT = [("true", "Elvis Presley was born in Tupelo, Mississippi."),
          ("false", "Elvis Presley was born in London, England."),
          ("unverifiable", "Elvis Presley owned a pink Cadillac.")]


@pytest.mark.parametrize("kind,claim", SILENT, ids=[k for k, _ in SILENT])
def test_silent_evidence_is_not_enough_info(fv, kind, claim):
    v = turn_verdicts(fv.check_turns([CheckItem("s", kind, ["Tell me about Elvis."], claim, ELVIS_CAREER)]))[0]
    assert v.label == "NOT ENOUGH INFO", (v.label, v.rationale["summary"])
    assert v.status.evidence in ("strong", "weak")
