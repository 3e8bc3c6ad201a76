#!/usr/bin/env python3
"""Consume dialcheck's verdicts (and dead letters) as a chat app would, and decide what to show.

Only kafka-python and the standard library. Verdicts arrive on `chat.verdicts` keyed by
conversation id; delivery is at-least-once, so the same verdict can come twice: deduplicate by
`claim_id`. Rejected input arrives on `chat.deadletter` with a machine code in the
`dialcheck.reason.code` header, the reason for people in `dialcheck.reason`, and the original bytes
as the value.

    python examples/consume_verdicts.py --bootstrap 127.0.0.1:9092 [--conversation ID --count 1]

Prints one JSON line per new verdict: what a chat UI needs (label, confidence, the best evidence).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from kafka import KafkaConsumer
from kafka.errors import KafkaTimeoutError


def for_display(v: dict) -> dict:
    """The fields a chat UI shows next to the checked turn (docs/integration.md, "What to show")."""
    probs = v.get("probabilities") or {}
    best = (v.get("evidence") or [None])[0]
    return {
        "conversation_id": v["conversation_id"], "turn_id": v["turn_id"], "claim_id": v["claim_id"],
        "label": v["label"], "confidence": round(probs.get(v["label"], 0.0), 3),
        "status": v["status"]["state"], "reason": v["status"].get("reason"),
        "evidence_title": best and best["title"], "evidence": best and best["window"],
        "checked_text": v["surface"]["text"],
        # schema 2.1: the display hint (show the badge or not, its tone and confidence band) and
        # the evidence's source link; absent from older workers' verdicts
        "display": v.get("display"), "source_url": best and best.get("url"),
        # produce→publish in ms (from the turn's ts, else the record timestamp; newer workers only)
        "latency_ms": v.get("latency_ms"), "ts": v.get("ts"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default=os.environ.get("DIALCHECK_KAFKA_BOOTSTRAP"),
                    help="Kafka bootstrap HOST:PORT (default: DIALCHECK_KAFKA_BOOTSTRAP)")
    ap.add_argument("--verdicts-topic", default="chat.verdicts")
    ap.add_argument("--deadletter-topic", default="chat.deadletter")
    ap.add_argument("--group", default=None, help="consumer group (default: none, read from the start)")
    ap.add_argument("--conversation", default=None, help="only this conversation")
    ap.add_argument("--count", type=int, default=0, help="stop after this many verdicts (0: run until Ctrl-C)")
    ap.add_argument("--timeout", type=float, default=0, help="give up after this many seconds (0: never)")
    args = ap.parse_args()
    if not args.bootstrap:
        ap.exit(2, f"{ap.prog}: no broker: pass --bootstrap HOST:PORT or set DIALCHECK_KAFKA_BOOTSTRAP\n")

    consumer = KafkaConsumer(args.verdicts_topic, args.deadletter_topic, bootstrap_servers=args.bootstrap,
                             bootstrap_timeout_ms=8000, group_id=args.group, auto_offset_reset="earliest", enable_auto_commit=args.group is not None)
    seen: set[str] = set()  # claim ids already shown (redeliveries repeat them)
    deadline = time.monotonic() + args.timeout if args.timeout else None
    # Ctrl-C (or SIGTERM) ends the loop after the current poll, so close() runs undisturbed: a
    # KeyboardInterrupt raised inside kafka-python (poll or close) printed a traceback
    stopping: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, _frame: stopping.append(signum))
    if not args.count:
        print(f"reading {args.verdicts_topic} and {args.deadletter_topic} (Ctrl-C to stop)", file=sys.stderr,
              flush=True)
    try:
        while not stopping and not (args.count and len(seen) >= args.count):
            if deadline and time.monotonic() > deadline:
                print(json.dumps({"timeout": True, "verdicts": len(seen)}))
                return 1
            for records in consumer.poll(timeout_ms=500).values():
                for rec in records:
                    key = rec.key.decode("utf-8", "replace") if rec.key else None
                    if args.conversation and key != args.conversation:
                        continue
                    if rec.topic == args.deadletter_topic:
                        headers = {k: v.decode("utf-8", "replace") for k, v in rec.headers or []}
                        print(json.dumps({"dead_letter": key, "code": headers.get("dialcheck.reason.code"),
                                          "reason": headers.get("dialcheck.reason")}))
                        continue
                    v = json.loads(rec.value)
                    if v["claim_id"] in seen:
                        continue
                    seen.add(v["claim_id"])
                    print(json.dumps(for_display(v), ensure_ascii=False), flush=True)
    finally:
        consumer.close(timeout_ms=3000)  # commit and leave the group, but never hold a Ctrl-C for long
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KafkaTimeoutError:  # no broker within bootstrap_timeout_ms (8 s here; kafka-python's default is 30 s)
        print(f"{Path(__file__).name}: no Kafka broker answers at the bootstrap address "
              "(--bootstrap / DIALCHECK_KAFKA_BOOTSTRAP)", file=sys.stderr)
        raise SystemExit(2) from None
