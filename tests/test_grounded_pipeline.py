"""Grounded turns through the default checker (workers/pipeline.py), real models: an item that carries
the passages its assistant was given is checked against them exactly as `check --protocol fv` checks;
the verdict says where each passage came from and where each claim stands in the turn; a claim the
passages do not decide is NOT ENOUGH INFO saying so (or, with the fallback, checked by the index); a
grounded-only worker loads no index and says why an ungrounded turn got NOT ENOUGH INFO."""
from __future__ import annotations

import pytest

from schemas import parse_verdict
from schemas.evidence import parse_evidence
from schemas.items import CheckItem, GivenPassage
from schemas.protocols import Passage
from workers.pipeline import UNGROUNDED, Pipeline

pytestmark = pytest.mark.model

ELVIS = "Elvis Presley was born on January 8, 1935, in Tupelo, Mississippi. He moved to Memphis in 1948."
ASK = ["When was Elvis born?"]


def given(*raw) -> list[GivenPassage]:
    """Passages as a producer sends them, through the one evidence parser."""
    passages, note = parse_evidence(list(raw))
    assert note is None
    return passages


def item(claim: str, evidence, turn: str = "t1", context=ASK) -> CheckItem:
    return CheckItem("grounded-test", turn, list(context), claim, evidence)


def comparable(v) -> dict:
    """A verdict without what differs between two runs of the same check (time)."""
    d = v.to_dict()
    d.pop("timings_ms"), d.pop("created_at")
    return d


@pytest.fixture(scope="module")
def grounded_only(settings, tmp_path_factory):
    """What `dialcheck worker` loads with DIALCHECK_GROUNDED_ONLY=1, pointed at an index that is not there."""
    missing = tmp_path_factory.mktemp("no-index") / "index"
    return Pipeline.from_settings(settings.updated(grounding={"only": True}, retrieval={"index_dir": str(missing)}))


@pytest.fixture(scope="module")
def segmenting(settings, nli, encoder):
    return Pipeline(settings.updated(claims={"segment": True}), nli, encoder, None, "e2e")


def test_a_grounded_only_worker_loads_no_index_and_says_why_an_ungrounded_turn_is_nei(grounded_only):
    assert grounded_only.searcher is None
    (v,) = grounded_only.check_turns([item("Paris is the capital of France.", None)])[0].verdicts
    assert v.label == "NOT ENOUGH INFO" and v.evidence == []
    assert v.status.reason == UNGROUNDED


def test_a_wrong_year_against_string_evidence_is_refuted(grounded_only):
    (v,) = grounded_only.check_turns([item("Elvis was born in 1942.", given(ELVIS))])[0].verdicts
    assert v.label == "REFUTES"
    assert v.evidence and {e.source for e in v.evidence} == {"turn"}
    assert v.model_versions["protocol"] == "fv"  # checked by the fv chain: its decision and display files


def test_an_evidence_object_keeps_its_id_title_and_url_on_the_verdict(grounded_only):
    passage = {"text": ELVIS, "title": "Elvis Presley", "url": "https://help.example.com/elvis", "id": "kb-17"}
    (v,) = grounded_only.check_turns([item("Elvis was born in 1935.", given(passage))])[0].verdicts
    assert v.label == "SUPPORTS"
    e = v.evidence[0]
    assert (e.passage_id, e.title, e.url, e.source) == ("kb-17", "Elvis Presley", "https://help.example.com/elvis", "turn")
    assert parse_verdict(v.to_json()).evidence[0].source == "turn"  # valid against verdict.schema.json 2.4


def test_the_mixed_checker_gives_a_grounded_item_the_fv_pipelines_verdict(grounded_only, settings, nli, encoder):
    fv = Pipeline(settings, nli, encoder, None, "fv")
    items = [item("Elvis was born in 1942.", given(ELVIS), "a"),
             item("He moved to Memphis.", given({"text": ELVIS, "url": "https://x.example/e"}), "b"),
             item("Elvis had a twin brother.", given(ELVIS), "c")]
    mixed = [comparable(v) for t in grounded_only.check_turns(items) for v in t.verdicts]
    assert mixed == [comparable(v) for t in fv.check_turns(items) for v in t.verdicts]
    assert [m["label"] for m in mixed] != ["NOT ENOUGH INFO"] * 3  # the comparison compared decisions


def test_a_claim_the_passages_do_not_decide_is_nei_saying_so(grounded_only):
    (v,) = grounded_only.check_turns([item("Elvis won three Grammy awards.", given(ELVIS, "Graceland is in Memphis."))])[0].verdicts
    assert v.label == "NOT ENOUGH INFO"
    assert v.status.reason == "not decided by the 2 given passages"


def test_what_the_limits_left_unread_is_on_the_status(grounded_only):
    grounded = item("Elvis was born in 1935.", given(ELVIS))
    grounded.evidence_note = "evidence cut: read 1 of 3000 passages, 97 of 300000 characters"
    (v,) = grounded_only.check_turns([grounded])[0].verdicts
    assert grounded.evidence_note in v.status.reason
    assert v.rationale["summary"].endswith("Evidence cut: read 1 of 3000 passages, 97 of 300000 characters.")


def test_each_claim_of_a_reply_gets_its_span_and_the_unbacked_one_is_not_supported(segmenting):
    reply = "  Elvis was born in Tupelo in 1935. He won three Grammy awards for his gospel music."
    first, second, turn = segmenting.check_turns([item(reply, given(ELVIS), context=["Tell me about Elvis."])])[0].verdicts
    assert reply[first.claim_span.start:first.claim_span.end] == "Elvis was born in Tupelo in 1935."
    assert reply[second.claim_span.start:second.claim_span.end] == "He won three Grammy awards for his gospel music."
    assert first.label == "SUPPORTS"
    assert second.label != "SUPPORTS" and second.claim == "He won three Grammy awards for his gospel music."
    assert (turn.claim_span.start, turn.claim_span.end) == (0, len(reply))
    assert turn.label != "SUPPORTS"  # attribution: the turn is supported only when every claim is
    assert "REFUTES > NOT ENOUGH INFO > SUPPORTS" in turn.rationale["summary"]


def test_an_undecided_grounded_claim_falls_back_to_the_index_when_asked(settings, nli, encoder):
    from workers.retrieval.bm25 import EmbeddedIndex
    from workers.retrieval.build import encode_passages

    passages = [Passage("grammy", "Elvis Presley", "Elvis Presley won three competitive Grammy awards, all for his "
                        "gospel recordings."),
                Passage("tupelo", "Tupelo, Mississippi", "Tupelo is a city in Lee County, Mississippi.")]
    index = EmbeddedIndex.build(passages, vectors=encode_passages(encoder, passages, progress=False))
    pipe = Pipeline(settings.updated(grounding={"fallback": True}), nli, encoder, index, "e2e")
    claim = "Elvis won three Grammy awards for his gospel music."
    (v,) = pipe.check_turns([item(claim, given("Graceland is a mansion in Memphis, Tennessee."))])[0].verdicts
    assert v.status.reason.startswith("not decided by the 1 given passage: checked against the index instead")
    assert v.evidence and {e.source for e in v.evidence} == {"index"}
    assert v.model_versions["protocol"] == "e2e"


def test_a_reload_rereads_the_grounded_chain_too(settings, nli, encoder):
    pipe = Pipeline(settings, nli, encoder, None, "e2e")
    before = pipe._chains
    pipe.reload()
    assert pipe._chains.main is not before.main and pipe._chains.grounded is not before.grounded
    assert pipe._chains.grounded.context.protocol == "fv"
    (v,) = pipe.check_turns([item("Elvis was born in 1942.", given(ELVIS))])[0].verdicts
    assert v.label == "REFUTES"


def test_the_python_api_takes_evidence_objects_without_protocol_fv(grounded_only, settings):
    from dialcheck import Checker

    checker = Checker(grounded_only, settings, "e2e")  # what Checker.load() builds, around this test's pipeline
    v = checker.check("Elvis was born in 1942.", context=ASK,
                      evidence=[{"text": ELVIS, "title": "Elvis Presley", "url": "https://help.example.com/elvis"}])
    assert v.label == "REFUTES"
    assert (v.evidence[0].url, v.evidence[0].source) == ("https://help.example.com/elvis", "turn")
    assert (v.claim_span.start, v.claim_span.end) == (0, len("Elvis was born in 1942."))


def test_a_grounded_reply_too_long_to_read_whole_is_checked_claim_by_claim(grounded_only):
    from workers.windows import MAX_WINDOW_WORDS

    reply = " ".join(["Elvis was born in Tupelo in 1935."] * 18 + ["He moved to Memphis in 1948."])
    assert not grounded_only.settings.claims.segment and len(reply.split()) > MAX_WINDOW_WORDS
    turn = grounded_only.check_turns([item(reply, given(ELVIS), context=["Tell me about Elvis."])])[0]
    *claims, summary = turn.verdicts
    assert len(claims) == grounded_only.settings.claims.max_claims_per_turn  # the cap, said on the summary
    assert all(reply[v.claim_span.start:v.claim_span.end] == v.claim for v in claims)
    assert "were not checked" in summary.status.reason and (summary.claim_span.start, summary.claim_span.end) == (0, len(reply))
