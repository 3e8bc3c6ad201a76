"""Turns and feedback as chat backends produce them: librdkafka (confluent-kafka) with every
compression codec Kafka defines, the idempotent producer and record headers, into one real worker
on the embedded Tansu broker; verdicts read back with librdkafka too. And record batches that do not
decode (a corrupt compressed payload, a bad CRC): dead-lettered, the worker goes on.

Why: one zstd turn once crashed the worker in a loop (aiokafka had no zstd library, and the
fetcher's error stopped Faust), and the partition stayed stuck with no dead letter saying why.
The model-free stand-in Checker (tests/stream_standin.py): the NLP is not under test here.

librdkafka and the embedded broker: confluent-kafka 2.16.1 (librdkafka 2.16.0) talks to it with
default settings (docs/integration.md says what older clients need)."""
from __future__ import annotations

import asyncio
import struct
import time
import urllib.request

import orjson
import pytest

from schemas import ChatTurn, claim_id, parse_verdict
from streams.feedback_store import FeedbackStore
from streams.kafka_config import aiokafka_kwargs
from streams.observability import METRICS_MARKER
from streams.verdicts import TopicReader, collect_verdicts, end_offsets, read_dead_letters
from tests.stream_standin import context_digest
from tests.waiting import wait_until

STANDIN = "tests.stream_standin:create"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_BITS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
PER_CODEC = 3  # conversations per codec: their turns share compressed multi-record batches


# -- record batches built by hand (what a broken or future producer could write) --------------------

def record_batch(values: list[bytes], codec_bits: int = 0, payload: bytes | None = None, bad_crc: bool = False,
                 key: bytes = b"k") -> bytes:
    """A v2 record batch of `values` with the codec bits `codec_bits` in its attributes; `payload`
    replaces the records section (e.g. bytes no codec can decompress); the CRC is right unless `bad_crc`."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder
    from aiokafka.record.util import calc_crc32c

    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, v in enumerate(values):
        b.append(i, timestamp=None, key=key, value=v, headers=[])
    buf = bytearray(b.build())
    if payload is not None:
        buf = buf[:61] + payload  # 61: the v2 batch header
        struct.pack_into(">i", buf, 8, len(buf) - 12)
    attributes = struct.unpack_from(">h", buf, 21)[0]
    struct.pack_into(">h", buf, 21, (attributes & ~0x07) | codec_bits)
    struct.pack_into(">I", buf, 17, calc_crc32c(bytes(buf[21:])))
    if bad_crc:
        buf[-1] ^= 0xFF
    return bytes(buf)


def compressed_batch(values: list[bytes], codec: str, base_offset: int = 0) -> bytes:
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=CODEC_BITS[codec], is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, v in enumerate(values):
        b.append(i, timestamp=None, key=b"k", value=v, headers=[])
    buf = bytearray(b.build())
    struct.pack_into(">q", buf, 0, base_offset)
    return bytes(buf)


def produce_raw(bootstrap: str, topic: str, partition: int, batch: bytes) -> int:
    """Send one ready-made record batch as it is (aiokafka's client, a ProduceRequest); its base offset."""
    from aiokafka.client import AIOKafkaClient
    from aiokafka.protocol.produce import ProduceRequest
    from aiokafka.structs import TopicPartition

    async def send() -> int:
        client = AIOKafkaClient(bootstrap_servers=bootstrap)
        await client.bootstrap()
        try:
            await client.force_metadata_update()
            node = client.cluster.leader_for_partition(TopicPartition(topic, partition))
            resp = await client.send(node, ProduceRequest(None, -1, 30000, [(topic, [(partition, batch)])]))
            (_, parts), = resp.topics
            _, error, offset, *_ = parts[0]
            assert error == 0, f"broker refused the batch: error {error}"
            return offset
        finally:
            await client.close()

    return asyncio.run(send())


def guarded(batches: list[bytes], guard: bool = True) -> list:
    """Every record aiokafka's fetcher yields from `batches` (one partition's fetch), through
    streams/kafka/internals.py's GuardedPartitionRecords; `guard=False` is any other consumer."""
    from aiokafka.record.memory_records import MemoryRecords
    from aiokafka.structs import TopicPartition

    from streams.kafka.internals import KEEP_BYTES, GuardedPartitionRecords

    records = MemoryRecords(b"".join(batches))
    return list(GuardedPartitionRecords(TopicPartition("t", 0), records, [], 0, None,
                                        KEEP_BYTES if guard else None, True, 0))


# -- unit: the fetcher's guard, no broker ------------------------------------------------------------

@pytest.mark.unit
def test_every_kafka_codec_decodes_in_aiokafka_and_kafka_python():
    import aiokafka.codec
    import kafka.codec

    for lib in (aiokafka.codec, kafka.codec):
        assert lib.has_gzip() and lib.has_snappy() and lib.has_lz4() and lib.has_zstd(), lib.__name__
    batches, n = [], 0
    for codec in CODECS:
        batches.append(compressed_batch([f"{codec}-{i}".encode() for i in range(3)], codec, base_offset=n))
        n += 3
    got = [(r.offset, r.value) for r in guarded(batches)]
    assert got == [(i, f"{codec}-{j}".encode()) for i, (codec, j) in enumerate((c, j) for c in CODECS for j in range(3))]


@pytest.mark.unit
def test_an_undecodable_batch_becomes_one_marker_and_the_fetch_goes_on():
    from aiokafka.errors import UnsupportedCodecError

    from streams.kafka.internals import undecodable_marker

    def at(batch: bytes, offset: int) -> bytes:
        buf = bytearray(batch)
        struct.pack_into(">q", buf, 0, offset)
        return bytes(buf)  # the base offset is outside the CRC

    batches = [at(record_batch([b"good-0"]), 0),
               at(record_batch([b"x", b"y"], codec_bits=5), 1),                     # a codec Kafka does not define
               at(record_batch([b"z"], codec_bits=4, payload=b"not zstd at all"), 3),  # zstd bits, corrupt payload
               at(record_batch([b"w", b"v"], bad_crc=True), 4),                      # bad CRC
               at(record_batch([b"good-6"]), 6)]
    got = guarded(batches)
    assert [(r.offset, r.value) for r in got if undecodable_marker(r) is None] == [(0, b"good-0"), (6, b"good-6")]
    markers = {r.offset: undecodable_marker(r) for r in got if undecodable_marker(r) is not None}
    assert {off: last for off, (last, _) in markers.items()} == {1: 2, 3: 3, 4: 5}
    assert "codec" in markers[1][1] and "CRC" in markers[4][1]
    assert [r.offset for r in got] == sorted(r.offset for r in got)  # each marker at its place in the partition
    with pytest.raises(UnsupportedCodecError):  # any other aiokafka consumer: aiokafka's own behaviour
        guarded(batches, guard=False)


# -- broker: librdkafka producers and consumers against one worker -----------------------------------

@pytest.fixture(scope="module")
def codec_settings(broker_settings, tmp_path_factory):
    return broker_settings(stream={"app_id": "codecs", "status_interval_s": 1.0,
                                   "feedback_store": str(tmp_path_factory.mktemp("codecs") / "feedback.sqlite3")})


@pytest.fixture(scope="module")
def worker(codec_settings, start_worker):
    return start_worker(codec_settings, STANDIN)


def librdkafka_producer(settings, codec: str):
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": settings.kafka.bootstrap, "compression.type": codec,
                     "enable.idempotence": True, "linger.ms": 20})


def produce_all(settings, codec: str, records: list[tuple[str, bytes, bytes]]) -> list:
    """(topic, key, value) records with `codec`, idempotent, each with headers; their delivery reports."""
    producer, reports = librdkafka_producer(settings, codec), []
    for topic, key, value in records:
        producer.produce(topic, key=key, value=value, headers=[("traceparent", b"00-4bf92f35-00f067aa-01"),
                                                               ("codec", codec.encode())],
                         on_delivery=lambda err, msg: reports.append((err, msg)))
    assert producer.flush(30) == 0
    assert [err for err, _ in reports if err is not None] == [] and len(reports) == len(records)
    return [msg for _, msg in reports]


def librdkafka_verdicts(settings, start: dict[int, int], expected: set[str], alive, timeout_s: float = 180) -> list:
    """Every verdict on chat.verdicts from `start` (confluent-kafka consumer), until each expected claim
    id arrived and the end offsets as of then are read."""
    from confluent_kafka import Consumer, TopicPartition

    topic = settings.kafka.topic_verdicts
    c = Consumer({"bootstrap.servers": settings.kafka.bootstrap, "group.id": "codec-test-reader",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        parts = sorted(c.list_topics(topic, timeout=10).topics[topic].partitions)
        c.assign([TopicPartition(topic, p, start.get(p, 0)) for p in parts])
        got, end = [], None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and alive():
            msg = c.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(parse_verdict(msg.value()))
            if end is None and expected <= {v.claim_id for v in got}:
                end = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
            if end is not None and all(pos.offset >= end[pos.partition] for pos in
                                       c.position([TopicPartition(topic, p) for p in parts])):
                return got
        raise AssertionError(f"{len(expected - {v.claim_id for v in got})} verdicts missing; worker alive: {alive()}")
    finally:
        c.close()


@pytest.mark.timeout(600)
def test_turns_and_feedback_from_librdkafka_get_one_verdict_each_whatever_the_codec(codec_settings, worker):
    s = codec_settings
    start_v = end_offsets(s, s.kafka.topic_verdicts)
    start_turns = end_offsets(s, s.kafka.topic_turns)
    expected = {}  # claim id → digest of its context
    for codec in CODECS:
        records = []
        for i in range(PER_CODEC):
            conv = f"codec-{codec}-{i}"
            ctx = ChatTurn(conv, f"{conv}#u", "user", f"Tell me about {codec} number {i}.", check=False)
            resp = ChatTurn(conv, f"{conv}#a", "assistant", f"The {codec} codec was tried {i} times.", check=True)
            records += [(s.kafka.topic_turns, conv.encode(), t.to_json()) for t in (ctx, resp)]
            expected[claim_id(conv, resp.turn_id, resp.text)] = context_digest([ctx.text])
        produce_all(s, codec, records)
    verdicts = librdkafka_verdicts(s, start_v, set(expected), worker.alive)
    counts = {cid: sum(v.claim_id == cid for v in verdicts) for cid in expected}
    assert counts == dict.fromkeys(expected, 1)  # each turn verdicted, once
    by_id = {v.claim_id: v for v in verdicts}
    assert all(by_id[c].model_versions["context_sha1"] == d for c, d in expected.items())  # with its context

    feedback = [(s.kafka.topic_feedback, v.conversation_id.encode(), orjson.dumps(
        {"conversation_id": v.conversation_id, "turn_id": v.turn_id, "claim_id": v.claim_id, "label_shown": v.label,
         "judgement": "right", "source": "annotator", "ts": 1_000_000.0 + i, "feedback_id": f"codec-fb-{i}",
         "shown": True})) for i, v in enumerate(by_id[c] for c in expected)]
    for n, codec in enumerate(CODECS):
        produce_all(s, codec, feedback[n * PER_CODEC:(n + 1) * PER_CODEC])

    def stored() -> int:
        with FeedbackStore(s.stream.feedback_store) as st:
            return st.counts()["feedback"]
    wait_until(lambda: stored() == len(feedback), 120, "feedback from every codec stored")

    # the other consumers decode every codec too: `dialcheck verdicts`' reader (kafka-python) and the
    # live page's (aiokafka, as streams/ui/server.py builds it)
    with TopicReader(s, s.kafka.topic_turns, start_turns) as r:
        assert len([rec for rec in r.drain() if rec.value]) == 2 * PER_CODEC * len(CODECS)
    assert asyncio.run(aiokafka_read(s, s.kafka.topic_feedback)) == len(feedback)
    assert worker.alive()


async def aiokafka_read(settings, topic: str) -> int:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
                                **aiokafka_kwargs(settings))
    await consumer.start()
    try:
        n, idle = 0, 0
        while idle < 3:
            batches = await consumer.getmany(timeout_ms=1000)
            got = sum(len(v) for v in batches.values())
            n, idle = n + got, 0 if got else idle + 1
        return n
    finally:
        await consumer.stop()


def committed(settings) -> dict[int, int]:
    from kafka import KafkaAdminClient

    from streams.kafka_config import kafka_python_kwargs

    admin = KafkaAdminClient(**kafka_python_kwargs(settings))
    try:
        group = settings.stream.app_id
        return {tp.partition: om.offset for tp, om in admin.list_group_offsets(group)[group].items()
                if tp.topic == settings.kafka.topic_turns}
    finally:
        admin.close()


@pytest.mark.timeout(600)
def test_undecodable_batches_are_dead_lettered_and_the_worker_goes_on(codec_settings, worker):
    s = codec_settings
    start_d, start_v = end_offsets(s, s.kafka.topic_deadletter), end_offsets(s, s.kafka.topic_verdicts)
    conv = "undecodable-1"
    ctx = ChatTurn(conv, f"{conv}#u", "user", "Is the record batch fine?", check=False)
    resp = ChatTurn(conv, f"{conv}#a", "assistant", "The batch after the broken ones is fine.", check=True)
    (msg,) = produce_all(s, "zstd", [(s.kafka.topic_turns, conv.encode(), ctx.to_json())])
    part = msg.partition()
    bad = {}  # first offset → last offset of each broken batch
    for batch, n in ((record_batch([b"x", b"y"], codec_bits=4, payload=b"these bytes are not zstd", key=conv.encode()), 2),
                     (record_batch([b"z"], bad_crc=True, key=conv.encode()), 1)):
        first = produce_raw(s.kafka.bootstrap, s.kafka.topic_turns, part, batch)
        bad[first] = first + n - 1
    produce_all(s, "lz4", [(s.kafka.topic_turns, conv.encode(), resp.to_json())])
    cid = claim_id(conv, resp.turn_id, resp.text)
    vlog = collect_verdicts(s, {cid}, 180, start=start_v, alive=worker.alive)
    assert vlog.verdicts[cid].model_versions["context_sha1"] == context_digest([ctx.text])  # nothing broken got in

    want = {(part, off) for first, last in bad.items() for off in range(first, last + 1)}

    def dead() -> list:
        return [d for d in read_dead_letters(s, start_d) if d.code == "undecodable"]
    wait_until(lambda: {(d.partition, d.offset) for d in dead()} >= want, 60, "dead letters of the broken batches")
    letters = dead()
    assert sorted((d.partition, d.offset) for d in letters) == sorted(want)  # each offset once
    assert all(d.topic == s.kafka.topic_turns and "undecodable record batch" in d.reason for d in letters)

    # a broken batch last in its partition: dead-lettered, and the group's commit moves past it
    last_first = produce_raw(s.kafka.bootstrap, s.kafka.topic_turns, part,
                             record_batch([b"q"], codec_bits=3, payload=b"not lz4 either", key=conv.encode()))
    wait_until(lambda: committed(s).get(part, -1) >= last_first + 1, 60, "commit past the last broken batch")
    assert [(d.partition, d.offset) for d in dead() if d.offset == last_first] == [(part, last_first)]
    assert worker.alive()

    base = worker.wait_for(METRICS_MARKER, 30).split(METRICS_MARKER, 1)[1].strip().rsplit("/metrics", 1)[0]
    with urllib.request.urlopen(f"{base}/readyz", timeout=10) as r:
        ready = orjson.loads(r.read())
    assert ready["undecodable_batches"] == 3 and "@" in ready["last_undecodable"]
    with urllib.request.urlopen(f"{base}/metrics", timeout=10) as r:
        metrics = r.read().decode()
    assert "dialcheck_undecodable_batches_total 3.0" in metrics
    assert 'dialcheck_dead_letters_total{reason="undecodable"} 4.0' in metrics
