"""Grounded turns through a real worker with the real Pipeline on the embedded Tansu broker: turns
produced by hand with kafka-python and with confluent-kafka (librdkafka), and knowledge on
chat.knowledge, as a RAG chat backend would send them (docs/integration.md#grounded-turns).

Why the real pipeline: these are label checks (a wrong year against the given passage is REFUTES, an
unbacked second sentence is its own claim and not SUPPORTS, the conversation's knowledge decides a
later turn); the wiring of every shape is tests/test_stream_badinput.py's, with the stand-in. One
worker for the module (model loading is the slow part), one round of produce and collect.
"""
from __future__ import annotations

import os

import orjson
import pytest

from dialcheck.wiring import DEFAULT_CHECKER
from streams.kafka_config import kafka_python_kwargs
from streams.replay import TurnProducer
from streams.verdicts import collect_verdicts, end_offsets

pytestmark = [pytest.mark.broker, pytest.mark.model]  # the worker loads the real models and index

PIPELINE = os.environ.get("DIALCHECK_TEST_STREAM_PIPELINE", DEFAULT_CHECKER)
ELVIS = "Elvis Presley was born in Tupelo, Mississippi, on January 8, 1935. He was an American singer and actor."
TOWER = "The Eiffel Tower in Paris was completed in 1889 as the entrance arch of the World's Fair."


def turn(conv: str, text: str, evidence=None) -> dict:
    return {"conversation_id": conv, "turn_id": f"{conv}#r", "speaker": "assistant", "text": text,
            **({"evidence": evidence} if evidence is not None else {})}


# conversation → the assistant turn, and how it is produced
BY_KAFKA_PYTHON = {
    "g-url": turn("g-url", "Elvis Presley was born in Tupelo.",
                  [{"text": ELVIS, "title": "Elvis Presley", "url": "https://help.example.com/elvis", "id": "kb-elvis"}]),
    "g-two": turn("g-two", "Elvis Presley was born in 1935. He won fourteen Olympic gold medals.", [ELVIS]),
    "g-knowledge": turn("g-knowledge", "The Eiffel Tower was completed in 1925."),
    "g-other": turn("g-other", "The Eiffel Tower was completed in 1925."),
    "g-nothing": turn("g-nothing", "Elvis Presley was born in 1935.", []),  # grounded on nothing
}
BY_CONFLUENT = {"g-year": turn("g-year", "Elvis Presley was born in 1942.", [ELVIS])}


@pytest.fixture(scope="module")
def settings_grounded(broker_settings):
    # segment: a reply of several sentences gets a verdict per claim, each with its claim_span
    s = broker_settings(stream={"status_interval_s": 1.0, "app_id": "grounded"}, claims={"segment": True})
    if PIPELINE == DEFAULT_CHECKER and s.retrieval.backend == "embedded":  # a default worker: mixed traffic
        from workers.retrieval.build import ensure_index
        ensure_index(s)
    return s


@pytest.fixture(scope="module")
def verdicts(settings_grounded, start_worker):
    """Every verdict of this module's turns, by conversation (each claim's, then the summary)."""
    s = settings_grounded
    worker = start_worker(s, PIPELINE)
    start = end_offsets(s, s.kafka.topic_verdicts)
    from kafka import KafkaProducer

    producer = KafkaProducer(acks="all", **kafka_python_kwargs(s))
    try:  # the knowledge first, acknowledged: it applies to every later turn of g-knowledge
        producer.send(s.kafka.topic_knowledge, key=b"g-knowledge",
                      value=orjson.dumps({"conversation_id": "g-knowledge", "doc_id": "kb-tower", "text": TOWER,
                                          "url": "https://help.example.com/tower"})).get(timeout=30)
    finally:
        producer.close()
    with TurnProducer(s) as turns:
        for conv, obj in BY_KAFKA_PYTHON.items():
            turns.send_raw(conv.encode(), orjson.dumps(obj))
    from confluent_kafka import Producer

    failed = []
    rd = Producer({"bootstrap.servers": s.kafka.bootstrap, "enable.idempotence": True})
    for conv, obj in BY_CONFLUENT.items():
        rd.produce(s.kafka.topic_turns, key=conv.encode(), value=orjson.dumps(obj),
                   on_delivery=lambda err, _msg: err and failed.append(err))
    assert rd.flush(30) == 0 and not failed
    convs = {**BY_KAFKA_PYTHON, **BY_CONFLUENT}

    def summarised(log) -> bool:  # every turn's last verdict (its summary, or its only one) is in
        got = {v.conversation_id for v in log.verdicts.values()
               if v.claim_span is not None and v.claim_span.start == 0 and v.claim_span.end == len(convs[v.conversation_id]["text"])}
        return got >= convs.keys()

    vlog = collect_verdicts(s, set(), timeout_s=300, start=start, alive=worker.alive, done=summarised)
    assert summarised(vlog), "turns without a verdict"
    assert worker.alive()
    out: dict[str, list] = {}
    for v in vlog.verdicts.values():
        out.setdefault(v.conversation_id, []).append(v)
    return out


def whole(vs: list):
    """The turn's verdict: its summary when it was split, else its one verdict."""
    return next((v for v in vs if (v.rationale or {}).get("rule") == "turn-summary"), vs[-1])


def test_evidence_objects_keep_their_url_id_and_title_on_the_verdict(verdicts):
    ev = [e for v in verdicts["g-url"] for e in v.evidence]
    assert ev and all(e.source == "turn" for e in ev)
    assert {(e.passage_id, e.title, e.url) for e in ev} == {("kb-elvis", "Elvis Presley", "https://help.example.com/elvis")}


def test_a_wrong_year_against_string_evidence_is_refuted(verdicts):
    v = whole(verdicts["g-year"])
    assert v.label == "REFUTES", (v.label, v.status, (v.rationale or {}).get("summary"))
    assert v.evidence and all(e.source == "turn" for e in v.evidence)


def test_an_unbacked_second_sentence_is_its_own_claim_with_its_span_and_no_supports(verdicts):
    text = BY_KAFKA_PYTHON["g-two"]["text"]
    second = text.index("He won")
    claims = [v for v in verdicts["g-two"] if (v.rationale or {}).get("rule") != "turn-summary"]
    assert len(claims) >= 2, [v.claim for v in claims]
    for v in claims:
        assert v.claim_span is not None and 0 <= v.claim_span.start < v.claim_span.end <= len(text)
    late = [v for v in claims if v.claim_span.start >= second]
    assert late, [(v.claim, v.claim_span) for v in claims]
    assert all(text[v.claim_span.start:v.claim_span.end].startswith("He won") for v in late)
    assert all(v.label != "SUPPORTS" for v in late), [(v.claim, v.label) for v in late]
    assert whole(verdicts["g-two"]).label != "SUPPORTS"


def test_knowledge_decides_a_later_turn_of_its_conversation_and_no_other(verdicts):
    v = whole(verdicts["g-knowledge"])
    assert v.label == "REFUTES", (v.label, v.status)
    assert {(e.source, e.passage_id, e.url) for e in v.evidence} == {("conversation", "kb-tower", "https://help.example.com/tower")}
    others = [e for conv, vs in verdicts.items() if conv != "g-knowledge" for v in vs for e in v.evidence]
    assert not [e for e in others if e.source == "conversation" or e.passage_id == "kb-tower"]
    assert all(e.source == "index" for v in verdicts["g-other"] for e in v.evidence)


def test_a_turn_grounded_on_nothing_is_not_enough_info_saying_so(verdicts):
    v = whole(verdicts["g-nothing"])
    assert v.label == "NOT ENOUGH INFO" and not v.evidence
    assert "given passage" in (v.status.reason or ""), v.status
