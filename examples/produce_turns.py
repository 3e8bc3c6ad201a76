#!/usr/bin/env python3
"""Produce one chat conversation to dialcheck's input topic, as a chat backend would.

Only kafka-python and the standard library: copy it into your app. Each turn is one JSON record
on `chat.turns`, keyed by the conversation id (bytes), in the order the turns happened. Every
assistant turn is checked (speaker role in DIALCHECK_CHECK_ROLES, default "assistant,bot"); the
user turns are context. `"check": true/false` on a turn overrides the role. It prints the turn ids
the worker will check (one verdict each, or more when a turn holds several claims).

    python examples/produce_turns.py --bootstrap 127.0.0.1:9092 --conversation demo-1
    python examples/produce_turns.py --bootstrap 127.0.0.1:9092 \
        --turn user "Where was Elvis born?" --turn assistant "He was born in Memphis."

Without `--turn`, it sends an example exchange (a user question, then the assistant's answer).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
import os
import time
import uuid

from kafka import KafkaProducer
from kafka.errors import KafkaTimeoutError


def turn(conversation_id: str, turn_id: str, speaker: str, text: str, check: bool | None = None) -> dict:
    """A chat turn as schemas/chat_turn.schema.json describes it."""
    t = {"conversation_id": conversation_id, "turn_id": turn_id, "speaker": speaker, "text": text,
         "ts": time.time()}  # seconds since epoch; echoed back by newer verdicts for latency
    if check is not None:
        t["check"] = check
    return t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default=os.environ.get("DIALCHECK_KAFKA_BOOTSTRAP"),
                    help="Kafka bootstrap HOST:PORT (default: DIALCHECK_KAFKA_BOOTSTRAP)")
    ap.add_argument("--topic", default="chat.turns")
    ap.add_argument("--conversation", default=None, help="conversation id (default: a new uuid)")
    ap.add_argument("--turn", nargs=2, action="append", metavar=("SPEAKER", "TEXT"), default=None,
                    help="a turn to send, in order (repeat it: --turn user '...' --turn assistant '...'); "
                         "default: an example exchange")
    args = ap.parse_args()
    if not args.bootstrap:
        ap.exit(2, f"{ap.prog}: no broker: pass --bootstrap HOST:PORT or set DIALCHECK_KAFKA_BOOTSTRAP\n")
    conv = args.conversation or f"conv-{uuid.uuid4().hex[:8]}"

    said = args.turn or [("user", "Do you know where Elvis Presley was born?"),
                         ("assistant", "Yes, he was born in Tupelo, Mississippi.")]
    if any(not speaker.strip() or not text.strip() for speaker, text in said):
        ap.exit(2, f"{ap.prog}: --turn needs a speaker and a text, neither empty\n")
    turns = [turn(conv, f"{conv}/{i}", speaker, text) for i, (speaker, text) in enumerate(said, 1)]
    # acks="all": a turn counts as sent once the broker has it; the key keeps a conversation on one
    # partition, so its turns are read (and their context built) in order
    producer = KafkaProducer(bootstrap_servers=args.bootstrap, bootstrap_timeout_ms=8000, acks="all")
    for t in turns:
        producer.send(args.topic, key=t["conversation_id"].encode("utf-8"),
                      value=json.dumps(t).encode("utf-8")).get(timeout=30)
    producer.flush()
    producer.close()
    roles = {r.strip().lower() for r in os.environ.get("DIALCHECK_CHECK_ROLES", "assistant,bot").split(",")}
    checked = [t["turn_id"] for t in turns if t["speaker"].strip().lower() in roles]
    print(json.dumps({"conversation_id": conv, "turns": len(turns), "checked_turns": checked}))
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KafkaTimeoutError:  # no broker within bootstrap_timeout_ms (8 s here; kafka-python's default is 30 s)
        print(f"{Path(__file__).name}: no Kafka broker answers at the bootstrap address "
              "(--bootstrap / DIALCHECK_KAFKA_BOOTSTRAP)", file=sys.stderr)
        raise SystemExit(2) from None
