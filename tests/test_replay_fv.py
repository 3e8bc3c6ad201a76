"""`dialcheck replay --protocol fv`: each record's response turn carries its evidence, as a producer
would send it, and comes back from the wire as the same passages; `lab/evaluation/replay_parity.py`
tells a stream verdict that differs from eval's, or quotes a passage its turn was not given.

Why: the grounded-turn equality check (and tests/test_stream_kafka.py's replay of it
through a real worker) is only as good as these two pieces: a turn that lost its evidence on the way
would be checked against the index, and a comparison that could not see a difference proves nothing."""
from __future__ import annotations

import pytest

from lab.evaluation.replay_parity import own_evidence, parity
from schemas.items import DialFactRecord, response_claim_id
from schemas.turn import parse_turn
from streams.replay import record_turns

pytestmark = pytest.mark.unit

REC = DialFactRecord(id="r1", context_id="c1", context=["Where was Elvis born?"], response="In Tupelo.",
                     label="SUPPORTS", type_label="factual",
                     evidence=[("Elvis Presley", "Elvis Presley was born in Tupelo, Mississippi."), ("", "He sang."),
                               ("Blank", "  ")])  # DialFact has a few blank passages: a turn cannot carry one


def test_fv_puts_the_records_evidence_on_the_response_turn_only_and_it_survives_the_wire():
    *context, response = record_turns(REC, protocol="fv")
    assert all(t.evidence is None and not t.check for t in context)
    back = parse_turn(response.to_json())
    assert [(p.title, p.text, p.source) for p in back.evidence] == [
        ("Elvis Presley", "Elvis Presley was born in Tupelo, Mississippi.", "turn"), (None, "He sang.", "turn")]
    assert back.evidence_note is None and back.check and back.text == REC.response
    assert record_turns(REC)[-1].evidence is None  # e2e: the worker retrieves
    with pytest.raises(ValueError, match="unknown replay protocol"):
        record_turns(REC, protocol="ir")


def _verdict(label: str, show: bool, evidence: list[dict]) -> dict:
    return {"claim_id": response_claim_id(REC), "label": label, "display": {"show": show}, "evidence": evidence}


def test_parity_counts_agreement_and_sees_each_kind_of_difference():
    mine = [{"source": "turn", "text": "Elvis Presley was born in Tupelo, Mississippi."}]
    ref = _verdict("SUPPORTS", True, mine)
    same = parity({ref["claim_id"]: ref}, [ref], [REC])
    assert same["same_label_and_shown_pct"] == 100.0 and same["own_evidence_pct"] == 100.0
    for live in (_verdict("NOT ENOUGH INFO", True, mine), _verdict("SUPPORTS", False, mine)):
        got = parity({ref["claim_id"]: live}, [ref], [REC])
        assert got["same_label_and_shown_pct"] == 0.0 and got["differences"] == 1
    assert parity({}, [ref], [REC])["first_differences"] == [{"record": "r1", "missing": "stream"}]
    assert not own_evidence(_verdict("SUPPORTS", True, [{"source": "index", "text": "Elvis Presley"}]), REC)
    assert not own_evidence(_verdict("SUPPORTS", True, [{"source": "turn", "text": "another record's passage"}]), REC)
