"""Language scope (workers/decision/scope.py, workers/stages.py LanguageStage): a reply the verifier
cannot read is NOT ENOUGH INFO with a status reason naming its language, never a badge; short chat
replies and English are left to the verifier."""
from __future__ import annotations

import orjson
import pytest

from schemas import validate
from schemas.items import CheckItem
from workers.decision.scope import foreign
from workers.stages import ClaimState, LanguageStage
from workers.verdict import VerdictContext, assemble

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("text,code", [
    ("Berlin ist die Hauptstadt von Deutschland.", "de"),
    ("Je pense que la tour Eiffel a été construite en 1889.", "fr"),
    ("El río Danubio desemboca en el Mar Negro.", "es"),
    ("Mi piace molto la pizza napoletana, è buonissima.", "it"),
    ("東京は日本の首都です", "ja"),
])
def test_a_reply_in_another_language_is_named(text, code):
    lang = foreign(text)
    assert lang is not None and lang.code == code and lang.confidence >= 0.95
    assert lang.name in lang.reason() and "English only" in lang.reason()


@pytest.mark.parametrize("text", ["ok", "lol", "Paris", "haha yes", "Danke schön!", "Que sera sera",
                                  "Berlin is the capital of Germany.", "Real Madrid won La Liga in 2012.",
                                  "Los Angeles is in California", "yeah i think so too haha", "1889!"])
def test_english_and_replies_too_short_to_call_are_left_to_the_verifier(text):
    assert foreign(text) is None


def test_the_verdict_is_not_enough_info_with_the_language_in_the_status_and_no_badge():
    states = [ClaimState(CheckItem("c1", "t1", [], text)) for text in
              ("Berlin ist die Hauptstadt von Deutschland.", "Berlin is the capital of Germany.")]
    LanguageStage().run(states)
    german, english = states
    assert german.skip_reason and german.notes["language"] == "de" and not english.skip_reason
    v = assemble(german, VerdictContext("fv", {}))
    assert v.label == "NOT ENOUGH INFO" and not v.display.show
    assert v.status.state == "ok" and "German (de" in v.status.reason and v.status.evidence == "none"
    assert v.rationale["rule"] == "out-of-scope" and v.rationale["language"] == "de"
    validate("verdict", orjson.loads(v.to_json()))


def test_a_reply_out_of_scope_reads_no_evidence_for_the_tuner_either():
    from workers.stages import claim_evidence

    st = ClaimState(CheckItem("c1", "t1", [], "Berlin ist die Hauptstadt von Deutschland."))
    LanguageStage().run([st])
    e = claim_evidence(st)  # the tuner's view of it: nothing read, so NOT ENOUGH INFO whatever the rule
    assert e.n == 0 and e.claim == st.item.claim
