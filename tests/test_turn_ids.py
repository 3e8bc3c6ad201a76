"""A reused turn id with different text (an edited message) replaces the turn's text in the
context and is checked again; the same text again is a redelivery and changes nothing.

Why: the context once deduplicated on the turn id alone, so a corrected turn was silently ignored
(later claims were checked against the old text while a chat app showed the correction).
The stream tests run a real worker on the embedded broker with the model-free stand-in Checker
(tests/stream_standin.py): its verdicts carry a digest of the context they were given. The same
worker shows that users' text is published as written even when it holds a configured secret's
value (the scrubber is for what dialcheck writes; it once turned a user's own words into "password is ***")."""
from __future__ import annotations

import logging

import pytest

from schemas import ChatTurn, claim_id
from streams.context import add_turn
from streams.replay import TurnProducer
from streams.verdicts import VerdictLog, collect_verdicts, end_offsets
from tests.stream_standin import context_digest


def turn(tid: str, text: str, speaker: str = "user") -> ChatTurn:
    return ChatTurn("c", tid, speaker, text)


def build(*turns: ChatTurn):
    state = None
    for t in turns:
        state, _ = add_turn(state, t, now=1.0, max_turns=10, idle_s=3600)
    return state


@pytest.mark.unit
def test_reused_id_with_new_text_replaces_the_turn_in_place(caplog):
    state = build(turn("u1", "The tower is 300 m."), turn("a1", "It is in Paris.", "assistant"), turn("u2", "Nice."))
    with caplog.at_level(logging.INFO, logger="dialcheck.stream"):
        state, ctx = add_turn(state, turn("u1", "The tower is 330 m."), now=2.0, max_turns=10, idle_s=3600)
    assert ctx == []  # the turns before it, as on first delivery
    assert [(t["turn_id"], t["text"]) for t in state["turns"]] == [
        ("u1", "The tower is 330 m."), ("a1", "It is in Paris."), ("u2", "Nice.")]
    assert any("reused with different text" in r.getMessage() for r in caplog.records)  # never silent
    _, ctx = add_turn(state, turn("a2", "It opened in 1889.", "assistant"), now=3.0, max_turns=10, idle_s=3600)
    assert ctx == ["The tower is 330 m.", "It is in Paris.", "Nice."]  # later turns read the correction


@pytest.mark.unit
def test_same_text_again_is_a_redelivery_not_an_edit(caplog):
    state = build(turn("u1", "Hello."), turn("a1", "Paris is in France.", "assistant"))
    with caplog.at_level(logging.INFO, logger="dialcheck.stream"):
        again, ctx = add_turn(state, turn("a1", "Paris is in France.", "assistant"), now=2.0, max_turns=10, idle_s=3600)
    assert again["turns"] == state["turns"] and ctx == ["Hello."]
    assert not any("reused" in r.getMessage() for r in caplog.records)


STANDIN = "tests.stream_standin:create"
SASL = "Pl4nted-SASL-turnids"


@pytest.fixture(scope="module")
def settings_turnids(broker_settings):
    return broker_settings(stream={"app_id": "turnids", "status_interval_s": 1.0})


@pytest.fixture(scope="module")
def worker(settings_turnids, start_worker):
    # --verbose: an edited turn's note is an INFO line (the worker logs warnings only by default)
    return start_worker(settings_turnids, STANDIN, env={"DIALCHECK_KAFKA_SASL_PASSWORD": SASL}, args=("--verbose",))


@pytest.mark.broker
def test_edited_turns_through_the_worker(settings_turnids, worker):
    """An edited user turn becomes the context of the next claim; an edited assistant turn gets a
    verdict under its new text (new claim id), against the corrected context."""
    conv = "edits"
    old_q, new_q = "How tall is the tower?", "How tall is the Eiffel tower?"
    steps = [ChatTurn(conv, "u1", "user", old_q, check=False),
             ChatTurn(conv, "a1", "assistant", "It is 300 m tall.", check=True),
             ChatTurn(conv, "u1", "user", new_q, check=False),                      # edited question
             ChatTurn(conv, "a2", "assistant", "It opened in 1889.", check=True),
             ChatTurn(conv, "a1", "assistant", "It is 330 m tall.", check=True),     # corrected answer
             ChatTurn(conv, "a1", "assistant", "It is 330 m tall.", check=True)]     # its redelivery
    want = {claim_id(conv, "a1", "It is 300 m tall."): [old_q],
            claim_id(conv, "a2", "It opened in 1889."): [new_q, "It is 300 m tall."],
            claim_id(conv, "a1", "It is 330 m tall."): [new_q]}
    start = end_offsets(settings_turnids, settings_turnids.kafka.topic_verdicts)
    with TurnProducer(settings_turnids) as producer:
        for t in steps:
            producer.send_turn(t)
        producer.flush()
    vlog = collect_verdicts(settings_turnids, set(want), timeout_s=120, start=start, log=VerdictLog(), alive=worker.alive)
    assert set(want) <= vlog.verdicts.keys(), f"missing {set(want) - vlog.verdicts.keys()}"
    for cid, context in want.items():
        assert vlog.verdicts[cid].model_versions["context_sha1"] == context_digest(context), cid
    assert "reused with different text" in worker.log_text()


@pytest.mark.broker
def test_users_text_holding_a_secret_value_is_published_as_written(settings_turnids, worker):
    conv = "said-it"
    said = f"My password is {SASL} and Paris is in France."
    cid = claim_id(conv, "a1", said)
    start = end_offsets(settings_turnids, settings_turnids.kafka.topic_verdicts)
    with TurnProducer(settings_turnids) as producer:
        producer.send_turn(ChatTurn(conv, "u0", "user", f"Is {SASL} safe?", check=False))
        producer.send_turn(ChatTurn(conv, "a1", "assistant", said, check=True))
        producer.flush()
    vlog = collect_verdicts(settings_turnids, {cid}, timeout_s=120, start=start, log=VerdictLog(), alive=worker.alive)
    v = vlog.verdicts[cid]  # the claim id is computed from the text as written: found means unchanged
    assert v.claim == said and v.surface.text == said
    assert v.model_versions["context_sha1"] == context_digest([f"Is {SASL} safe?"])
    assert SASL not in worker.log_text()  # what dialcheck itself writes stays scrubbed
