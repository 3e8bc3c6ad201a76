"""The chat-response attribution sets (BEGIN dev, FaithDial's audit) written as DialFact-format JSONL,
so that `dialcheck eval --protocol fv`, `dialcheck replay --protocol fv` and `dialcheck demo --protocol fv`
read them like DialFact (a grounded reply checked in the stream against what eval gives).

Why through lab/tuning/datasets.py: the yardstick already reads these files (which rows count, which
are left out, how labels map); a second reader would drift from it. Knowledge → `evidence_list`,
the previous turn → `context`, the reply → `response`. Labels are attribution: attributable →
SUPPORTS; not attributable → NOT ENOUGH INFO (the product's convention: a reply its passages do not
back is unverified, not refuted; the yardstick scores it as NOT SUPPORTS, i.e. anything but SUPPORTS).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from lab.tuning.datasets import BEGIN_SETS, NOT_SUPPORTS, EvalSet, load_set

CONVERTIBLE = ("begin", "faithdial")
LABEL_OF = {"SUPPORTS": "SUPPORTS", NOT_SUPPORTS: "NOT ENOUGH INFO"}


def chat_sets(name: str, data_dir: str | Path) -> list[EvalSet]:
    """`begin` is its three dev corpora (Wizard of Wikipedia, CMU-DoG, Topical-Chat), in that order."""
    if name not in CONVERTIBLE:
        raise ValueError(f"unknown set {name!r}: one of {', '.join(CONVERTIBLE)}")
    return [load_set(s, data_dir) for s in (BEGIN_SETS if name == "begin" else ("faithdial",))]


def spread(n_total: int, limit: int | None) -> list[int]:
    """Indices of `limit` rows spread evenly over `n_total` (every k-th, as load_set's limit does), so a
    sample covers each corpus in its share instead of being the head of the first one."""
    if limit is None or limit >= n_total:
        return list(range(n_total))
    step = n_total / limit
    return sorted({int(i * step) for i in range(limit)})


def dialfact_lines(sets: list[EvalSet], limit: int | None = None) -> Iterator[dict]:
    """One DialFact-format record per kept reply (evidence_list rows are [title, url, text, "0"])."""
    rows = [(s.name, item, label) for s in sets for item, label in zip(s.items, s.labels)]
    for i in spread(len(rows), limit):
        name, item, label = rows[i]
        yield {"id": item.conversation_id, "context_id": item.conversation_id, "data_type": name,
               "context": list(item.context), "response": item.claim,
               "evidence_list": [[title, "", text, "0"] for title, text in item.gold_evidence or []],
               "response_label": LABEL_OF[label], "type_label": "factual"}


def convert(name: str, data_dir: str | Path, out: str | Path, limit: int | None = None) -> int:
    """Write the converted set to `out` (JSONL); the number of records written."""
    n = 0
    with open(out, "w", encoding="utf-8") as fh:
        for rec in dialfact_lines(chat_sets(name, data_dir), limit):
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
            n += 1
    return n
