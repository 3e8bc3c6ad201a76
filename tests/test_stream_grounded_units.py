"""Conversation knowledge and a turn's passages, without Kafka: the knowledge record's contract
(schemas/knowledge.py), the table's rules (bounded, replaced, deleted, expired with the
conversation) and the passages a checked turn gets (its own evidence, then its conversation's, read
to the grounding limits). The same rules run in the worker (tests/test_stream_badinput.py, which also
holds every bad knowledge record, tests/test_stream_grounded.py)."""
from __future__ import annotations

import orjson
import pytest

from schemas import ChatTurn
from schemas.evidence import EvidenceLimits
from schemas.items import GivenPassage
from schemas.knowledge import KnowledgeRecord, parse_knowledge
from streams.knowledge import add_doc, conversation_idle, delete_doc, given_evidence, passages_of

pytestmark = pytest.mark.unit


def record(doc_id: str, text: str, **extra) -> KnowledgeRecord:
    return parse_knowledge(orjson.dumps({"conversation_id": "c", "doc_id": doc_id, "text": text, **extra}))


def test_a_knowledge_record_parses_to_a_conversation_passage():
    rec = record("kb-1", "Graceland\u200b is in Memphis.", title="Graceland", url="https://example.com/g")
    assert rec.passage == GivenPassage("Graceland is in Memphis.", "Graceland", "https://example.com/g", "kb-1",
                                       source="conversation")
    gone = parse_knowledge(b'{"conversation_id": "c", "doc_id": "kb-1", "delete": true}')
    assert gone.delete and gone.passage is None


def test_the_oldest_documents_go_beyond_the_bounds_and_are_counted():
    state = None
    for i in range(5):
        state, dropped = add_doc(state, record(f"d{i}", f"passage {i}"), now=float(i), max_docs=3, max_bytes=10_000)
    assert [d["doc_id"] for d in state["docs"]] == ["d2", "d3", "d4"] and state["dropped"] == 2
    state, dropped = add_doc(state, record("big", "x" * 30), now=9.0, max_docs=3, max_bytes=40)
    assert [d["doc_id"] for d in state["docs"]] == ["d4", "big"] and dropped == 2 and state["bytes"] == 39


def test_a_doc_id_sent_again_replaces_and_a_delete_removes():
    state, _ = add_doc(None, record("a", "first"), now=1.0, max_docs=9, max_bytes=999)
    state, _ = add_doc(state, record("b", "other"), now=2.0, max_docs=9, max_bytes=999)
    state, _ = add_doc(state, record("a", "second"), now=3.0, max_docs=9, max_bytes=999)
    assert [(p.id, p.text) for p in passages_of(state)] == [("b", "other"), ("a", "second")]
    state = delete_doc(state, "b", now=4.0)
    assert [p.id for p in passages_of(state)] == ["a"]
    assert delete_doc(state, "a", now=5.0) is None and delete_doc(None, "never", now=5.0) is None


def test_knowledge_expires_with_its_conversation_not_while_turns_come():
    knowledge = {"docs": [], "last_seen": 0.0}
    assert not conversation_idle({"turns": [], "last_seen": 90.0}, knowledge, now=100.0, idle_s=50.0)
    assert conversation_idle({"turns": [], "last_seen": 10.0}, knowledge, now=100.0, idle_s=50.0)
    assert conversation_idle(None, knowledge, now=100.0, idle_s=50.0)
    assert not conversation_idle(None, {"last_seen": 60.0}, now=100.0, idle_s=50.0)


def turn(evidence=None, note=None) -> ChatTurn:
    return ChatTurn("c", "t", "assistant", "A claim.", evidence=evidence, evidence_note=note)


def kb(n: int, size: int = 10) -> list[GivenPassage]:
    return [GivenPassage("k" * size, id=f"kb-{i}", source="conversation") for i in range(n)]


def test_a_turn_with_neither_evidence_nor_knowledge_is_checked_as_today():
    assert given_evidence(turn(), [], EvidenceLimits()) == (None, None)


def test_an_empty_evidence_list_is_a_turn_grounded_on_nothing():
    assert given_evidence(turn(evidence=()), [], EvidenceLimits()) == ([], None)


def test_the_turns_own_passages_come_first_then_its_conversations():
    own = (GivenPassage("Own passage.", url="https://example.com/own"),)
    passages, note = given_evidence(turn(own), kb(2), EvidenceLimits())
    assert [p.source for p in passages] == ["turn", "conversation", "conversation"] and note is None
    assert passages[0].url == "https://example.com/own" and passages[2].id == "kb-1"


def test_knowledge_is_read_in_what_the_limits_leave_and_the_note_says_how_much():
    own = (GivenPassage("o" * 40),)
    passages, note = given_evidence(turn(own, "evidence cut: read 1 of 3 passages"), kb(5, 30),
                                    EvidenceLimits(max_passages=3, max_passage_chars=100, max_chars=100))
    assert [len(p.text) for p in passages] == [40, 30, 30]
    assert note.startswith("evidence cut: read 1 of 3 passages; conversation knowledge cut: read 2 of 5 passages")
    passages, note = given_evidence(turn(own), kb(1), EvidenceLimits(max_passages=1))
    assert len(passages) == 1 and "read 0 of 1 passages" in note


def test_documents_the_bounds_dropped_are_said_on_the_verdicts_note():
    passages, note = given_evidence(turn(), kb(1), EvidenceLimits(), dropped=2)
    assert len(passages) == 1 and note.startswith("conversation knowledge: 2 older document(s) dropped")


def test_the_knowledge_tables_memory_is_on_the_status_line_and_metrics():
    from types import SimpleNamespace

    from prometheus_client import CollectorRegistry, generate_latest

    from schemas.settings import load_settings
    from streams.knowledge import KnowledgeGauges, KnowledgeWorker
    from streams.outbox import Counters

    table = {}
    for conv, n in ((b"a", 1), (b"b", 3)):
        state = None
        for i in range(n):
            state, _ = add_doc(state, record(f"d{i}", "x" * 100), now=1.0, max_docs=9, max_bytes=10_000)
        table[conv] = state
    knowledge = KnowledgeWorker(None, load_settings(), outbox=SimpleNamespace(counters=Counters()), table=table)
    assert knowledge.memory().line() == "knowledge_conversations=2 knowledge_docs=4 knowledge_bytes=400"
    registry = CollectorRegistry()
    registry.register(KnowledgeGauges(knowledge))
    text = generate_latest(registry).decode()
    assert "dialcheck_knowledge_bytes 400.0" in text and "dialcheck_knowledge_conversation_bytes_max 300.0" in text


def test_a_conversation_without_knowledge_reads_none_whatever_its_context():
    from types import SimpleNamespace

    from schemas.settings import load_settings
    from streams.knowledge import KnowledgeWorker
    from streams.outbox import Counters

    knowledge = KnowledgeWorker(None, load_settings(), outbox=SimpleNamespace(counters=Counters()), table={})
    assert knowledge.passages(b"c", {"turns": [], "last_seen": 99.0}, now=100.0) == ([], 0)
    assert knowledge.passages(b"c", None, now=100.0) == ([], 0)


def test_the_sweep_expires_and_evicts_knowledge_with_its_conversation():
    """Idle (no turn and no knowledge for context_idle_s): context and knowledge go together; a
    conversation whose turns stopped but whose knowledge just came stays; beyond max_conversations
    the least recently active go, whichever table holds them."""
    import time
    from types import SimpleNamespace

    from schemas.settings import load_settings
    from streams.kafka.acks import Acks
    from streams.knowledge import KnowledgeWorker
    from streams.observability import Observability
    from streams.outbox import Outbox
    from streams.turn_worker import AttemptsTable, TurnWorker

    s = load_settings(stream={"context_idle_s": 100.0, "max_conversations": 2})
    outbox = Outbox(None, s, dead_topic=None, obs=Observability(s), acks=Acks(lambda: None))
    now = time.time()
    seen = lambda ago: {"turns": [], "last_seen": now - ago}  # noqa: E731
    context = {b"idle": seen(500), b"talking": seen(5), b"new-knowledge": seen(500)}
    known = {b"idle": seen(500), b"talking": seen(500), b"new-knowledge": seen(1), b"knowledge-only": seen(50),
             b"knowledge-only-idle": seen(500)}
    knowledge = KnowledgeWorker(None, s, outbox=SimpleNamespace(counters=outbox.counters), table=known)
    worker = TurnWorker(None, s, SimpleNamespace(check_turns=None), outbox=outbox, table=context,
                        attempts=AttemptsTable({}, 4), verdicts_topic=None, obs=outbox.obs, knowledge=knowledge)
    worker.sweep(owned={0, 1, 2, 3})
    # idle: "idle" from both tables, "knowledge-only-idle"; then beyond 2 conversations: "knowledge-only" (50 s ago)
    assert set(context) == {b"talking", b"new-knowledge"} and set(known) == {b"talking", b"new-knowledge"}
    assert (worker.counters.evicted, worker.counters.evicted_lru, worker.counters.knowledge_evicted) == (1, 1, 3)


def test_the_workers_knowledge_stays_within_its_total_bound_least_recent_first():
    """Per-conversation bounds times max_conversations would be gigabytes: beyond
    grounding.knowledge_total_bytes the least recently active conversations lose their documents
    (counted), and a later turn of such a conversation is grounded on nothing, saying why."""
    import time
    from types import SimpleNamespace

    from schemas import ChatTurn
    from schemas.evidence import EvidenceLimits
    from schemas.settings import load_settings
    from streams.kafka.acks import Acks
    from streams.knowledge import KnowledgeWorker, given_evidence
    from streams.observability import Observability
    from streams.outbox import Outbox
    from streams.turn_worker import AttemptsTable, TurnWorker

    s = load_settings(grounding={"knowledge_total_bytes": 2500})
    outbox = Outbox(None, s, dead_topic=None, obs=Observability(s), acks=Acks(lambda: None))
    now = time.time()

    def held(ago: float) -> dict:
        return {"docs": [{"doc_id": "d", "text": "x" * 1000, "title": None, "url": None}], "bytes": 1000,
                "dropped": 0, "last_seen": now - ago}

    known = {b"oldest": held(30), b"older": held(20), b"recent": held(10), b"newest": held(1)}
    knowledge = KnowledgeWorker(None, s, outbox=SimpleNamespace(counters=outbox.counters), table=known)
    worker = TurnWorker(None, s, SimpleNamespace(check_turns=None), outbox=outbox, table={},
                        attempts=AttemptsTable({}, 4), verdicts_topic=None, obs=outbox.obs, knowledge=knowledge)
    worker.sweep(owned={0, 1, 2, 3})
    kept = {k for k, v in known.items() if v["docs"]}
    assert kept == {b"recent", b"newest"} and worker.counters.knowledge_dropped == 2
    assert knowledge.memory().bytes == 2000
    turn = ChatTurn("oldest", "t1", "assistant", "It is open on Sundays.")
    passages, dropped = knowledge.passages(b"oldest", None, now)
    gold, note = given_evidence(turn, passages, EvidenceLimits(), dropped)
    assert gold == [] and "1 older document(s) dropped" in note  # grounded on nothing, and why
