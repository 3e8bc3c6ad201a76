"""Benchmark (not a test): the Python memory of the conversation-knowledge table's states alone
(streams/knowledge.py's `add_doc`, as the chat.knowledge agent keeps them), without a broker or a
worker: what bench/bench_soak.py's `--knowledge-docs` run measures as worker RSS, here by tracemalloc.

    python bench/bench_knowledge_memory.py [--conversations 10000] [--docs 4] [--chars 600]

Each record is built and dropped as the worker decodes and drops it, so what is counted is what the
table keeps (its documents' texts, titles and ids, and the dicts around them).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_soak import knowledge  # noqa: E402
from schemas.items import GivenPassage  # noqa: E402
from schemas.knowledge import KnowledgeRecord  # noqa: E402
from schemas.settings import load_settings  # noqa: E402
from streams.knowledge import add_doc  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conversations", type=int, default=10_000)
    ap.add_argument("--docs", type=int, default=4, help="documents per conversation")
    ap.add_argument("--chars", type=int, default=600, help="characters per document")
    args = ap.parse_args()
    bounds = load_settings().grounding
    tracemalloc.start()
    table: dict[bytes, dict] = {}
    for c in range(args.conversations):
        conv, state = f"soak-{c:05d}", None
        for r in knowledge(conv, c, args.docs, args.chars):
            rec = KnowledgeRecord(conv, r["doc_id"], GivenPassage(r["text"], title=r["title"], id=r["doc_id"],
                                                                  source="conversation"))
            state, _ = add_doc(state, rec, time.time(), bounds.knowledge_docs, bounds.knowledge_bytes)
        table[conv.encode()] = state
    held = tracemalloc.get_traced_memory()[0]
    text = sum(s["bytes"] for s in table.values())
    print(json.dumps({"conversations": len(table), "docs_per_conversation": args.docs, "chars_per_doc": args.chars,
                      "text_mib": round(text / 2**20, 1), "table_mib": round(held / 2**20, 1),
                      "bytes_per_conversation": round(held / max(len(table), 1))}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
