"""The judged chat-reply sets the project has, as `JudgedPair` lists grouped by conversation: what
adapting the verifier is fitted and scored on (lab/nli/adapt_curve.py).

Each pair is (premise = the evidence the reply was judged against, hypothesis = the reply). Binary
attribution sets train the one probability they speak about: attributable → entailment, not
attributable → not_entailment; Generic / uncooperative / blank replies are left out (nothing to
check). The three-way dialogue sets of the yardstick map SUPPORTS → entailment, REFUTES →
contradiction, NOT ENOUGH INFO → not_entailment.

The group is the conversation, so that no conversation sits on both sides of a fit / score split:
- FaithDial's audit: the same conversation turn (knowledge snippet + previous turn) is answered by
  people and by three dialogue models, in four folders; a row's group is the connected component of
  rows that share their knowledge text or their (non-empty) previous turn, so the four answers to one
  turn, and turns of one conversation that share a snippet or a turn, stay together.
- BEGIN dev (one set per corpus): the same, over knowledge and message.
- DialFact testsmall: `context_id`; HybriDial dev: the dialogue id (`context_id`).
"""
from __future__ import annotations

import csv
import hashlib
import re
from pathlib import Path

try:  # the shared pair type (lab/nli/judged.py); a local stand-in until it lands
    from lab.nli.judged import JudgedPair
except ImportError:  # pragma: no cover - removed once lab/nli/judged.py is in
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class JudgedPair:  # type: ignore[no-redef]
        premise: str
        hypothesis: str
        target: str
        group: str
        source: str

from lab.tuning.datasets import BEGIN_CORPORA, BEGIN_LABELS, FAITHDIAL_MODELS, faithdial_label
from schemas.items import load_dialfact

NOT_SUPPORTS = "NOT SUPPORTS"
BINARY_TARGET = {"SUPPORTS": "entailment", NOT_SUPPORTS: "not_entailment"}
THREE_WAY_TARGET = {"SUPPORTS": "entailment", "REFUTES": "contradiction", "NOT ENOUGH INFO": "not_entailment"}
CHAT_SETS = ("faithdial", "begin_wow", "begin_cmu", "begin_tc")
DIALOGUE_SETS = ("dialfact", "hybridial")
JUDGED_SETS = CHAT_SETS + DIALOGUE_SETS


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().lower())


def connected_groups(keys: list[tuple[str, ...]], prefix: str) -> list[str]:
    """One group id per row: rows sharing any non-empty key (knowledge text, previous turn) are in one
    group, transitively (union-find). Ids are hashes of the component's smallest key, so they do not
    depend on row order."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for row in keys:
        nodes = [f"{i}:{_norm(k)}" for i, k in enumerate(row) if _norm(k)]
        for a in nodes[1:]:
            ra, rb = find(nodes[0]), find(a)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    out = []
    for i, row in enumerate(keys):
        nodes = [f"{j}:{_norm(k)}" for j, k in enumerate(row) if _norm(k)]
        root = find(nodes[0]) if nodes else f"row:{i}"
        out.append(f"{prefix}-{hashlib.sha1(root.encode()).hexdigest()[:12]}")
    return out


def _binary_rows(rows: list[tuple[str, str, str, str | None]], name: str) -> list[JudgedPair]:
    """rows of (knowledge, previous turn, reply, SUPPORTS / NOT SUPPORTS / None) → grouped pairs."""
    kept = [r for r in rows if r[3] is not None and r[0].strip() and r[2].strip()]
    groups = connected_groups([(k, h) for k, h, _, _ in kept], name)
    return [JudgedPair(k.strip(), reply.strip(), BINARY_TARGET[label], g, name)
            for (k, _, reply, label), g in zip(kept, groups)]


def load_faithdial(data_dir: str | Path) -> list[JudgedPair]:
    d = Path(data_dir) / "dialogue_attribution" / "faithdial_audit"
    rows = []
    for folder, column in FAITHDIAL_MODELS.items():
        for f in sorted((d / folder).glob("*.csv")):
            with open(f, encoding="utf-8", newline="") as fh:
                for r in csv.DictReader(fh):
                    rows.append(((r.get("knowledge") or r.get("evidence") or ""), r.get("history") or "",
                                 r.get(column) or "",
                                 faithdial_label(r.get("BEGIN", r.get("begin_label", "")) or "")))
    return _binary_rows(rows, "faithdial")


def load_begin(data_dir: str | Path, corpus: str) -> list[JudgedPair]:
    if corpus not in BEGIN_CORPORA:
        raise ValueError(f"unknown BEGIN corpus {corpus!r}: one of {', '.join(BEGIN_CORPORA)}")
    path = Path(data_dir) / "dialogue_attribution" / "begin_dev" / f"begin_dev_{corpus}.tsv"
    with open(path, encoding="utf-8", newline="") as fh:
        rows = [(r.get("knowledge") or "", r.get("message") or "", r.get("response") or "",
                 BEGIN_LABELS.get((r.get("begin_label") or "").strip().lower()))
                for r in csv.DictReader(fh, delimiter="\t")]
    return _binary_rows(rows, f"begin_{corpus}")


def load_dialfact_format(path: str | Path, name: str) -> list[JudgedPair]:
    """A DialFact-format file (gold evidence, three-way label); the group is its context id."""
    return [JudgedPair(" ".join(dict.fromkeys(t.strip() for _, t in r.evidence if t.strip())), r.response, THREE_WAY_TARGET[r.label],
                       f"{name}-{r.context_id}", name)
            for r in load_dialfact(path) if r.evidence and r.label in THREE_WAY_TARGET]


def load_judged_set(name: str, data_dir: str | Path) -> list[JudgedPair]:
    """One judged set by name (see JUDGED_SETS)."""
    d = Path(data_dir)
    if name == "faithdial":
        return load_faithdial(d)
    if name.startswith("begin_"):
        return load_begin(d, name[len("begin_"):])
    if name == "dialfact":
        return load_dialfact_format(d / "dialfact" / "testsmall.jsonl", name)
    if name == "hybridial":
        return load_dialfact_format(d / "hybridial" / "dev.jsonl", name)
    raise ValueError(f"unknown judged set {name!r}: one of {', '.join(JUDGED_SETS)}")


def supports_gold(pairs: list[JudgedPair]) -> list[int]:
    """1 where the reply is supported (the positive class of p(SUPPORTS)'s ROC AUC)."""
    return [int(p.target == "entailment") for p in pairs]
