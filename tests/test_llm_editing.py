"""Evidence-guided editing (SuCEA) after the first retrieval, through the local protocol stand-in
(tests/llm_standin.py, a server, not a model), on a real embedded index of the DialFact evidence
passages (180 passages, real E5 vectors) with the real NLI model: each sub-claim is edited with its
top evidence into a query, retrieved again and pooled with the first retrieval; a failed or
refused edit leaves the first retrieval, with the outage in the verdict's status. One test edits
with the real small model (tests/llm_real.py, SmolLM2-135M-Instruct) instead of the stand-in."""
from __future__ import annotations

from pathlib import Path

import pytest

from schemas import validate
from schemas.items import CheckItem
from schemas.protocols import SearchUnavailable
from tests.llm_standin import LLMStandIn
from workers.pipeline import Pipeline
from schemas.protocols import turn_verdicts

pytestmark = pytest.mark.model

CONTEXT = ["Have you ever listened to Nickelback?"]
TWO_CLAIMS = "They are from Canada. Their 2001 album sold really well."
REFUSED = "They sold a lot of records."  # fixture: an edit naming Germany and 1999 (in no source)
SILVER_SIDE_UP = "66e0188905b303f7"  # best passage for the edited query "Nickelback's 2001 album Silver Side Up ..."


@pytest.fixture(scope="module")
def index(settings, encoder):
    from workers.retrieval.bm25 import EmbeddedIndex
    from workers.retrieval.build import encode_passages
    from workers.retrieval.collection import dialfact_passages

    passages = list({p.id: p for p in dialfact_passages(Path(settings.data.dir))}.values())
    return EmbeddedIndex.build(passages, vectors=encode_passages(encoder, passages, progress=False))


@pytest.fixture(scope="module")
def standin():
    with LLMStandIn() as s:
        yield s


def pipe(settings, nli, encoder, searcher, **llm):
    return Pipeline(settings.updated(llm=llm), nli, encoder, searcher, "e2e", "r0")


def run(p, claim):
    return p.check_turns([CheckItem("conv", "1", list(CONTEXT), claim)])[0].states[0]


def test_each_sub_claim_is_edited_with_its_top_evidence_and_retrieved_again(settings, nli, encoder, index, standin):
    first = run(pipe(settings, nli, encoder, index), TWO_CLAIMS)
    standin.requests.clear()
    p = pipe(settings, nli, encoder, index, url=standin.url, edit=True)
    st = run(p, TWO_CLAIMS)
    prompts = [r["body"]["messages"][-1]["content"] for r in standin.requests if "body" in r]
    windows = {p.id: p.text for p in first.retrieval.dense}
    edits = st.notes["edits"]
    assert [e["sub_claim"] for e in edits] == ["They are from Canada.", "Their 2001 album sold really well."]
    assert [e["query"] for e in edits] == ["Nickelback is from Canada.",
                                          "Nickelback's 2001 album Silver Side Up sold really well."]
    for e in edits:  # each edit read its top evidence from the first retrieval (the two requests run concurrently:
        # matched by their sub-claim, not by arrival order)
        assert e["outcome"] == "used" and e["evidence_passage_id"] in windows
        prompt = [q for q in prompts if f"Claim: {e['sub_claim']}\nEvidence: " in q]
        assert len(prompt) == 1 and windows[e["evidence_passage_id"]][:40] in prompt[0]
    # the second retrieval's best passage for the edited query now reaches the verifier; before it did not
    assert SILVER_SIDE_UP not in [x.id for x in first.passages]
    assert SILVER_SIDE_UP in [x.id for x in st.passages]
    # SuCEA pooling (editing.merge): top k of both retrievals at each passage's best cosine, so a passage of the
    # first retrieval leaves only for better-scoring ones (how many enter depends on the encoder)
    kept = {x.id for x in st.retrieval.dense}
    floor = min(x.score for x in st.retrieval.dense)
    assert all(x.score <= floor + 1e-6 for x in first.retrieval.dense if x.id not in kept)
    v = turn_verdicts(p.check_turns([CheckItem("conv", "1", list(CONTEXT), TWO_CLAIMS)]))[0]
    assert v.rationale["edits"] == edits and v.timings_ms.get("edit") is not None
    validate("verdict", v.to_dict())


def _same_passages(a, b):
    return [x.id for x in a.passages] == [x.id for x in b.passages]


def test_a_refused_edit_keeps_the_first_retrieval(settings, nli, encoder, index, standin):
    first = run(pipe(settings, nli, encoder, index), REFUSED)
    st = run(pipe(settings, nli, encoder, index, url=standin.url, edit=True), REFUSED)
    (edit,) = st.notes["edits"]
    assert edit["outcome"] == "refused" and "Germany" in edit["reason"] and edit["query"] is None
    assert _same_passages(first, st) and not st.problems


def test_llm_down_keeps_the_first_retrieval_with_a_degraded_status(settings, nli, encoder, index, standin):
    first = run(pipe(settings, nli, encoder, index), TWO_CLAIMS)
    standin.mode = "error"
    try:
        p = pipe(settings, nli, encoder, index, url=standin.url, edit=True, retries=0, model="dialcheck-standin-rewriter")
        st = run(p, TWO_CLAIMS)
        v = turn_verdicts(p.check_turns([CheckItem("conv", "1", list(CONTEXT), TWO_CLAIMS)]))[0]
    finally:
        standin.mode = "ok"
    assert _same_passages(first, st) and all(e["outcome"] == "llm-unavailable" for e in st.notes["edits"])
    assert v.status.state == "degraded" and "evidence-guided editing unavailable" in v.status.reason
    assert "HTTP 503" in v.status.reason and v.label in ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")


class _SecondSearchFails:
    """The real index, except that the second retrieval (after editing) declares an outage."""

    def __init__(self, index):
        self.index, self.calls, self.name = index, 0, "flaky"

    def search_many(self, queries, k):
        self.calls += 1
        if self.calls > 1:
            raise SearchUnavailable("search backend went away")
        return self.index.search_many(queries, k)

    def vectors(self, ids):
        return self.index.vectors(ids)

    def dense_search(self, qv, k):
        return self.index.dense_search(qv, k)


def test_search_outage_on_the_second_retrieval_keeps_the_first(settings, nli, encoder, index, standin):
    first = run(pipe(settings, nli, encoder, index), TWO_CLAIMS)
    st = run(pipe(settings, nli, encoder, _SecondSearchFails(index), url=standin.url, edit=True), TWO_CLAIMS)
    assert _same_passages(first, st)
    assert st.problems == [("degraded", "second retrieval after editing unavailable, first retrieval kept: "
                                        "search backend went away")]


def test_editing_on_the_real_model_uses_a_checked_query_or_keeps_the_first_retrieval(settings, nli, encoder, index):
    """SmolLM2-135M-Instruct edits each sub-claim: a query that passed the checks is retrieved again and
    pooled; any other reply (an echo of the evidence, an explanation, a name from nowhere) is refused, says
    what it was, and leaves that sub-claim's first retrieval. Either way the status stays ok."""
    from tests.llm_real import real_llm
    from workers.llm.replies import KINDS

    llm = real_llm()
    first = run(pipe(settings, nli, encoder, index), TWO_CLAIMS)
    before = llm.served
    st = run(pipe(settings, nli, encoder, index, url=llm.url, edit=True, timeout_s=300, retries=0, batch_timeout_s=900),
             TWO_CLAIMS)
    edits = st.notes["edits"]
    assert len(edits) == 2 and llm.served - before == 2 and not st.problems
    for e in edits:
        assert e["reply"] in KINDS and e["outcome"] in ("used", "refused")
        assert (e["outcome"] == "used") == (e["reply"] == "ok") and (e["query"] is None) == (e["outcome"] == "refused")
    if any(e["outcome"] == "used" for e in edits):
        assert st.notes["edit_retrieval"]["pooled_from"] == 1 + sum(e["outcome"] == "used" for e in edits)
        kept = {x.id for x in st.retrieval.dense}
        floor = min(x.score for x in st.retrieval.dense)
        assert all(x.score <= floor + 1e-6 for x in first.retrieval.dense if x.id not in kept)
    else:
        assert _same_passages(first, st) and "edit_retrieval" not in st.notes
