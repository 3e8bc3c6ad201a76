#!/usr/bin/env python3
"""A chat backend with confluent-kafka (librdkafka): produce one conversation, then read its verdict.

librdkafka is what most chat backends produce with (confluent-kafka in Python, node-rdkafka, the Go
and .NET clients), usually with compression and the idempotent producer on: this example does both
(zstd here; gzip, snappy, lz4 and none work the same) and adds record headers, which dialcheck
ignores. Only confluent-kafka and the standard library: copy it into your app.

    python examples/confluent_chat_backend.py --bootstrap 127.0.0.1:9092 --conversation demo-1 [--timeout 300]

Prints one JSON line per verdict of the conversation (the fields examples/consume_verdicts.py
prints), or `{"dead_letter": ...}` for a turn the worker refused. Verdicts are at-least-once:
deduplicate by claim_id.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer

CONNECT_TIMEOUT_S = 8.0  # an unreachable broker is one line after 8 s, not librdkafka's endless retries
QUIET = {"log_level": 0}  # librdkafka's own connection-refused lines go to stderr otherwise


class NoBroker(Exception):
    """Nothing answered at the bootstrap address within CONNECT_TIMEOUT_S."""


def turn(conversation_id: str, turn_id: str, speaker: str, text: str) -> dict:
    """A chat turn as schemas/chat_turn.schema.json describes it; `ts` is the send time in seconds."""
    return {"conversation_id": conversation_id, "turn_id": turn_id, "speaker": speaker, "text": text,
            "ts": time.time()}


def for_display(v: dict) -> dict:
    """What a chat UI shows next to the checked turn (docs/integration.md, "What to show users")."""
    probs, best = v.get("probabilities") or {}, (v.get("evidence") or [None])[0]
    return {"conversation_id": v["conversation_id"], "turn_id": v["turn_id"], "claim_id": v["claim_id"],
            "label": v["label"], "confidence": round(probs.get(v["label"], 0.0), 3),
            "status": v["status"]["state"], "reason": v["status"].get("reason"),
            "evidence_title": best and best["title"], "evidence": best and best["window"],
            "display": v.get("display"), "source_url": best and best.get("url"), "latency_ms": v.get("latency_ms")}


def produce(bootstrap: str, topic: str, turns: list[dict], compression: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": compression,
                         "enable.idempotence": True,  # acks=all, no duplicates on retries, order kept
                         "linger.ms": 5, **QUIET})
    try:
        producer.list_topics(topic, timeout=CONNECT_TIMEOUT_S)
    except KafkaException:
        raise NoBroker from None
    failed = []
    for t in turns:
        # the key keeps a conversation on one partition, so its turns are read (and their context built) in order
        producer.produce(topic, key=t["conversation_id"].encode("utf-8"), value=json.dumps(t).encode("utf-8"),
                         headers=[("source", b"confluent-example")],
                         on_delivery=lambda err, _msg: err is not None and failed.append(err))
    if producer.flush(30) or failed:
        raise KafkaException(failed[0] if failed else "turns not delivered within 30 s")


def consume(bootstrap: str, conversation: str, verdicts_topic: str, deadletter_topic: str, count: int,
            timeout_s: float) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"confluent-example-{conversation}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": True,
                         # the embedded broker holds a JoinGroup for half the session timeout (45 s by default)
                         "session.timeout.ms": 10000, **QUIET})
    consumer.subscribe([verdicts_topic, deadletter_topic])
    seen: set[str] = set()  # claim ids already shown (redeliveries repeat them)
    deadline = time.monotonic() + timeout_s
    try:
        while len(seen) < count:
            if time.monotonic() > deadline:
                print(json.dumps({"timeout": True, "verdicts": len(seen)}))
                return 1
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            key = msg.key().decode("utf-8", "replace") if msg.key() else None
            if key != conversation:
                continue
            if msg.topic() == deadletter_topic:
                headers = {k: v.decode("utf-8", "replace") for k, v in msg.headers() or []}
                print(json.dumps({"dead_letter": key, "code": headers.get("dialcheck.reason.code"),
                                  "reason": headers.get("dialcheck.reason")}), flush=True)
                continue
            v = json.loads(msg.value())
            if v["claim_id"] not in seen:
                seen.add(v["claim_id"])
                print(json.dumps(for_display(v), ensure_ascii=False), flush=True)
    finally:
        consumer.close()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default=os.environ.get("DIALCHECK_KAFKA_BOOTSTRAP"),
                    help="Kafka bootstrap HOST:PORT (default: DIALCHECK_KAFKA_BOOTSTRAP)")
    ap.add_argument("--conversation", default=None, help="conversation id (default: a new uuid)")
    ap.add_argument("--compression", default="zstd", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    ap.add_argument("--turns-topic", default="chat.turns")
    ap.add_argument("--verdicts-topic", default="chat.verdicts")
    ap.add_argument("--deadletter-topic", default="chat.deadletter")
    ap.add_argument("--timeout", type=float, default=300, help="give up waiting for the verdict after this many seconds")
    args = ap.parse_args()
    if not args.bootstrap:
        ap.exit(2, f"{ap.prog}: no broker: pass --bootstrap HOST:PORT or set DIALCHECK_KAFKA_BOOTSTRAP\n")
    conv = args.conversation or f"conv-{uuid.uuid4().hex[:8]}"
    turns = [turn(conv, f"{conv}/1", "user", "Do you know where Elvis Presley was born?"),
             turn(conv, f"{conv}/2", "assistant", "Yes, he was born in Tupelo, Mississippi.")]
    produce(args.bootstrap, args.turns_topic, turns, args.compression)
    # one verdict: the assistant turn is checked (DIALCHECK_CHECK_ROLES), the user turn is its context
    return consume(args.bootstrap, conv, args.verdicts_topic, args.deadletter_topic, 1, args.timeout)


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except NoBroker:
        print(f"{Path(__file__).name}: no Kafka broker answers at the bootstrap address "
              "(--bootstrap / DIALCHECK_KAFKA_BOOTSTRAP)", file=sys.stderr)
        raise SystemExit(2) from None
    except KafkaException as e:
        print(f"{Path(__file__).name}: {e.args[0] if e.args else e}", file=sys.stderr)
        raise SystemExit(1) from None
