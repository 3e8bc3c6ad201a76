"""The evaluation sets of the cross-domain yardstick, as CheckItems with gold labels (FV protocol:
each claim with its gold evidence). Loaders read ../shared/data; nothing here is copied into the repo.

| set | labels it has | evidence | groups (kept on one side of a split) |
|---|---|---|---|
| dialfact      | S / R / NEI (DialFact testsmall, with context)  | evidence_list      | context_id |
| hybridial     | S / R / NEI (HybriDial dev, with context)       | evidence_list      | dialogue   |
| foolmetwice   | S / R (an NEI answer is wrong)                  | gold_evidence      | wikipedia_page |
| wice          | S / NEI (supported → S, partially/not → NEI)     | the cited page     | claim |
| true_dialfact | S / not S (TRUE's DialFact valid, no context)   | grounding          | grounding text |
| faithdial     | S / not S (FaithDial audit: chat responses of three dialogue models and people) | knowledge | knowledge text |
| begin_wow, begin_cmu, begin_tc | S / not S (BEGIN dev: chat responses judged for attribution, one set per corpus) | knowledge | knowledge text |

FaithDial's BEGIN labels map as ../shared/data/README.md says: entailment (alone or with
uncooperative) → SUPPORTS; hallucination, partial hallucination, entailment + hallucination → not
SUPPORTS; generic, uncooperative and blank → left out (nothing checkable, or no label).

BEGIN's labels judge attribution, the product's convention (a SUPPORTS badge means everything the
reply states is backed by the evidence shown): Fully attributable → SUPPORTS, Not fully
attributable → NOT SUPPORTS; Generic replies (small talk, nothing to check) are left out of the
metrics and loaded on their own (`begin_generic`) to check that none gets a badge.

HybriDial's labels judge whether the reply answers the question, not attribution: it is reported
beside the others but puts no floor on the display fit (`NO_FLOOR`).
"""
from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from schemas import LABELS
from schemas.items import CheckItem, load_dialfact
from workers.jsonl import read_jsonl

NOT_SUPPORTS = "NOT SUPPORTS"  # the gold label of a binary set's negative class (REFUTES or NEI)
BEGIN_CORPORA = ("wow", "cmu", "tc")  # Wizard of Wikipedia, CMU-DoG, Topical-Chat
BEGIN_SETS = tuple(f"begin_{c}" for c in BEGIN_CORPORA)
# the sets the shipped decision and display were fitted on; BEGIN dev is reported and certified on, never
# fitted on (adding it to the decision fit took DialFact's left-out macro-F1 from 47.30 to 37.23)
FIT_SETS = ("dialfact", "hybridial", "foolmetwice", "wice", "true_dialfact", "faithdial")
SETS = FIT_SETS + BEGIN_SETS
CHAT_RESPONSE_SETS = ("faithdial",) + BEGIN_SETS  # chat responses judged for attribution: what the display is certified on
NO_FLOOR = ("hybridial",)  # reported, but its labels are not attribution: no display floor of its own
BEGIN_LABELS = {"fully attributable": "SUPPORTS", "not fully attributable": "NOT SUPPORTS", "generic": None}
FAITHDIAL_MODELS = {"gold": "response", "GPT2": "gpt2", "CTRL": "ctrl", "DoHA": "doha"}  # folder → response column
# sources that are also in the NLI model's training pairs (lab/nli/data.py): scores there are optimistic
IN_NLI_TRAINING = {"foolmetwice": "FoolMeTwice dev is an NLI training source", "wice": "WiCE dev claims are an NLI training source"}


@dataclass
class EvalSet:
    name: str
    items: list[CheckItem]
    labels: list[str]  # gold: LABELS, or NOT_SUPPORTS for a binary set
    groups: list[str]
    label_space: tuple[str, ...]  # the labels macro-F1 is taken over
    type_labels: list[str] = field(default_factory=list)  # DialFact-format 'factual' / 'personal'

    @property
    def binary(self) -> bool:
        return NOT_SUPPORTS in self.label_space

    def __len__(self) -> int:
        return len(self.items)

    def subset(self, idx) -> "EvalSet":
        idx = list(idx)
        return EvalSet(self.name, [self.items[i] for i in idx], [self.labels[i] for i in idx],
                       [self.groups[i] for i in idx], self.label_space,
                       [self.type_labels[i] for i in idx] if self.type_labels else [])


def _read_jsonl(path: Path) -> list[dict]:
    return list(read_jsonl(path))


def _dialfact_format(name: str, path: Path) -> EvalSet:
    recs = load_dialfact(path)
    return EvalSet(name, [r.to_check_item("fv") for r in recs], [r.label for r in recs],
                   [r.context_id for r in recs], LABELS, [r.type_label for r in recs])


def faithdial_label(begin: str) -> str | None:
    """A FaithDial BEGIN annotation → SUPPORTS, NOT SUPPORTS, or None (left out)."""
    raw = begin.strip().lower().replace(". ", ",").replace("entailmentt", "entailment").replace("hallucinated", "hallucination")
    parts = {x.strip() for x in raw.split(",") if x.strip()}
    if any("hallucination" in x for x in parts):
        return NOT_SUPPORTS
    if "entailment" in parts and parts <= {"entailment", "uncooperative"}:
        return "SUPPORTS"
    return None


def _faithdial(d: Path) -> EvalSet:
    items, labels, groups = [], [], []
    for folder, column in FAITHDIAL_MODELS.items():
        for f in sorted((d / folder).glob("*.csv")):
            with open(f, encoding="utf-8", newline="") as fh:
                for i, r in enumerate(csv.DictReader(fh)):
                    label = faithdial_label(r.get("BEGIN", r.get("begin_label", "")) or "")
                    knowledge = (r.get("knowledge") or r.get("evidence") or "").strip()
                    response = (r.get(column) or "").strip()
                    if label is None or not knowledge or not response:
                        continue
                    cid = f"faithdial-{folder}-{f.stem}-{i}"
                    history = (r.get("history") or "").strip()
                    items.append(CheckItem(cid, f"{cid}#response", [history] if history else [], response,
                                           [("", knowledge)]))
                    labels.append(label)
                    groups.append(hashlib.sha1(knowledge.encode()).hexdigest()[:12])
    return EvalSet("faithdial", items, labels, groups, ("SUPPORTS", NOT_SUPPORTS))


def _begin(d: Path, corpus: str, generic: bool = False) -> EvalSet:
    """One BEGIN dev corpus: its attributable / not attributable replies, or (`generic`) its Generic ones."""
    items, labels, groups = [], [], []
    with open(d / f"begin_dev_{corpus}.tsv", encoding="utf-8", newline="") as fh:
        for i, r in enumerate(csv.DictReader(fh, delimiter="\t")):
            raw = (r.get("begin_label") or "").strip().lower()
            if raw not in BEGIN_LABELS:
                raise ValueError(f"begin_dev_{corpus}.tsv row {i + 2}: unknown begin_label {r.get('begin_label')!r}")
            label = BEGIN_LABELS[raw]
            knowledge, response = (r.get("knowledge") or "").strip(), (r.get("response") or "").strip()
            if (label is None) != generic or not knowledge or not response:
                continue
            cid = f"begin-{corpus}-{i}"
            message = (r.get("message") or "").strip()
            items.append(CheckItem(cid, f"{cid}#response", [message] if message else [], response, [("", knowledge)]))
            labels.append(label if label is not None else NOT_SUPPORTS)
            groups.append(hashlib.sha1(knowledge.encode()).hexdigest()[:12])  # one conversation's turns share it
    return EvalSet(f"begin_{corpus}" + ("_generic" if generic else ""), items, labels, groups, ("SUPPORTS", NOT_SUPPORTS))


def begin_generic(data_dir: str | Path) -> EvalSet:
    """BEGIN dev's Generic replies of every corpus (nothing to check): each should get no badge."""
    d = Path(data_dir) / "dialogue_attribution" / "begin_dev"
    parts = [_begin(d, c, generic=True) for c in BEGIN_CORPORA]
    return EvalSet("begin_generic", [x for p in parts for x in p.items], [x for p in parts for x in p.labels],
                   [x for p in parts for x in p.groups], ("SUPPORTS", NOT_SUPPORTS))


def load_set(name: str, data_dir: str | Path, limit: int | None = None) -> EvalSet:
    d = Path(data_dir)
    if name == "dialfact":
        s = _dialfact_format(name, d / "dialfact" / "testsmall.jsonl")
    elif name == "hybridial":
        s = _dialfact_format(name, d / "hybridial" / "dev.jsonl")
    elif name == "foolmetwice":
        rows = _read_jsonl(d / "foolmetwice" / "dev.jsonl")
        s = EvalSet(name, [CheckItem(f"fmt-{r['id']}", f"fmt-{r['id']}#claim", [], r["text"],
                                     [(r["wikipedia_page"], " ".join(g["text"] for g in r["gold_evidence"]))])
                           for r in rows],
                    [r["label"] for r in rows], [r["wikipedia_page"] for r in rows], ("SUPPORTS", "REFUTES"))
    elif name == "wice":
        rows = _read_jsonl(d / "wice" / "dev.jsonl")
        s = EvalSet(name, [CheckItem(f"wice-{i}", f"wice-{i}#claim", [], r["claim"], [("", " ".join(r["evidence"]))])
                           for i, r in enumerate(rows)],
                    ["SUPPORTS" if r["label"] == "supported" else "NOT ENOUGH INFO" for r in rows],
                    [f"wice-{i}" for i in range(len(rows))], ("SUPPORTS", "NOT ENOUGH INFO"))
    elif name == "true_dialfact":
        with open(d / "dialfact" / "true_dialfact_valid.csv", encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
        s = EvalSet(name, [CheckItem(f"true-{r['']}", f"true-{r['']}#claim", [], r["generated_text"],
                                     [("", r["grounding"])]) for r in rows],
                    ["SUPPORTS" if r["label"] == "1" else NOT_SUPPORTS for r in rows],
                    [hashlib.sha1(r["grounding"].encode()).hexdigest()[:12] for r in rows],
                    ("SUPPORTS", NOT_SUPPORTS))
    elif name == "faithdial":
        s = _faithdial(d / "dialogue_attribution" / "faithdial_audit")
    elif name in BEGIN_SETS:
        s = _begin(d / "dialogue_attribution" / "begin_dev", name[len("begin_"):])
    else:
        raise ValueError(f"unknown set {name!r}: one of {', '.join(SETS)}")
    if limit is not None and limit < len(s):
        # a deterministic spread over the file (every k-th record), not its head
        step = len(s) / limit
        s = s.subset(sorted({int(i * step) for i in range(limit)}))
    return s


def badge_right(s: EvalSet, gold: str, pred: str) -> bool:
    """Is a SUPPORTS / REFUTES badge right? On a binary set a REFUTES is right when the gold is not
    SUPPORTS (the set cannot tell REFUTES from NOT ENOUGH INFO)."""
    if pred == "SUPPORTS":
        return gold == "SUPPORTS"
    return gold != "SUPPORTS" if s.binary else gold == pred


SHOWN_FLOOR = 0.80  # the precision shown badges are held to: the display fits' floor (lab/tuning/display_fit.py)


def attainable_coverage(right: list[bool], n: int, floor: float = SHOWN_FLOOR) -> float:
    """The largest share of a set's n claims (%) that any display could show with these labels while
    keeping shown badges right ≥ `floor`: every right badge plus as many wrong ones as the floor
    allows. A display only hides badges, so a coverage target above this is a target for the
    decision (or the verifier), not for the display."""
    good = sum(right)
    wrong = len(right) - good
    extra = int(good * (1 - floor) / floor + 1e-9)  # wrong badges that keep good / (good + extra) ≥ floor
    return round(100 * (good + min(wrong, extra)) / max(n, 1), 1)


def _precision(right: list[bool]) -> float | None:
    return round(100 * sum(right) / len(right), 1) if right else None


def set_metrics(s: EvalSet, pred: list[str], shown: list | None = None) -> dict:
    """The yardstick's numbers for one set: macro-F1 over the labels it has, accuracy, SUPPORTS and
    REFUTES precision (a binary set: REFUTES whose gold is not SUPPORTS), NOT ENOUGH INFO recall,
    and with `shown` (each claim's `Display`) the shown badges: coverage (share of claims shown),
    precision overall and per confidence band, and the coverage attainable at the 80 % floor by any
    display of these labels (`attainable_coverage`)."""
    from lab.evaluation.scoring import macro_f1

    gold = s.labels
    seen = [p if not s.binary else ("SUPPORTS" if p == "SUPPORTS" else NOT_SUPPORTS) for p in pred]
    refutes = [badge_right(s, g, p) for g, p in zip(gold, pred) if p == "REFUTES"]
    supports = [badge_right(s, g, p) for g, p in zip(gold, pred) if p == "SUPPORTS"]
    nei_gold = [p for g, p in zip(gold, pred) if g == "NOT ENOUGH INFO"]
    out = {"n": len(gold), "macro_f1": round(macro_f1(gold, seen, s.label_space), 2),
           "accuracy": round(100 * sum(g == p for g, p in zip(gold, seen)) / max(len(gold), 1), 2),
           "supports_precision": _precision(supports), "supports_predicted": len(supports),
           "refutes_precision": _precision(refutes), "refutes_predicted": len(refutes),
           "nei_recall": round(100 * sum(p == "NOT ENOUGH INFO" for p in nei_gold) / len(nei_gold), 1)
           if nei_gold else None,
           "predicted": {lab: sum(p == lab for p in pred) for lab in LABELS}}
    if shown is not None:
        badges = [(d.confidence, badge_right(s, g, p)) for g, p, d in zip(gold, pred, shown) if d.show]
        out["shown"] = {"coverage": round(100 * len(badges) / max(len(gold), 1), 1), "n": len(badges),
                        "precision": _precision([r for _, r in badges]),
                        "attainable": attainable_coverage(refutes + supports, len(gold)),
                        **{band: {"n": sum(c == band for c, _ in badges),
                                  "precision": _precision([r for c, r in badges if c == band])}
                           for band in ("high", "medium")}}
    return out
