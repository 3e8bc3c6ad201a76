"""Soak benchmark (not a test): N turns through 2 workers on the embedded broker while a random
worker is SIGKILLed (and restarted) K times.

Reports verdicts per claim after dedup by claim_id (must be exactly 1.0: nothing lost, nothing
extra), redelivered duplicates before dedup (the price of at-least-once), claims checked against a
wrong context (must be 0: takeovers restore the context table), peak worker memory (VmHWM), and
produce→verdict latency p50/p99 at the offered rate. The workers run the model-free stand-in
Checker of bench/soak_standin.py: this measures the stream, not the NLP.

    nice -n 5 python bench/bench_soak.py --turns 10000 --kills 5 --rate 150 --json

`--knowledge-docs K` first sends K documents of `--knowledge-chars` characters per conversation on
chat.knowledge (grounded turns): the knowledge table's memory is the peak worker memory
beside a run without (`--turns-per-conversation 1 --turns 10000`: 10,000 conversations), and
`wrong_knowledge` counts checked turns not given exactly their own conversation's documents (must be 0).
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from schemas import ChatTurn, claim_id  # noqa: E402
from schemas.settings import load_settings  # noqa: E402
from streams.broker import EmbeddedBroker  # noqa: E402
from streams.replay import TurnProducer  # noqa: E402
from streams.topics import ensure_topics  # noqa: E402
from streams.verdicts import TopicReader  # noqa: E402
from streams.worker import WorkerProcess  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from soak_standin import context_digest  # noqa: E402

STANDIN = ["--pipeline", "bench.soak_standin:create"]


def percentile(xs: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), NaN for no data."""
    return float(np.percentile(xs, q * 100)) if len(xs) else float("nan")


def peak_rss_mb(pid: int | None) -> float:
    """VmHWM: the process's peak resident set, read while it is alive."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, TypeError):
        pass
    return 0.0


def conversations(n_turns: int, turns_per_conv: int) -> list[tuple[list[ChatTurn], ChatTurn]]:
    out = []
    for c in range(n_turns // turns_per_conv):
        conv = f"soak-{c:05d}"
        ctx = [ChatTurn(conv, f"{conv}#c{i}", "user" if i % 2 == 0 else "assistant",
                        f"Turn {i} of conversation {c}, about topic {c % 97}.", check=False)
               for i in range(turns_per_conv - 1)]
        out.append((ctx, ChatTurn(conv, f"{conv}#r", "assistant", f"Conversation {c} claims fact {c * 7 % 101}.",
                                  check=True)))
    return out


def knowledge(conv: str, c: int, docs: int, chars: int) -> list[dict]:
    """`docs` chat.knowledge records of `conv`, each text its own (so a digest tells whose it is)."""
    out = []
    for d in range(docs):
        head = f"Article {d} of conversation {c}: product {c % 89} ships in {d + 2} days. "
        out.append({"conversation_id": conv, "doc_id": f"kb-{d}", "title": f"Help article {d}",
                    "text": (head * (chars // len(head) + 1))[:chars]})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=10_000)
    ap.add_argument("--turns-per-conversation", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--rate", type=float, default=150.0, help="turns per second offered")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--seed", type=int, default=9)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir with the broker and worker logs")
    ap.add_argument("--knowledge-docs", type=int, default=0, help="chat.knowledge documents per conversation")
    ap.add_argument("--knowledge-chars", type=int, default=600, help="characters per knowledge document")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    convs = conversations(args.turns, args.turns_per_conversation)
    # interleave conversations: turn j of every conversation in a window, like many live chats
    order: list[ChatTurn] = []
    window = 50
    for w0 in range(0, len(convs), window):
        group = convs[w0:w0 + window]
        for j in range(args.turns_per_conversation):
            order += [(ctx + [resp])[j] for ctx, resp in group]
    expected = {claim_id(r.conversation_id, r.turn_id, r.text): context_digest([t.text for t in ctx]) for ctx, r in convs}
    kb = {r.conversation_id: knowledge(r.conversation_id, c, args.knowledge_docs, args.knowledge_chars)
          for c, (_, r) in enumerate(convs)}
    expected_given = {claim_id(r.conversation_id, r.turn_id, r.text):
                      context_digest([d["text"] for d in kb[r.conversation_id]]) if args.knowledge_docs else ""
                      for _, r in convs}
    first_turn = {id(ctx[0] if ctx else r) for ctx, r in convs}
    work = Path(tempfile.mkdtemp(prefix="dialcheck-soak-"))
    sent_at: dict[str, float] = {}
    first_at: dict[str, float] = {}
    wrong_context: set[str] = set()
    wrong_knowledge: set[str] = set()
    counts = {"verdict_records": 0, "unexpected": 0}
    stop = threading.Event()
    peak = {}
    t0 = time.monotonic()
    with EmbeddedBroker(log_path=str(work / "tansu.log")) as broker:
        s = load_settings(kafka={"bootstrap": broker.bootstrap, "topic_partitions": args.partitions},
                          stream={"app_id": "soak", "status_interval_s": 5.0})
        ensure_topics(s)

        def produce() -> None:
            with TurnProducer(s) as p:
                start = time.monotonic()
                for i, t in enumerate(order):
                    delay = start + i / args.rate - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                    if id(t) in first_turn and args.knowledge_docs:  # the conversation's knowledge, acknowledged first
                        for rec in kb[t.conversation_id]:
                            p.send_knowledge(rec)
                        p.flush()
                    if t.check:
                        sent_at[claim_id(t.conversation_id, t.turn_id, t.text)] = time.time()
                    p.send_turn(t)

        def collect() -> None:
            with TopicReader(s, s.kafka.topic_verdicts) as r:
                while not stop.is_set():
                    for rec in r.poll(0.5):
                        now = time.time()
                        counts["verdict_records"] += 1
                        v = json.loads(rec.value)
                        cid = v["claim_id"]
                        if cid not in expected:
                            counts["unexpected"] += 1
                            continue
                        first_at.setdefault(cid, now)
                        if v["model_versions"].get("context_sha1") != expected[cid]:
                            wrong_context.add(cid)
                        if v["model_versions"].get("given_sha1") != expected_given[cid]:
                            wrong_knowledge.add(cid)

        workers = [WorkerProcess(s, work / f"worker{i}.log", extra_args=STANDIN).start() for i in range(args.workers)]
        try:
            for w in workers:
                w.wait_ready(300)
            collector = threading.Thread(target=collect, daemon=True)
            collector.start()
            producer = threading.Thread(target=produce)
            producer.start()
            p0, produce_s = time.monotonic(), len(order) / args.rate
            kills = []
            for k in range(args.kills):  # kills spread over the production window; restarts from this thread
                time.sleep(max(0.0, p0 + produce_s * (k + 1) / (args.kills + 1) - time.monotonic()))
                i = rng.randrange(len(workers))
                peak[f"{i}.{k}"] = peak_rss_mb(workers[i].pid)
                workers[i].kill9()
                kills.append({"worker": i, "at_s": round(time.monotonic() - p0, 1), "verdicts_so_far": len(first_at)})
                workers[i] = WorkerProcess(s, work / f"worker{i}.log", extra_args=STANDIN).start()
                workers[i].wait_ready(300)
            producer.join()
            deadline = time.monotonic() + args.timeout
            while len(first_at) < len(expected) and time.monotonic() < deadline:
                time.sleep(1)
            time.sleep(10)  # late redeliveries still count as duplicates
            for i, w in enumerate(workers):
                peak[f"{i}.end"] = peak_rss_mb(w.pid)
            stop.set()
            collector.join(5)
        finally:
            for w in workers:
                w.stop()
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
    lat = [first_at[c] - sent_at[c] for c in first_at if c in sent_at]
    unique = len(first_at)
    result = {
        "turns": len(order), "claims": len(expected), "workers": args.workers, "kills": kills, "kills_at_s_from_first_turn": [k["at_s"] for k in kills],
        "offered_turns_per_s": args.rate, "elapsed_s": round(time.monotonic() - t0, 1),
        "verdicts_per_claim_after_dedup": round(unique / len(expected), 6),
        "missing_claims": len(expected) - unique, "unexpected_verdicts": counts["unexpected"],
        "redelivered_duplicates_before_dedup": counts["verdict_records"] - unique - counts["unexpected"],
        "wrong_context": len(wrong_context),
        "conversations": len(convs), "knowledge_docs_per_conversation": args.knowledge_docs,
        "knowledge_text_mb": round(sum(len(d["text"]) for docs in kb.values() for d in docs) / 2**20, 1),
        "wrong_knowledge": len(wrong_knowledge),
        "peak_worker_rss_mb": round(max(peak.values() or [0.0]), 1),
        "latency_s": {"p50": round(percentile(lat, 0.5), 3), "p99": round(percentile(lat, 0.99), 3),
                      "max": round(max(lat or [float("nan")]), 3)},
        "pipeline": "model-free stand-in (bench/soak_standin.py)",
        **({"work_dir": str(work)} if args.keep else {}),
    }
    print(json.dumps(result, indent=None if not args.json else 2))
    return 0 if result["missing_claims"] == 0 and result["wrong_context"] == 0 and not wrong_knowledge else 1


if __name__ == "__main__":
    sys.exit(main())
