"""A RAG assistant's backend (docs/integration.md#grounded-turns): retrieve passages for the user's
question, send the assistant's reply to dialcheck WITH those passages as the turn's `evidence`, then
read the reply's verdicts and print the reply with every claim that is not shown as supported
marked: [[not backed by the passages]] and !![disputed by them]!!.

Why send the passages: the question a RAG app asks is "is this reply backed by what the assistant
was given?", so dialcheck checks the reply against those passages, not its own index (a claim they
do not decide is NOT ENOUGH INFO). Each claim's verdict says where it stands in the reply
(`claim_span`, code-point offsets: Python slices them directly) and which passage it was checked
against (`evidence[].source` "turn", with the `id`, `title` and `url` you sent).

    DIALCHECK_SEGMENT=1 dialcheck worker          # claim by claim (else the reply is one claim)
    python examples/rag_assistant.py --bootstrap HOST:PORT [--conversation rag-1] [--timeout 300]
    (or DIALCHECK_KAFKA_BOOTSTRAP=HOST:PORT)

Output: one JSON line per claim, then one line {"marked": ..., "underlined": N, "claims": M}.
tests/test_integration_example.py runs it against a real broker and worker. kafka-python only."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import uuid

from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaTimeoutError

# the app's own help centre: what its retriever searches (a real app has a vector store here)
HELP_CENTRE = [
    {"id": "kb-plans", "title": "Plans and prices", "url": "https://help.example.com/plans",
     "text": "The Basic plan costs $10 a month and includes email support. The Pro plan costs $25 a month."},
    {"id": "kb-support", "title": "Contacting support", "url": "https://help.example.com/support",
     "text": "Email support answers within one business day. Support is closed on public holidays."},
    {"id": "kb-export", "title": "Exporting your data", "url": "https://help.example.com/export",
     "text": "You can export your projects as CSV files from the settings page."},
]
QUESTION = "How much is the Basic plan, and what support does it include?"
# the assistant's reply (a real app asks its LLM): the first sentence is in the passages, the second is not
REPLY = "The Basic plan costs $10 a month. It includes phone support around the clock."
MARKS = {"unsupported": ("[[", "]]"), "disputed": ("!![", "]!!")}


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9$]+", text.lower()))


def retrieve(question: str, k: int = 2) -> list[dict]:
    """The k help articles sharing most words with the question (a stand-in for the app's retriever)."""
    return sorted(HELP_CENTRE, key=lambda doc: -len(words(question) & words(doc["text"] + " " + doc["title"])))[:k]


def underline(v: dict) -> str | None:
    """The page's rule (docs/integration.md#grounded-turns): a claim is marked unless it is shown as
    supported; "disputed" when a shown REFUTES, "unsupported" otherwise."""
    shown = (v.get("display") or {}).get("show") is not False and v["status"]["state"] == "ok"
    if v["label"] == "SUPPORTS" and shown:
        return None
    return "disputed" if v["label"] == "REFUTES" and shown else "unsupported"


def marked(text: str, claims: list[dict]) -> str:
    """`text` with each marked claim between its markers (spans are code-point offsets into `text`)."""
    out, at = [], 0
    for v in sorted(claims, key=lambda v: v["claim_span"]["start"]):
        kind, start, end = underline(v), v["claim_span"]["start"], v["claim_span"]["end"]
        if kind is None or start < at:
            continue
        opening, closing = MARKS[kind]
        out += [text[at:start], opening, text[start:end], closing]
        at = end
    return "".join(out + [text[at:]])


def wait_for_claims(consumer: KafkaConsumer, conversation: str, turn_id: str, text: str, timeout_s: float) -> list[dict]:
    """The reply's claim verdicts. The worker publishes each claim's verdict, then the turn's summary
    (rule turn-summary, spanning the whole text); a one-claim reply gets one verdict spanning it all."""
    whole = {"start": 0, "end": len(text)}
    seen: dict[str, dict] = {}  # claim id → verdict: delivery is at-least-once
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            for r in records:
                v = json.loads(r.value)
                if r.key != conversation.encode() or v.get("turn_id") != turn_id:
                    continue
                seen.setdefault(v["claim_id"], v)
                if v.get("claim_span") == whole:  # the summary, or the one claim: nothing follows
                    parts = [p for p in seen.values() if p.get("claim_span") not in (None, whole)]
                    return parts or [v]
    raise TimeoutError(f"no verdict on {turn_id} within {timeout_s:.0f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", default=os.environ.get("DIALCHECK_KAFKA_BOOTSTRAP"),
                    help="Kafka bootstrap HOST:PORT (default: DIALCHECK_KAFKA_BOOTSTRAP)")
    ap.add_argument("--conversation", default=f"rag-{uuid.uuid4().hex[:8]}")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the verdicts")
    args = ap.parse_args()
    if not args.bootstrap:
        ap.exit(2, f"{ap.prog}: no broker: pass --bootstrap HOST:PORT or set DIALCHECK_KAFKA_BOOTSTRAP\n")
    conv = args.conversation
    producer = KafkaProducer(bootstrap_servers=args.bootstrap, acks="all", bootstrap_timeout_ms=8000)
    consumer = KafkaConsumer("chat.verdicts", bootstrap_servers=args.bootstrap, auto_offset_reset="earliest",
                             group_id=f"rag-example-{conv}", bootstrap_timeout_ms=8000)
    passages = retrieve(QUESTION)
    turns = [{"conversation_id": conv, "turn_id": f"{conv}/1", "speaker": "user", "text": QUESTION},
             # the reply with the passages its assistant was given: checked against these, not the index
             {"conversation_id": conv, "turn_id": f"{conv}/2", "speaker": "assistant", "text": REPLY,
              "evidence": passages, "ts": time.time()}]
    for t in turns:
        producer.send("chat.turns", key=conv.encode(), value=json.dumps(t).encode()).get(timeout=30)
    producer.close()
    try:
        claims = wait_for_claims(consumer, conv, f"{conv}/2", REPLY, args.timeout)
    finally:
        consumer.close()
    for v in sorted(claims, key=lambda v: v["claim_span"]["start"]):
        best = (v["evidence"] or [{}])[0]
        print(json.dumps({"claim": v["claim"], "span": v["claim_span"], "label": v["label"],
                          "display": v.get("display"), "underline": underline(v), "reason": v["status"]["reason"],
                          "checked_against": {k: best.get(k) for k in ("source", "passage_id", "title", "url", "window")}}))
    print(json.dumps({"marked": marked(REPLY, claims), "underlined": sum(underline(v) is not None for v in claims),
                      "claims": len(claims)}))
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KafkaTimeoutError:  # no broker within bootstrap_timeout_ms (8 s)
        print(f"{Path(__file__).name}: no Kafka broker answers at the bootstrap address "
              "(--bootstrap / DIALCHECK_KAFKA_BOOTSTRAP)", file=sys.stderr)
        raise SystemExit(2) from None
    except TimeoutError as e:  # the worker did not answer in --timeout
        print(f"{Path(__file__).name}: {e}", file=sys.stderr)
        raise SystemExit(1) from None
