"""Claim segmentation with the real spaCy parse: multi-sentence and coordinated turns split into
stand-alone claims with their own ids; one-claim turns stay whole (same id as before)."""
import pytest

from schemas import claim_id
from workers.segment import segment, turn_label

pytestmark = pytest.mark.model


def test_sentences_become_claims():
    turn = "Elvis was born in Tupelo. He moved to Memphis in 1948. Do you like his music?"
    segs = segment(turn)
    assert [s.text for s in segs] == ["Elvis was born in Tupelo.", "He moved to Memphis in 1948.",
                                      "Do you like his music?"]
    assert all(turn[s.start:s.end] == s.text for s in segs)
    ids = {s.claim_id("c1", "t1") for s in segs}
    assert len(ids) == 3
    assert segs[0].claim_id("c1", "t1") == segment(turn)[0].claim_id("c1", "t1")  # stable


def test_and_but_clauses_split_only_when_each_stands_alone():
    assert [s.text for s in segment("Paris is the capital of France and Berlin is the capital of Germany.")] == [
        "Paris is the capital of France", "Berlin is the capital of Germany."]
    assert [s.text for s in segment("Richard J. Daley was mayor of Chicago, but he was born in Bridgeport.")] == [
        "Richard J. Daley was mayor of Chicago", "he was born in Bridgeport."]
    assert len(segment("I like cats and dogs.")) == 1  # noun coordination
    assert len(segment("He went home and slept.")) == 1  # shared subject


def test_single_claim_turn_keeps_its_text_and_id():
    turn = "Harry Potter was first published in 1997."
    (seg,) = segment(turn)
    assert seg.text == turn and seg.claim_id("c", "t") == claim_id("c", "t", turn)


def test_turn_label_worst_wins():
    assert turn_label(["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"]) == "REFUTES"
    assert turn_label(["NOT ENOUGH INFO", "SUPPORTS"]) == "SUPPORTS"
    assert turn_label(["NOT ENOUGH INFO"]) == "NOT ENOUGH INFO"
    assert turn_label([]) == "NOT ENOUGH INFO"
