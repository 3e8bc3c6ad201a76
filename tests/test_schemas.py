"""Event contracts: valid turns parse, every kind of bad input is rejected with a reason."""
import orjson
import pytest

from schemas import ChatTurn, InvalidEvent, Status, Surface, Verdict, claim_id, parse_turn, parse_verdict

pytestmark = pytest.mark.unit


def test_valid_turn_round_trip():
    t = ChatTurn("c1", "t1", "assistant", "Elvis was born in Tupelo.", check=True)
    assert parse_turn(t.to_json()) == t


@pytest.mark.parametrize("raw, reason", [
    (b"{not json", "malformed JSON"),
    (b'{"conversation_id": "c", "turn_id": "t", "speaker": "user"}', "text"),
    (b'{"conversation_id": 5, "turn_id": "t", "speaker": "user", "text": "hi"}', "conversation_id"),
    (b'{"conversation_id": "c", "turn_id": "t", "speaker": "user", "text": "   "}', "empty text"),
    (b'{"conversation_id": "c", "turn_id": "t", "speaker": "user", "text": "\xff\xfe"}', "UTF-8"),
    (b'{"conversation_id": "c", "turn_id": "t", "speaker": "user", "text": "hi", "extra": 1}', "extra"),
])
def test_bad_turns_are_rejected_with_reason(raw, reason):
    with pytest.raises(InvalidEvent) as e:
        parse_turn(raw)
    assert reason in e.value.reason


def test_oversized_text_rejected():
    raw = ChatTurn("c", "t", "user", "x" * 50).to_json()
    with pytest.raises(InvalidEvent, match="too long"):
        parse_turn(raw, max_text_chars=10)


def test_claim_id_is_stable_and_distinct():
    assert claim_id("c", "t", "x") == claim_id("c", "t", "x")
    assert claim_id("c", "t", "x") != claim_id("c", "t2", "x")


def test_verdict_serialises_and_validates():
    v = Verdict("c", "t", claim_id("c", "t", "x"), "x", Surface("r0", "x"), "SUPPORTS",
                {"SUPPORTS": 0.9, "REFUTES": 0.05, "NOT ENOUGH INFO": 0.05}, [], {"nli": "v"}, {"gate": 1.0},
                Status("ok"))
    back = parse_verdict(v.to_json())
    assert back.label == "SUPPORTS" and back.claim_id == v.claim_id
    bad = orjson.loads(v.to_json())
    bad["label"] = "MAYBE"
    with pytest.raises(InvalidEvent):
        parse_verdict(orjson.dumps(bad))
