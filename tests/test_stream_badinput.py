"""Bad input, hung and crashing pipeline calls, and planted secrets, through a real worker on the
embedded Tansu broker, with raw records produced by kafka-python.

Why: one bad record once cost a whole batch of good turns their verdicts (the handler raised and
Faust acknowledged the batch). Every bad kind here must be dead-lettered with a short reason while
the good turns around it (same conversation key, same partition, same batches) get their verdicts
with the right context, and the worker keeps running.

Grounded turns add two ways in: a turn's `evidence` of every wrong shape, and records on
chat.knowledge of every wrong shape, for conversations never seen, or oversized. Each gets a verdict
with a status or a dead letter with a short reason, the worker stays up, the turns after them are
verdicted, one conversation's knowledge never reaches another's verdicts, and no passage text is
logged.

These tests exercise only the Kafka wiring, so the worker runs the model-free stand-in Checker of
tests/stream_standin.py, which echoes the passages it was handed as evidence
(tests/test_stream_kafka.py and tests/test_stream_grounded.py run the real pipeline).
"""
from __future__ import annotations

import json
import time

import orjson
import pytest

from schemas.knowledge import parse_knowledge
from streams.checking import validate_event
from streams.kafka_config import kafka_python_kwargs
from streams.turn_worker import partition_of
from streams.replay import TurnProducer
from streams.verdicts import TopicReader, VerdictLog, collect_verdicts, end_offsets, read_dead_letters
from schemas import ChatTurn, InvalidEvent, claim_id
from tests.stream_standin import context_digest

STANDIN = "tests.stream_standin:create"
PLANTED_PW = "Pl4nted-S3cret-pw"          # in DIALCHECK_OPENSEARCH_URL, as docker-compose.yml suggests
PLANTED_SASL = "Pl4nted-SASL-pw-9"         # DIALCHECK_KAFKA_SASL_PASSWORD (unused: PLAINTEXT broker)
MAX_TEXT, MAX_EVENT = 4000, 262144
# above the 53 conversations the tests below touch: a fetch that stops at the 600 KB record must not
# let the other partitions evict that conversation before its response arrives (CI once saw this)
MAX_CONVERSATIONS = 60


def turn_json(conv: str, **over) -> bytes:
    obj = {"conversation_id": conv, "turn_id": "t-bad", "speaker": "assistant", "text": "A claim."}
    obj.update(over)
    return json.dumps(obj, ensure_ascii=False).encode()


def raw_turn(conv: str, tail: str) -> bytes:
    """A turn whose text field is spliced in raw (escapes, literals json.dumps would not write)."""
    return (f'{{"conversation_id": "{conv}", "turn_id": "t-bad", "speaker": "assistant", ' + tail + "}").encode()


def bad_kinds() -> list[tuple[str, bytes | None, bytes | None, str]]:
    """(name, key, value, reason fragment). Unless the key is the point, the key is the
    conversation id, so the bad record sits in the same partition and conversation as good turns."""
    k = lambda i: f"bk-{i:02d}"  # noqa: E731
    kinds = [
        ("truncated JSON", raw_turn(k(0), '"text": "x"')[:-1]),
        ("not JSON", b"hello there"),
        ("empty value", b""),
        ("JSON array root", b"[1, 2, 3]"),
        ("JSON string root", b'"just a string"'),
        ("JSON number root", b"42"),
        ("JSON null root", b"null"),
        ("1,000 nested arrays", b"[" * 1000 + b"]" * 1000),
        ("1,000 nested objects", b'{"a":' * 1000 + b"1" + b"}" * 1000),
        ("deep meta", turn_json("{c}", meta=json.loads('{"a":' * 20 + "1" + "}" * 20))),
        ("missing text", b'{"conversation_id": "{c}", "turn_id": "t", "speaker": "assistant"}'),
        ("missing speaker", b'{"conversation_id": "{c}", "turn_id": "t", "text": "x"}'),
        ("missing turn_id", b'{"conversation_id": "{c}", "speaker": "assistant", "text": "x"}'),
        ("missing conversation_id", b'{"turn_id": "t", "speaker": "assistant", "text": "x"}'),
        ("speaker not a string", turn_json("{c}", speaker=7)),
        ("text not a string", turn_json("{c}", text=12)),
        ("check not a boolean", turn_json("{c}", check="yes")),
        ("ts not a number", turn_json("{c}", ts="now")),
        ("meta not an object", turn_json("{c}", meta=[1])),
        ("extra property", turn_json("{c}", extra=1)),
        ("conversation_id too long", turn_json("x" * 257)),
        ("600 KB conversation_id", turn_json("c" * 600_000)),
        ("honest 1 MB text", turn_json("{c}", text="word " * 200_000)),
        ("text over max_text_chars", turn_json("{c}", text="y" * (MAX_TEXT + 1))),
        ("blank text", turn_json("{c}", text="   \n\t ")),
        ("zero-width-only text", turn_json("{c}", text="\u200b\u200c\u200d\ufeff\u2060")),
        ("bidi-only text", turn_json("{c}", text="\u202e\u2066\u2067\u2069\u200f")),
        ("control-only text", turn_json("{c}", text="\u0007\u001b\u0000\u007f")),
        ("Hangul-filler-only text", turn_json("{c}", text="\u3164\u115f\u2800")),
        ("Cyrillic a in speaker", turn_json("{c}", speaker="\u0430ssistant")),
        ("emoji speaker", turn_json("{c}", speaker="\U0001f916")),
        ("speaker with a space", turn_json("{c}", speaker="the assistant")),
        ("zero-width-only speaker", turn_json("{c}", speaker="\u200b\u200b")),
        ("duplicate conversation_id key", b'{"conversation_id": "{c}", "conversation_id": "other", '
                                          b'"turn_id": "t", "speaker": "assistant", "text": "x"}'),
        ("duplicate text key", b'{"conversation_id": "{c}", "turn_id": "t", "speaker": "assistant", '
                               b'"text": "benign", "text": "other"}'),
        ("invalid UTF-8", b'{"conversation_id": "{c}", "turn_id": "t", "speaker": "assistant", "text": "caf\xe9"}'),
        ("UTF-16 JSON", turn_json("{c}").decode().encode("utf-16")),
        ("lone surrogate escape", raw_turn("{c}", '"text": "\\ud800 x"')),
        ("NaN literal", raw_turn("{c}", '"text": "x", "ts": NaN')),
        ("infinite number", raw_turn("{c}", '"text": "x", "ts": 1e999')),
        ("trailing garbage", turn_json("{c}") + b" trailing"),
        ("UTF-8 BOM", b"\xef\xbb\xbf" + turn_json("{c}")),
        ("control char in conversation_id", turn_json("{c}\u0001")),
        ("zero-width in turn_id", turn_json("{c}", turn_id="t\u200b")),
        ("key does not match", turn_json("someone-else")),
        ("missing key", turn_json("{c}")),
        ("600 KB key", turn_json("{c}")),
        ("null value (tombstone)", None),
    ]
    reasons = {
        "truncated JSON": "malformed JSON", "not JSON": "malformed JSON", "empty value": "malformed JSON",
        "JSON array root": "schema", "JSON string root": "schema", "JSON number root": "schema",
        "JSON null root": "schema", "1,000 nested arrays": "nested too deep", "1,000 nested objects": "nested too deep",
        "deep meta": "nested too deep", "missing text": "text", "missing speaker": "speaker",
        "missing turn_id": "turn_id", "missing conversation_id": "conversation_id", "speaker not a string": "speaker",
        "text not a string": "text", "check not a boolean": "check", "ts not a number": "ts",
        "meta not an object": "meta", "extra property": "Additional properties",
        "conversation_id too long": "conversation_id", "600 KB conversation_id": "event too large",
        "honest 1 MB text": "event too large", "text over max_text_chars": "too long", "blank text": "empty text",
        "zero-width-only text": "empty text", "bidi-only text": "empty text", "control-only text": "empty text",
        "Hangul-filler-only text": "empty text", "Cyrillic a in speaker": "plain role", "emoji speaker": "plain role",
        "speaker with a space": "plain role", "zero-width-only speaker": "plain role",
        "duplicate conversation_id key": "duplicate JSON key", "duplicate text key": "duplicate JSON key",
        "invalid UTF-8": "invalid UTF-8", "UTF-16 JSON": "invalid UTF-8", "lone surrogate escape": "malformed JSON",
        "NaN literal": "malformed JSON", "infinite number": "malformed JSON", "trailing garbage": "malformed JSON",
        "UTF-8 BOM": "malformed JSON", "control char in conversation_id": "control or invisible",
        "zero-width in turn_id": "control or invisible", "key does not match": "does not match",
        "missing key": "missing key", "600 KB key": "key too large", "null value (tombstone)": "null value",
    }
    out = []
    for i, (name, value) in enumerate(kinds):
        conv = k(i)
        if value is not None:
            value = value.replace(b"{c}", conv.encode())
        key: bytes | None = conv.encode()
        if name == "missing key":
            key = None
        elif name == "600 KB key":
            key = b"K" * 600_000
        out.append((name, key, value, reasons[name]))
    return out


BAD = bad_kinds()
# reason fragment → the dead letter's machine code (schemas.Reason); the metric label is this code
CODE_OF = {
    "malformed JSON": "malformed_json", "nested too deep": "malformed_json", "duplicate JSON key": "malformed_json",
    "schema": "schema", "text": "schema", "speaker": "schema", "turn_id": "schema", "conversation_id": "schema",
    "check": "schema", "ts": "schema", "meta": "schema", "Additional properties": "schema",
    "event too large": "too_large", "too long": "too_large", "empty text": "empty_text",
    "plain role": "invalid_field", "control or invisible": "invalid_field", "invalid UTF-8": "invalid_utf8",
    "does not match": "key", "missing key": "key", "key too large": "key", "null value": "tombstone",
}


@pytest.mark.unit
def test_there_are_at_least_40_kinds():
    assert len({name for name, *_ in BAD}) == len(BAD) >= 40


@pytest.mark.unit
@pytest.mark.parametrize("name,key,value,reason", BAD, ids=[b[0] for b in BAD])
def test_each_kind_is_rejected_with_its_reason_and_only_invalid_event(name, key, value, reason):
    """The same rule without a broker: fast to read when the Kafka test below fails."""
    with pytest.raises(InvalidEvent) as e:
        validate_event(key, value, MAX_TEXT, MAX_EVENT, 16)
    assert reason in e.value.reason and len(e.value.reason.encode()) <= 1024
    assert e.value.code == CODE_OF[reason]


@pytest.mark.unit
def test_hygiene_normalises_what_it_accepts():
    t = validate_event(b"c", turn_json("c", speaker="\uff21ssistant\u200b", text="\u202eThe  \uff26BI\u200b was founded in 1908."),
                       MAX_TEXT, MAX_EVENT, 16)
    assert t.speaker == "assistant" and t.text == "The  FBI was founded in 1908."


@pytest.fixture(scope="module")
def settings_badinput(broker_settings):
    return broker_settings(stream={"status_interval_s": 1.0, "batch_deadline_s": 3.0, "app_id": "badinput",
                                   "max_text_chars": MAX_TEXT, "max_event_bytes": MAX_EVENT, "max_conversations": MAX_CONVERSATIONS},
                           retrieval={"opensearch_url": f"https://admin:{PLANTED_PW}@search.internal:9200"},
                           grounding={"knowledge_docs": KNOWLEDGE_DOCS, "knowledge_bytes": KNOWLEDGE_BYTES})


@pytest.fixture(scope="module")
def worker(settings_badinput, start_worker):
    return start_worker(settings_badinput, STANDIN, env={"DIALCHECK_KAFKA_SASL_PASSWORD": PLANTED_SASL})


def good_turns(conv: str) -> tuple[ChatTurn, ChatTurn]:
    return (ChatTurn(conv, f"{conv}#ctx", "user", f"What about {conv}?", check=False),
            ChatTurn(conv, f"{conv}#response", "assistant", f"{conv} is a fine claim.", check=True))


@pytest.mark.broker
def test_every_bad_record_dead_lettered_and_every_good_turn_checked(settings_badinput, worker):
    start_v = end_offsets(settings_badinput, settings_badinput.kafka.topic_verdicts)
    start_d = end_offsets(settings_badinput, settings_badinput.kafka.topic_deadletter)
    expected, sent = {}, []
    with TurnProducer(settings_badinput) as producer:
        for i, (name, key, value, reason) in enumerate(BAD):  # good context turn, bad record, good claim: same key
            conv = key.decode() if key is not None and len(key) < 100 else f"good-{i}"
            ctx, resp = good_turns(conv)
            producer.send_turn(ctx)
            sent.append((name, value, reason, producer.send_raw(key, value)))
            producer.send_turn(resp)
            expected[claim_id(conv, resp.turn_id, resp.text)] = context_digest([ctx.text])
        # a role spelled with a zero-width space and odd case is still checked (no `check` flag)
        zw = ChatTurn("zw-role", "zw-role#r", "Assistant\u200b", "The Eiffel Tower is in Paris.")
        producer.send_turn(zw)
        expected[claim_id(zw.conversation_id, zw.turn_id, zw.text)] = context_digest([])
        producer.flush()
        where = {(md.partition, md.offset): (name, value, reason)
                 for name, value, reason, md in ((n, v, r, f.get(timeout=30)) for n, v, r, f in sent)}
    vlog = collect_verdicts(settings_badinput, set(expected), timeout_s=180, start=start_v, alive=worker.alive)
    assert set(expected) <= vlog.verdicts.keys(), f"{len(set(expected) - vlog.verdicts.keys())} good claims lost"
    wrong_ctx = [c for c, d in expected.items() if vlog.verdicts[c].model_versions["context_sha1"] != d]
    assert not wrong_ctx, "a bad record leaked into a conversation's context"
    assert all(vlog.verdicts[c].status.state == "ok" for c in expected)
    dead = read_dead_letters(settings_badinput, start_d)
    deadline = time.monotonic() + 60
    while len(dead) < len(BAD) and time.monotonic() < deadline:
        time.sleep(1)
        dead = read_dead_letters(settings_badinput, start_d)
    assert len(dead) == len(BAD)
    by_offset = {(d.partition, d.offset): d for d in dead}
    assert by_offset.keys() == where.keys()  # each bad record once, from its source coordinates
    for pos, (name, value, reason) in where.items():
        d = by_offset[pos]
        assert reason in d.reason, (name, reason, d.reason)
        assert d.code == CODE_OF[reason], (name, d.code, d.reason)
        assert len(d.reason.encode()) <= 1024 and d.topic == settings_badinput.kafka.topic_turns
        assert len(d.value) <= settings_badinput.stream.deadletter_max_bytes
        assert (value or b"").startswith(d.value), name  # the original bytes, or a prefix of them
    big = [d for d in dead if d.truncated]
    assert {d.truncated.split("=")[0] for d in big} >= {"key", "value"}  # prefix kept, lengths recorded
    assert worker.alive()


@pytest.mark.broker
def test_hung_call_gets_deadline_verdicts_and_secrets_never_leave(settings_badinput, worker):
    """The deadline answers a hung pipeline call; the planted passwords appear nowhere: not in the
    worker log, not in any verdict, not in any dead letter (the stand-in puts them in an exception,
    a log line and a degraded reason, as a failing OpenSearch client would)."""
    start_v = end_offsets(settings_badinput, settings_badinput.kafka.topic_verdicts)
    convs = {"sec-raise": "STANDIN-RAISE now", "sec-degraded": "STANDIN-DEGRADED now",
             "hang": "STANDIN-HANG now", "after-hang": "A normal claim after the hang."}
    ids = {conv: claim_id(conv, f"{conv}#r", text) for conv, text in convs.items()}
    vlog = VerdictLog()
    with TurnProducer(settings_badinput) as producer:
        for i in range(MAX_CONVERSATIONS + 10):  # more conversations than the worker keeps: some are evicted
            producer.send_turn(ChatTurn(f"filler-{i}", f"filler-{i}#u", "user", "Hello there.", check=False))
        for phase in (("sec-raise", "sec-degraded"), ("hang", "after-hang")):
            for conv in phase:  # the hang's batch is dispatched before "after-hang" is sent
                producer.send_turn(ChatTurn(conv, f"{conv}#r", "assistant", convs[conv]))
                producer.flush()
                time.sleep(1.5)
            collect_verdicts(settings_badinput, {ids[c] for c in phase}, timeout_s=120, start=start_v, log=vlog,
                             alive=worker.alive)
    v = {conv: vlog.verdicts[i] for conv, i in ids.items()}
    assert v["hang"].status.state == "error" and "deadline" in v["hang"].status.reason
    assert v["after-hang"].status.state == "ok"
    assert v["sec-raise"].status.state == "error" and "***@search.internal" in v["sec-raise"].status.reason
    assert v["sec-degraded"].status.state == "degraded" and "***@search.internal" in v["sec-degraded"].status.reason
    time.sleep(2.5 * settings_badinput.stream.status_interval_s)
    status = worker.last_status()
    assert status["deadline_expired"] >= 1 and worker.alive()
    assert status["evicted_lru"] > 0 and status["conversations"] <= settings_badinput.stream.max_conversations
    outputs = [worker.log_text().encode()]
    for topic in (settings_badinput.kafka.topic_verdicts, settings_badinput.kafka.topic_deadletter):
        with TopicReader(settings_badinput, topic) as r:
            outputs += [b"".join([rec.key or b"", rec.value or b""] + [hv for _, hv in rec.headers or []])
                        for rec in r.drain()]
    assert len(outputs) > len(BAD)
    for secret in (PLANTED_PW, PLANTED_SASL):
        assert not [o for o in outputs if secret.encode() in o], f"{secret} leaked"
    assert b"search backend failed" in outputs[0]  # the log line was written, scrubbed


# -- grounded turns: a turn's evidence and chat.knowledge ------------------------------------------
PASSAGE = "PASSAGE-TEXT-never-logged-6151"   # in every passage below: it must not reach the worker log
KNOWLEDGE_DOCS, KNOWLEDGE_BYTES = 3, 50_000  # the bounds this module's worker runs with


def knowledge_json(conv: str, doc_id: str, **over) -> bytes:
    return orjson.dumps({"conversation_id": conv, "doc_id": doc_id, "text": f"{PASSAGE} of {doc_id}.", **over})


# (name, value with "{c}" for the conversation id, reason fragment): each refused by the parser
BAD_KNOWLEDGE = [
    ("not JSON", b"{nope", "malformed JSON"),
    ("array root", b"[1]", "not a JSON object"),
    ("no doc_id", b'{"conversation_id": "{c}", "text": "x"}', "doc_id"),
    ("no text", b'{"conversation_id": "{c}", "doc_id": "d"}', "text"),
    ("delete false without text", b'{"conversation_id": "{c}", "doc_id": "d", "delete": false}', "text"),
    ("text a number", b'{"conversation_id": "{c}", "doc_id": "d", "text": 7}', "text: a int"),
    ("text a list", orjson.dumps({"conversation_id": "{c}", "doc_id": "d", "text": [PASSAGE]}), "text: a list"),
    ("delete with text", orjson.dumps({"conversation_id": "{c}", "doc_id": "d", "delete": True, "text": PASSAGE}),
     "a delete carries no text"),
    ("unknown field", b'{"conversation_id": "{c}", "doc_id": "d", "text": "x", "body": "y"}', "Additional properties"),
    ("duplicate key", b'{"conversation_id": "{c}", "doc_id": "d", "text": "x", "text": "y"}', "duplicate JSON key"),
    ("invisible-only text", '{"conversation_id": "{c}", "doc_id": "d", "text": "\u200b\u2060"}'.encode(), "empty text"),
    ("zero-width doc_id", '{"conversation_id": "{c}", "doc_id": "d\u200b", "text": "x"}'.encode(), "doc_id"),
    ("url with a space", b'{"conversation_id": "{c}", "doc_id": "d", "text": "x", "url": "a b"}', "url"),
    ("title a number", b'{"conversation_id": "{c}", "doc_id": "d", "text": "x", "title": 3}', "title"),
    ("record over max_event_bytes", knowledge_json("{c}", "d", title="t", text=PASSAGE * 20_000), "too large"),
]


@pytest.mark.unit
@pytest.mark.parametrize("name,raw,reason", BAD_KNOWLEDGE, ids=[b[0] for b in BAD_KNOWLEDGE])
def test_each_bad_knowledge_record_is_refused_with_a_reason_that_never_quotes_the_passage(name, raw, reason):
    with pytest.raises(InvalidEvent) as e:
        parse_knowledge(raw.replace(b"{c}", b"c"), max_bytes=MAX_EVENT)
    assert reason in e.value.reason and PASSAGE not in e.value.reason


def grounded_turn(conv: str, evidence, text: str = "The claim to check.") -> bytes:
    return orjson.dumps({"conversation_id": conv, "turn_id": f"{conv}#g", "speaker": "assistant", "text": text,
                         "evidence": evidence})


# (name, value, what comes of it): ("dead", reason fragment) or ("verdict", a fragment of its status reason
# or None, the passages' texts the checker was handed)
GROUNDED_TURNS = [
    ("evidence a string", grounded_turn("{c}", PASSAGE), ("dead", "evidence must be")),
    ("evidence numbers", grounded_turn("{c}", [1, 2.5]), ("dead", "int is not a passage")),
    ("evidence nested lists", grounded_turn("{c}", [[PASSAGE]]), ("dead", "a list is not a passage")),
    ("evidence object without text", grounded_turn("{c}", [{"title": "T", "url": "https://example.com"}]),
     ("dead", 'needs "text"')),
    ("evidence object with a list text", grounded_turn("{c}", [{"text": [PASSAGE]}]), ("dead", 'needs "text"')),
    ("evidence invisible-only passage", grounded_turn("{c}", ["\u200b\u2060\u3164"]), ("dead", "empty text")),
    ("evidence duplicate keys", b'{"conversation_id": "{c}", "turn_id": "{c}#g", "speaker": "assistant", "text": "x", '
                                b'"evidence": [{"text": "a", "text": "b"}]}', ("dead", "duplicate JSON key")),
    ("evidence multi-megabyte passage", grounded_turn("{c}", ["x" * 2_000_000]), ("dead", "event too large")),
    ("evidence 5,000 passages", grounded_turn("{c}", [f"p{i}" for i in range(5000)]),
     ("verdict", "read 32 of 5000 passages", [f"p{i}" for i in range(32)])),
    ("evidence 100,000-character passage", grounded_turn("{c}", ["y" * 100_000]),
     ("verdict", "20000 of 100000 characters", ["y" * 20_000])),
    ("evidence control and invisible characters", grounded_turn("{c}", [f"{PASSAGE}\u200b\u0007 said\u202e."]),
     ("verdict", None, [f"{PASSAGE} said."])),
    ("evidence null", grounded_turn("{c}", None), ("verdict", None, [])),
    ("evidence empty list", grounded_turn("{c}", []), ("verdict", None, [])),  # grounded on nothing
]


def knowledge_producer(settings):
    """chat.knowledge records produced by hand with kafka-python, as a chat backend would."""
    from kafka import KafkaProducer

    return KafkaProducer(acks="all", linger_ms=2, **kafka_python_kwargs(settings))


def same_partition_as(conv: str, partitions: int, prefix: str) -> str:
    """A conversation id whose records share `conv`'s partition (and so its worker and tables)."""
    return next(f"{prefix}-{i}" for i in range(10_000)
                if partition_of(f"{prefix}-{i}".encode(), partitions) == partition_of(conv.encode(), partitions))


@pytest.mark.broker
def test_grounded_shapes_and_knowledge_records_get_a_verdict_or_a_dead_letter(settings_badinput, worker):
    """Knowledge first (bad kinds, a conversation never seen, bounds, a delete), acknowledged by the
    broker; then a turn in every conversation: each bad record is a dead letter from its coordinates,
    each turn a verdict whose passages are exactly its own and its conversation's."""
    s = settings_badinput
    k, parts = s.kafka, s.kafka.topic_partitions
    start_v, start_d = end_offsets(s, k.topic_verdicts), end_offsets(s, k.topic_deadletter)
    expect_dead: dict[tuple[str, int, int], tuple[str, str]] = {}  # (topic, partition, offset) → (name, reason)
    expect_passages: dict[str, list[str]] = {}  # conversation → the passage ids its verdict must hold, in order
    producer = knowledge_producer(s)
    try:
        def send(conv: str | None, value: bytes | None, key: bytes | None = None):
            key = key if key is not None else (conv.encode() if conv is not None else None)
            return producer.send(k.topic_knowledge, key=key, value=value).get(timeout=30)

        for i, (name, raw, reason) in enumerate(BAD_KNOWLEDGE):
            conv = f"kn-bad-{i:02d}"
            md = send(conv, raw.replace(b"{c}", conv.encode()))
            expect_dead[(k.topic_knowledge, md.partition, md.offset)] = (name, reason)
            expect_passages[conv] = []
        wire = [("key does not match", "kn-key", knowledge_json("kn-someone-else", "d"), None, "does not match"),
                ("missing key", "kn-nokey", knowledge_json("kn-nokey", "d"), b"", "missing key"),
                ("tombstone", "kn-tomb", None, None, "null value"),
                ("document over knowledge_bytes", "kn-big", knowledge_json("kn-big", "d", text="z" * (KNOWLEDGE_BYTES + 1)),
                 None, "knowledge document too large")]
        for name, conv, value, key, reason in wire:
            md = producer.send(k.topic_knowledge, key=None if key == b"" else (key or conv.encode()), value=value).get(timeout=30)
            expect_dead[(k.topic_knowledge, md.partition, md.offset)] = (name, reason)
            expect_passages[conv] = []
        # a conversation never seen: its knowledge arrives before its first turn and applies to it
        send("kn-new", knowledge_json("kn-new", "kn-new-doc", url="https://help.example.com/a", title="Help"))
        expect_passages["kn-new"] = ["kn-new-doc"]
        # the per-conversation bound: the oldest two of five go
        for i in range(KNOWLEDGE_DOCS + 2):
            send("kn-bound", knowledge_json("kn-bound", f"kn-bound-{i}"))
        expect_passages["kn-bound"] = [f"kn-bound-{i}" for i in range(2, KNOWLEDGE_DOCS + 2)]
        # a delete, and a delete for a conversation never seen (a no-op, not an error)
        send("kn-del", knowledge_json("kn-del", "kn-del-keep"))
        send("kn-del", knowledge_json("kn-del", "kn-del-gone"))
        send("kn-del", orjson.dumps({"conversation_id": "kn-del", "doc_id": "kn-del-gone", "delete": True}))
        expect_passages["kn-del"] = ["kn-del-keep"]
        send("kn-ghost", orjson.dumps({"conversation_id": "kn-ghost", "doc_id": "x", "delete": True}))
        expect_passages["kn-ghost"] = []
        # neighbours that share kn-new's partition, and so its worker and its knowledge table, see none of it
        expect_passages[same_partition_as("kn-new", parts, "kn-neighbour")] = []
        expect_passages["kn-stranger"] = []
    finally:
        producer.close()
    expected: dict[str, str] = {}  # claim id → conversation
    with TurnProducer(s, max_request_size=4_000_000) as turns:  # the multi-megabyte turn
        for conv in expect_passages:
            turn = ChatTurn(conv, f"{conv}#r", "assistant", f"{conv} is a fine claim.")
            turns.send_turn(turn)
            expected[claim_id(conv, turn.turn_id, turn.text)] = conv
        sent = []
        for i, (name, value, outcome) in enumerate(GROUNDED_TURNS):  # a bad shape, then a good turn after it
            conv = f"ev-{i:02d}"
            sent.append((name, outcome, turns.send_raw(conv.encode(), value.replace(b"{c}", conv.encode()))))
            after = ChatTurn(conv, f"{conv}#after", "assistant", "A claim after a grounded turn.")
            turns.send_turn(after)
            expected[claim_id(conv, after.turn_id, after.text)] = conv
        turns.flush()
        grounded = {}
        for name, outcome, fut in sent:
            md = fut.get(timeout=30)
            if outcome[0] == "dead":
                expect_dead[(k.topic_turns, md.partition, md.offset)] = (name, outcome[1])
            else:
                conv = f"ev-{[g[0] for g in GROUNDED_TURNS].index(name):02d}"
                grounded[claim_id(conv, f"{conv}#g", "The claim to check.")] = (name, outcome)
    vlog = collect_verdicts(s, set(expected) | set(grounded), timeout_s=180, start=start_v, alive=worker.alive)
    missing = (set(expected) | set(grounded)) - vlog.verdicts.keys()
    assert not missing, f"{len(missing)} turns without a verdict"
    for cid, conv in expected.items():
        v = vlog.verdicts[cid]
        assert [e.passage_id for e in v.evidence] == expect_passages.get(conv, []), conv
        assert all(e.source == "conversation" for e in v.evidence)
        assert ("2 older document(s) dropped" in (v.status.reason or "")) == (conv == "kn-bound"), conv
    new = vlog.verdicts[next(c for c, conv in expected.items() if conv == "kn-new")].evidence[0]
    assert (new.url, new.title, new.text) == ("https://help.example.com/a", "Help", f"{PASSAGE} of kn-new-doc.")
    for cid, (name, (_, note, texts)) in grounded.items():
        v = vlog.verdicts[cid]
        assert [e.text for e in v.evidence] == texts and all(e.source == "turn" for e in v.evidence), name
        assert (note is None and v.status.reason is None) or (note is not None and note in (v.status.reason or "")), name
    dead = read_dead_letters(s, start_d)
    deadline = time.monotonic() + 60
    while len(dead) < len(expect_dead) and time.monotonic() < deadline:
        time.sleep(1)
        dead = read_dead_letters(s, start_d)
    got = {(d.topic, d.partition, d.offset): d for d in dead}
    assert got.keys() == expect_dead.keys()  # each bad record once, from its source coordinates
    for where, (name, reason) in expect_dead.items():
        assert reason in got[where].reason and len(got[where].reason.encode()) <= 1024, (name, got[where].reason)
        assert PASSAGE not in got[where].reason, name
    time.sleep(2.5 * s.stream.status_interval_s)
    status = worker.last_status()
    assert worker.alive() and status["knowledge_dropped"] >= 2 and status["knowledge_conversations"] >= 3
    assert PASSAGE not in worker.log_text()


@pytest.mark.broker
def test_knowledge_acknowledged_before_its_turn_applies_to_it(settings_badinput, worker):
    """The ordering chat.knowledge promises across two topics (streams/knowledge.py "Ordering"): each
    turn produced right after its conversation's knowledge was acknowledged is checked against it."""
    s = settings_badinput
    start_v = end_offsets(s, s.kafka.topic_verdicts)
    expected = {}
    producer = knowledge_producer(s)
    try:
        with TurnProducer(s) as turns:
            for i in range(24):
                conv = f"kn-order-{i:02d}"
                producer.send(s.kafka.topic_knowledge, key=conv.encode(),
                              value=knowledge_json(conv, f"{conv}-doc")).get(timeout=30)
                t = ChatTurn(conv, f"{conv}#r", "assistant", f"{conv} right after its knowledge.")
                turns.send_turn(t).get(timeout=30)
                expected[claim_id(conv, t.turn_id, t.text)] = f"{conv}-doc"
    finally:
        producer.close()
    vlog = collect_verdicts(s, set(expected), timeout_s=120, start=start_v, alive=worker.alive)
    assert set(expected) <= vlog.verdicts.keys()
    late = [doc for cid, doc in expected.items() if [e.passage_id for e in vlog.verdicts[cid].evidence] != [doc]]
    assert not late, f"{len(late)} of {len(expected)} turns checked without the knowledge sent before them"


@pytest.mark.broker
def test_a_knowledge_topic_partitioned_unlike_the_turns_is_one_line(settings_badinput):
    """A chat.knowledge made elsewhere with another partition count would put a conversation's
    knowledge on another worker than its turns: the worker refuses to start, saying why."""
    from streams.topics import ensure_topics, knowledge_mismatch

    s = settings_badinput
    odd = s.updated(kafka={"topic_knowledge": "odd.knowledge", "topic_partitions": s.kafka.topic_partitions + 1})
    ensure_topics(odd, [odd.kafka.topic_knowledge])
    why = knowledge_mismatch(odd, s.kafka.topic_partitions)
    assert why is not None and why.startswith(f"odd.knowledge has {s.kafka.topic_partitions + 1} partitions")
    assert knowledge_mismatch(s, s.kafka.topic_partitions) is None
