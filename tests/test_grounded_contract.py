"""Grounded turns' contract: a turn's `evidence` (schemas/evidence.py, chat_turn.schema.json 1.1) is
parsed the same everywhere; every wrong shape is refused with a short reason naming the passage, and
what the limits leave unread is said, never dropped silently."""
import orjson
import pytest

from schemas import ChatTurn, InvalidEvent, parse_turn
from schemas.errors import Reason
from schemas.evidence import EvidenceLimits, parse_evidence
from schemas.items import GivenPassage

pytestmark = pytest.mark.unit


def _turn(evidence) -> bytes:
    return orjson.dumps({"conversation_id": "c", "turn_id": "t", "speaker": "assistant",
                         "text": "Elvis was born in 1935.", "evidence": evidence})


def test_strings_and_objects_parse_and_round_trip():
    raw = _turn(["Elvis Presley was born in 1935.",
                 {"text": "Graceland is in Memphis.", "title": "Graceland", "url": "https://example.com/g", "id": "kb-7"}])
    turn = parse_turn(raw)
    assert turn.evidence == (GivenPassage("Elvis Presley was born in 1935."),
                             GivenPassage("Graceland is in Memphis.", "Graceland", "https://example.com/g", "kb-7"))
    assert turn.evidence_note is None
    assert parse_turn(turn.to_json()) == turn


def test_a_turn_without_evidence_is_unchanged_on_the_wire():
    turn = ChatTurn("c", "t", "assistant", "Elvis was born in Tupelo.")
    assert b"evidence" not in turn.to_json()
    assert parse_turn(turn.to_json()).evidence is None


def test_passage_text_is_cleaned_as_a_turns_text():
    turn = parse_turn(_turn(["Elvis\u200b was born in １９３５."]))
    assert turn.evidence[0].text == "Elvis was born in 1935."


@pytest.mark.parametrize("evidence, code, words", [
    ("Elvis was born in 1935.", Reason.SCHEMA, "must be a list of passages, each a string or an object"),
    ({"text": "x"}, Reason.SCHEMA, "not dict"),
    ([42], Reason.SCHEMA, "evidence[0]: int is not a passage"),
    (["ok", 4.5], Reason.SCHEMA, "evidence[1]: float is not a passage"),
    ([["nested", "list"]], Reason.SCHEMA, "evidence[0]: a list is not a passage"),
    ([None], Reason.SCHEMA, "evidence[0]: null is not a passage"),
    ([{"title": "no text"}], Reason.SCHEMA, "needs \"text\""),
    ([{"text": 7}], Reason.SCHEMA, "needs \"text\""),
    ([{"text": "x", "source": "index"}], Reason.SCHEMA, "unknown key 'source'"),
    ([{"text": "x", "url": 5}], Reason.SCHEMA, "url must be a string"),
    ([""], Reason.EMPTY_TEXT, "evidence[0]: empty text"),
    (["ok", "\u200b\u2060 \x07"], Reason.EMPTY_TEXT, "evidence[1]: empty text"),
    ([{"text": "x", "id": "a\u200bb"}], Reason.INVALID_FIELD, "id is blank or holds"),
    ([{"text": "x", "url": "https://a.b/c d"}], Reason.INVALID_FIELD, "url is blank or holds"),
    ([{"text": "x", "id": "p" * 300}], Reason.TOO_LARGE, "id too long"),
])
def test_every_wrong_shape_is_refused_with_a_short_reason(evidence, code, words):
    with pytest.raises(InvalidEvent) as e:
        parse_turn(_turn(evidence))
    assert e.value.code == code
    assert words in e.value.reason
    assert len(e.value.reason) < 200


def test_a_wrong_shape_beyond_the_limit_is_still_refused():
    with pytest.raises(InvalidEvent, match=r"evidence\[40\]"):
        parse_evidence(["fine"] * 40 + [{"no": "text"}], EvidenceLimits(max_passages=32))


def test_duplicate_keys_in_a_passage_are_refused():
    raw = (b'{"conversation_id": "c", "turn_id": "t", "speaker": "assistant", "text": "hi",'
           b' "evidence": [{"text": "a", "text": "b"}]}')
    with pytest.raises(InvalidEvent, match="duplicate JSON key 'text'"):
        parse_turn(raw)


def test_a_reason_never_quotes_passage_text():
    with pytest.raises(InvalidEvent) as e:
        parse_turn(_turn([{"text": "my secret passage", "colour": "x"}]))
    assert "secret" not in e.value.reason


def test_passages_beyond_the_limit_are_not_read_and_the_note_says_so():
    passages, note = parse_evidence([f"Passage {i}." for i in range(3000)], EvidenceLimits(max_passages=32))
    assert len(passages) == 32
    assert note.startswith("evidence cut: read 32 of 3000 passages")


def test_a_long_passage_is_read_to_its_limit_and_the_note_says_how_much():
    passages, note = parse_evidence(["a" * 50_000, "Short one."],
                                    EvidenceLimits(max_passages=32, max_passage_chars=20_000, max_chars=100_000))
    assert [len(p.text) for p in passages] == [20_000, 10]
    assert "20010 of 50010 characters" in note


def test_all_passages_share_one_character_budget():
    passages, note = parse_evidence(["b" * 900, "c" * 900, "d" * 900],
                                    EvidenceLimits(max_passages=32, max_passage_chars=1000, max_chars=1500))
    assert [len(p.text) for p in passages] == [900, 600]
    assert "read 2 of 3 passages, 1500 of 2700 characters" in note


def test_the_event_byte_limit_still_refuses_a_giant_record():
    with pytest.raises(InvalidEvent) as e:
        parse_turn(_turn(["x" * 2_000_000]), max_bytes=1_000_000)
    assert e.value.code == Reason.TOO_LARGE


def test_an_empty_list_is_a_turn_grounded_on_nothing():
    assert parse_turn(_turn([])).evidence == ()


def test_a_long_unpunctuated_passage_is_read_in_windows_to_its_end():
    """With windows.max_window_words (off by default: docs/results.md) a long sentence is read in pieces."""
    from workers.windows import MAX_WINDOW_WORDS, windows

    words = [f"w{i}" for i in range(5 * MAX_WINDOW_WORDS + 7)]
    assert windows(" ".join(words)) == [" ".join(words)]  # the default: the sentence whole, as measured
    got = windows(" ".join(words), max_words=MAX_WINDOW_WORDS)
    singles = [w for w in got if len(w.split()) <= MAX_WINDOW_WORDS]
    assert " ".join(singles).split() == words  # every word, in order, in a window the NLI reads whole


def test_a_request_with_evidence_is_grounded_whatever_the_servers_protocol_and_says_what_was_read():
    from dialcheck.check_input import Limits, check_item

    limits = Limits(max_text_chars=100, max_body_bytes=100_000, max_context_turns=3,
                    evidence=EvidenceLimits(max_passages=32))
    passages = [{"text": f"Passage {i}.", "url": f"https://kb.example.com/{i}", "id": f"kb-{i}"} for i in range(40)]
    item = check_item({"claim": "Elvis was born in 1935.", "evidence": passages}, limits, "e2e")
    assert item.gold_evidence[0] == GivenPassage("Passage 0.", url="https://kb.example.com/0", id="kb-0")
    assert len(item.gold_evidence) == 32 and item.evidence_note.startswith("evidence cut: read 32 of 40 passages")
    assert check_item({"claim": "Elvis was born in 1935."}, limits, "e2e").gold_evidence is None
