"""The verdict reader cannot hang: every kafka-python call of a TopicReader is bounded, a stalled
reader raises ReaderStalled, and collect_verdicts goes on with a fresh reader from the offsets it
had reached, so no verdict is lost and no test waits forever.

A real broker and real records; the hang itself is simulated (kafka-python's `poll()` hang was
seen about one run in ten and cannot be produced on demand): the first `poll` blocks forever."""
from __future__ import annotations

import threading

import pytest

from streams.checking import error_verdict
from streams.verdicts import ReaderStalled, TopicReader, collect_verdicts, end_offsets
from schemas.items import CheckItem

pytestmark = pytest.mark.broker


@pytest.fixture(scope="module")
def settings_reader(broker_settings):
    return broker_settings(stream={"app_id": "reader"})


def publish(settings, n: int, prefix: str) -> set[str]:
    from kafka import KafkaProducer

    ids = set()
    producer = KafkaProducer(bootstrap_servers=settings.kafka.bootstrap, acks="all")
    try:
        for i in range(n):
            v = error_verdict(CheckItem(f"{prefix}{i}", "t", [], f"claim {i}"), "test")
            ids.add(v.claim_id)
            producer.send(settings.kafka.topic_verdicts, key=v.conversation_id.encode(), value=v.to_json())
        producer.flush()
    finally:
        producer.close()
    return ids


@pytest.fixture
def hang_first_poll(monkeypatch):
    """kafka-python's KafkaConsumer.poll blocks forever on its first call in this test, then works."""
    from kafka import KafkaConsumer

    real, calls, release = KafkaConsumer.poll, [], threading.Event()

    def poll(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            release.wait()  # the hang (released at teardown so the abandoned thread ends)
            return {}
        return real(self, *args, **kwargs)

    monkeypatch.setattr(KafkaConsumer, "poll", poll)
    yield calls
    release.set()


def test_a_stalled_poll_raises_instead_of_hanging(settings_reader, hang_first_poll):
    with TopicReader(settings_reader, settings_reader.kafka.topic_verdicts, call_timeout_s=1.0) as reader:
        with pytest.raises(ReaderStalled, match="poll did not return"):
            reader.poll(0.1)
        with pytest.raises(ReaderStalled, match="abandoned"):  # unusable from now on, never half-working
            reader.end_offsets()


def test_collect_verdicts_resumes_after_a_stall_and_loses_nothing(settings_reader, hang_first_poll):
    start = end_offsets(settings_reader, settings_reader.kafka.topic_verdicts)
    ids = publish(settings_reader, 5, "stall-")
    log = collect_verdicts(settings_reader, ids, timeout_s=60, start=start, call_timeout_s=2.0)
    assert log.stalls == 1 and len(hang_first_poll) >= 2
    assert ids <= log.verdicts.keys() and log.duplicates == 0


def test_verdicts_gold_scores_the_topic_and_refuses_a_hostile_gold_file(settings_reader, tmp_path, capsys):
    """`dialcheck verdicts --gold` on a real topic: records it cannot score (these tests' error
    verdicts carry no protocol) are counted and left out, the rest scored with the coverage line;
    a gold file with an unknown label is one line, exit 2."""
    import json

    from kafka import KafkaProducer

    from dialcheck.cli import main
    from schemas.items import DialFactRecord, response_claim_id

    gold_rows = [{"id": f"vg{i}", "context": ["Where is Paris?"], "response": text, "response_label": label}
                 for i, (text, label) in enumerate([("Paris is in France.", "SUPPORTS"), ("Paris is in Peru.", "REFUTES")])]
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(json.dumps(r) + "\n" for r in gold_rows))
    rec = DialFactRecord(id="vg0", context_id="vg0", context=gold_rows[0]["context"], response=gold_rows[0]["response"],
                         label="SUPPORTS", type_label="", evidence=[])
    item = CheckItem("vg0", "vg0#response", rec.context, rec.response)
    v = error_verdict(item, "test")
    assert v.claim_id == response_claim_id(rec)
    v.label, v.model_versions = "SUPPORTS", {"protocol": "fv", "surface_mode": "r0"}
    v.status.state, v.status.reason = "ok", None
    producer = KafkaProducer(bootstrap_servers=settings_reader.kafka.bootstrap, acks="all")
    producer.send(settings_reader.kafka.topic_verdicts, key=b"vg0", value=v.to_json())
    producer.flush()
    producer.close()
    publish(settings_reader, 2, "foreign-")  # no protocol: cannot be scored

    code = main(["verdicts", "--broker", settings_reader.kafka.bootstrap, "--gold", str(gold)])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out.splitlines()[-1].strip() == "r0   1 of 2 scored, 1 missing"
    assert "verdicts on chat.verdicts cannot be scored and are left out" in out.err

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**gold_rows[0], "response_label": "BANANA"}) + "\n")
    code = main(["verdicts", "--broker", settings_reader.kafka.bootstrap, "--gold", str(bad)])
    out = capsys.readouterr()
    assert code == 2 and out.out == "" and out.err == f"dialcheck: {bad}:1: unknown response_label 'BANANA' " \
        "(one of SUPPORTS, REFUTES, NOT ENOUGH INFO)\n"
