"""Stream rules that need no broker: context, selection, validation, failure handling, config."""
from __future__ import annotations

import pytest

from schemas.protocols import TurnResult
from schemas.settings import load_settings
from schemas import ChatTurn, InvalidEvent, Reason, claim_id, parse_verdict
from streams.checking import check_safely, error_verdict, validate_event
from streams.context import add_turn, is_idle, parse_roles, should_check
from streams.deadletter import DeadLetter
from streams.kafka_config import aiokafka_kwargs, bootstrap_list, faust_broker_kwargs, kafka_python_kwargs
from schemas.items import response_claim_id
from streams.replay import record_turns
from streams.worker import settings_env
from schemas.items import CheckItem

pytestmark = pytest.mark.unit


def turn(tid, text="t", conv="c1", speaker="user", check=None):
    return ChatTurn(conversation_id=conv, turn_id=tid, speaker=speaker, text=text, check=check)


def test_context_is_previous_turns_bounded():
    state, ctx = None, None
    for i in range(5):
        state, ctx = add_turn(state, turn(f"t{i}", f"text{i}"), now=100.0 + i, max_turns=3, idle_s=3600)
    assert ctx == ["text1", "text2", "text3"]
    assert [t["turn_id"] for t in state["turns"]] == ["t2", "t3", "t4"]


def test_redelivered_turn_is_not_appended_twice_and_gets_same_context():
    state = None
    for i in range(3):
        state, _ = add_turn(state, turn(f"t{i}", f"text{i}"), now=1.0, max_turns=10, idle_s=3600)
    again, ctx = add_turn(state, turn("t1", "text1"), now=2.0, max_turns=10, idle_s=3600)
    assert ctx == ["text0"]
    assert [t["turn_id"] for t in again["turns"]] == ["t0", "t1", "t2"]


def test_idle_conversation_starts_afresh():
    state, _ = add_turn(None, turn("t0", "old"), now=0.0, max_turns=10, idle_s=60)
    assert is_idle(state, 61.0, 60) and not is_idle(state, 59.0, 60)
    state, ctx = add_turn(state, turn("t1", "new"), now=100.0, max_turns=10, idle_s=60)
    assert ctx == [] and len(state["turns"]) == 1


def test_check_flag_overrides_role():
    roles = parse_roles("assistant, Bot")
    assert should_check(turn("a", speaker="assistant"), roles)
    assert should_check(turn("a", speaker="BOT"), roles)
    assert not should_check(turn("a", speaker="user"), roles)
    assert should_check(turn("a", speaker="user", check=True), roles)
    assert not should_check(turn("a", speaker="assistant", check=False), roles)


@pytest.mark.parametrize("key,value,reason,code", [
    (b"c", b"{not json", "malformed JSON", "malformed_json"),
    (b"c", b"\xff\xfe{}", "invalid UTF-8", "invalid_utf8"),
    (b"c", b'{"conversation_id": "c", "turn_id": "t", "speaker": "user"}', "text", "schema"),
    (b"c", b'{"conversation_id": "c", "turn_id": "t", "speaker": 3, "text": "x"}', "speaker", "schema"),
    (b"c", b'{"conversation_id": "c", "turn_id": "t", "speaker": "user", "text": " "}', "empty text", "empty_text"),
    (b"c", b'{"conversation_id": "c", "turn_id": "t", "speaker": "user", "text": "' + b"x" * 50 + b'"}', "too long",
     "too_large"),
    (b"c", b'{"conversation_id": "c", "turn_id": "t", "speaker": "the user", "text": "x"}', "plain role",
     "invalid_field"),
    (b"other", b'{"conversation_id": "c", "turn_id": "t", "speaker": "user", "text": "x"}', "does not match", "key"),
    (None, b'{"conversation_id": "c", "turn_id": "t", "speaker": "user", "text": "x"}', "missing key", "key"),
    (b"c", None, "null value", "tombstone"),
])
def test_validate_event_rejects_with_reason_and_code(key, value, reason, code):
    with pytest.raises(InvalidEvent) as e:
        validate_event(key, value, max_text_chars=40)
    assert reason in e.value.reason
    assert e.value.code == Reason(code)  # the metric label and dead-letter header come from this, not the text


def test_validate_event_accepts_good_turn():
    t = validate_event(b"c", b'{"conversation_id": "c", "turn_id": "t", "speaker": "user", "text": "x"}', 40)
    assert t.text == "x"


def item(n):
    return CheckItem(conversation_id="c", turn_id=f"t{n}", context=[], claim=f"claim {n}")


def test_pipeline_exception_costs_only_the_item_that_raised():
    def check_turns(items):
        if any(i.turn_id == "t1" for i in items):
            raise RuntimeError("boom")
        return [TurnResult(i, [error_verdict(i, "fake ok")]) for i in items]

    out = [r.verdict for r in check_safely(check_turns, [item(0), item(1), item(2)])]
    assert [v.turn_id for v in out] == ["t0", "t1", "t2"]
    assert "boom" in out[1].status.reason and out[1].status.state == "error"
    assert out[1].claim_id == claim_id("c", "t1", "claim 1")
    parse_verdict(out[1].to_json())  # an error verdict is still a valid verdict


def test_deadletter_headers_round_trip():
    dl = DeadLetter("malformed_json", "bad", "chat.turns", 3, 42, b"k", b"\xff")
    back = DeadLetter.from_record(b"k", b"\xff", dl.headers())
    assert back == dl
    assert back.to_dict()["value"] == {"hex": "ff"}


def test_record_turns_preserve_ids_and_mark_only_the_response():
    class Rec:
        id, context, response = "r1", ["hi", "hello there", "what about x?"], "x is y."
    turns = record_turns(Rec)
    assert [t.turn_id for t in turns] == ["r1#ctx0", "r1#ctx1", "r1#ctx2", "r1#response"]
    assert {t.conversation_id for t in turns} == {"r1"}
    assert [t.check for t in turns] == [False, False, False, True]
    assert turns[-2].speaker == "user" and turns[-1].speaker == "assistant"
    assert response_claim_id(Rec) == claim_id("r1", "r1#response", "x is y.")


def test_kafka_client_options_from_settings():
    s = load_settings(kafka={"bootstrap": "kafka://h1:9092, h2:9093", "security_protocol": "SASL_PLAINTEXT",
                             "sasl_mechanism": "SCRAM-SHA-256", "sasl_username": "u", "sasl_password": "p"})
    assert bootstrap_list(s) == ["h1:9092", "h2:9093"]
    kp = kafka_python_kwargs(s)
    assert kp["sasl_mechanism"] == "SCRAM-SHA-256" and kp["sasl_plain_username"] == "u"
    assert aiokafka_kwargs(s)["security_protocol"] == "SASL_PLAINTEXT"
    fk = faust_broker_kwargs(s)
    assert fk["broker"] == "kafka://h1:9092;kafka://h2:9093"
    assert fk["broker_credentials"].mechanism.value == "SCRAM-SHA-256"
    assert "broker_credentials" not in faust_broker_kwargs(load_settings(kafka={"bootstrap": "h:1"}))


def test_settings_env_reproduces_settings(monkeypatch):
    s = load_settings(kafka={"bootstrap": "h:1"}, stream={"context_turns": 7, "check_roles": "bot"})
    for k, v in settings_env(s).items():
        monkeypatch.setenv(k, v)
    assert load_settings() == s


def test_bound_cuts_on_a_character_boundary_within_the_byte_limit():
    from streams.checking import bound

    assert bound("short", 1024) == "short"
    cut = bound("é" * 2000, 1024)
    assert len(cut.encode()) <= 1024 and cut.endswith("…") and cut.startswith("éé")


def test_scrubber_masks_url_credentials_and_configured_secrets():
    from streams.checking import Scrubber

    s = load_settings(retrieval={"opensearch_url": "https://admin:s3cr%40t@os:9200"},
                      kafka={"bootstrap": "h:1", "sasl_password": "kafka-pw-1"})
    scrub = Scrubber.from_settings(s)
    text = scrub("failed: https://admin:s3cr%40t@os:9200 (pw s3cr@t, kafka-pw-1) and ftp://u:p@elsewhere")
    assert "s3cr" not in text and "kafka-pw-1" not in text and "u:p@" not in text
    # the userinfo runs to the last '@' before the path: the "s3cr@t" later on the line is masked with it
    assert text.startswith("failed: https://***@") and "ftp://***@elsewhere" in text


def test_deadletter_keeps_a_bounded_prefix_and_says_so():
    dl = DeadLetter("too_large", "too big", "chat.turns", 1, 7, b"k" * 600_000, b"v" * 1_000_000).bounded(65536)
    assert len(dl.key) == len(dl.value) == 65536 and dl.truncated == "key=600000,value=1000000"
    back = DeadLetter.from_record(dl.key, dl.value, dl.headers())
    assert back.truncated == dl.truncated and (back.partition, back.offset) == (1, 7)
    assert (back.code, back.reason) == ("too_large", "too big")
    small = DeadLetter("key", "r", "t", 0, 0, b"k", b"v")
    assert small.bounded(65536) is small


def test_recency_evicts_least_recently_active_first():
    from streams.context import Recency, oldest_beyond

    r = Recency()
    for k in ["a", "b", "c"]:
        r.touch(k)
    r.touch("a")
    assert list(r.overflow(1)) == ["b", "c"] and len(r) == 1
    states = {"x": {"last_seen": 3.0}, "y": {"last_seen": 1.0}, "z": {"last_seen": 2.0}}
    assert oldest_beyond(states, 1) == ["y", "z"] and oldest_beyond(states, 3) == []


def test_verdict_log_window_bounds_memory_and_still_dedups_recent_claims():
    from streams.verdicts import VerdictLog

    log = VerdictLog(window=2)
    raws = [error_verdict(item(n), "x").to_json() for n in range(3)]
    for raw in raws:  # each new claim is passed on as the verdict it reads
        assert log.add_raw(raw) == parse_verdict(raw)
    assert len(log.verdicts) == 2 and log.forgotten == 1
    assert log.add_raw(raws[2]) is None and log.duplicates == 1  # a recent redelivery is dropped
    assert log.add_raw(raws[0]) == parse_verdict(raws[0])  # forgotten: passed on again (bounded memory's price)


def test_speaker_roles_normalised_before_matching():
    roles = parse_roles("Assistant,\uff22ot")
    assert roles == {"assistant", "bot"}
    assert should_check(turn("a", speaker="ASSISTANT"), roles)


def test_log_filter_scrubs_message_arguments_and_tracebacks():
    import logging
    import sys

    from streams.checking import Scrubber, ScrubbingFilter

    def record():
        try:
            raise RuntimeError("connect http://u:hunter22@db:1 failed")
        except RuntimeError:
            return logging.LogRecord("x", logging.ERROR, __file__, 1, "failed: %s (%d)", ("pw hunter22", 3), sys.exc_info())

    # Roomy bound: the whole traceback survives, scrubbed (independent of where the checkout lives).
    rec = record()
    assert ScrubbingFilter(Scrubber(["hunter22"]), max_bytes=1 << 16).filter(rec)
    text = logging.Formatter().format(rec)
    assert "hunter22" not in text and "RuntimeError: connect http://" in text and "pw *** (3)" in text
    # Tight bound: the line is cut to the byte limit, still without the secret.
    rec = record()
    assert ScrubbingFilter(Scrubber(["hunter22"]), max_bytes=60).filter(rec)
    text = logging.Formatter().format(rec)
    assert "hunter22" not in text and text.startswith("failed: pw *** (3)") and len(text.encode()) <= 60


class _TwoClaims:
    """A Checker stand-in: per turn, one verdict per claim and then the turn summary."""

    def check_turns(self, items):
        return [TurnResult(i, [error_verdict(i, f"claim {k} of {i.turn_id}") for k in range(2)]
                           + [error_verdict(i, "summary")]) for i in items]


class _Hangs:
    def __init__(self):
        import threading

        self.release = threading.Event()

    def check_turns(self, items):
        self.release.wait(30)
        return [TurnResult(i, [error_verdict(i, "late")]) for i in items]


def _turn_worker(checker, **stream):
    from streams.observability import Observability
    from streams.kafka.acks import Acks
    from streams.outbox import Outbox
    from streams.turn_worker import AttemptsTable, TurnWorker

    s = load_settings(stream=stream)
    obs = Observability(s)
    outbox = Outbox(None, s, dead_topic=None, obs=obs, acks=Acks(lambda: None))
    return TurnWorker(None, s, checker, outbox=outbox, table={},
                      attempts=AttemptsTable({}, 4), verdicts_topic=None, obs=obs)


def test_worker_publishes_every_verdict_of_a_claim_checker_in_order():
    import asyncio

    out = asyncio.run(_turn_worker(_TwoClaims()).run_pipeline([item(0), item(1)]))
    assert [(v.turn_id, v.status.reason) for v in out] == [
        ("t0", "claim 0 of t0"), ("t0", "claim 1 of t0"), ("t0", "summary"),
        ("t1", "claim 0 of t1"), ("t1", "claim 1 of t1"), ("t1", "summary")]


def test_worker_deadline_gives_error_verdicts_and_a_fresh_thread():
    import asyncio

    hangs = _Hangs()
    w = _turn_worker(hangs, batch_deadline_s=0.5)
    first = w.executor
    try:
        out = asyncio.run(w.run_pipeline([item(0), item(1)]))
    finally:
        hangs.release.set()
    assert [v.status.state for v in out] == ["error", "error"]
    assert all(v.status.reason.startswith(f"{Reason.DEADLINE}: ") for v in out)
    assert w.counters.deadline_expired == 1 and w.executor is not first


def test_attempts_table_counts_per_record_and_forgets():
    from types import SimpleNamespace

    from streams.turn_worker import AttemptsTable, partition_of

    table = {}
    a = AttemptsTable(table, partitions=4)
    assert [partition_of(a.key(p), 4) for p in range(4)] == [0, 1, 2, 3]  # counts live with their partition
    m1, m2 = (SimpleNamespace(topic="chat.turns", partition=0, offset=n) for n in (7, 8))
    m3 = SimpleNamespace(topic="chat.turns", partition=3, offset=7)
    a.set_many([(m1, a.prior(m1) + 1), (m2, 1), (m3, 1)])
    a.set_many([(m1, a.prior(m1) + 1)])
    assert (a.prior(m1), a.prior(m2), a.prior(m3)) == (2, 1, 1)
    assert table == {a.key(0): {"chat.turns/0/7": 2, "chat.turns/0/8": 1}, a.key(3): {"chat.turns/3/7": 1}}
    a.set_many([(m1, None), (m3, None)])
    assert table == {a.key(0): {"chat.turns/0/8": 1}}
    a.set_many([(m2, None)])
    assert table == {}  # a key holding nothing is deleted (the changelog gets a tombstone)


def test_worker_weighs_a_record_by_whether_it_will_be_checked():
    """What `take_steps` counts toward a step's turns to check: the role or the `check` flag, and 0
    for anything malformed (it is dead-lettered by handle, the weight only ends a step early)."""
    from types import SimpleNamespace

    w = _turn_worker(_TwoClaims())

    def weight(value: bytes) -> int:
        return w.weigh(SimpleNamespace(message=SimpleNamespace(value=value)))

    assert weight(turn("a", speaker="Assistant").to_json()) == 1
    assert weight(turn("a", speaker="user").to_json()) == 0
    assert weight(turn("a", speaker="user", check=True).to_json()) == 1
    assert weight(turn("a", speaker="bot", check=False).to_json()) == 0
    assert [weight(v) for v in (b"{not json", b"[1, 2]", b'{"speaker": 5}', None)] == [0, 0, 0, 0]


def test_an_unchanged_status_is_not_printed_again():
    w = _turn_worker(_TwoClaims())
    first = w.new_status({0, 1})
    assert first.startswith("dialcheck status:") and "partitions=0,1" in first
    assert w.new_status({0, 1}) is None  # idle: nothing new to say
    w.counters.events += 1
    assert "events=1" in w.new_status({0, 1})
    assert "partitions=2" in w.new_status({2})
