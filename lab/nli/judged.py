"""Judged (premise, hypothesis) pairs for adapting the verifier to a deployment (`dialcheck adapt`):
from an annotation export in DialFact format, from the feedback store's judged verdicts, or from a
yardstick set.

Why targets of their own, not NLI labels: a judgement of a verdict says something about one
probability only. A right SUPPORTS badge says the evidence entails the claim; a wrong one says it
does not, and nothing about contradiction (it may be silent or contradict). So:

| judgement                          | target            | trains                          |
|------------------------------------|-------------------|---------------------------------|
| SUPPORTS judged right              | entailment        | p(entailment) up                |
| SUPPORTS judged wrong              | not_entailment    | p(entailment) down              |
| REFUTES judged right               | contradiction     | p(contradiction) up             |
| REFUTES judged wrong               | not_contradiction | p(contradiction) down           |
| NOT ENOUGH INFO, or unsure         | (dropped)         | —                               |

A DialFact-format label is gold, not a judgement: SUPPORTS → entailment, REFUTES → contradiction,
NOT ENOUGH INFO → not_entailment (it says nothing about contradiction), and a binary "not
supported" (NOT SUPPORTS, not_supported, 0, ...) → not_entailment.

Every pair carries its conversation (`group`): a split never puts one conversation's replies on
both sides, so the hold-out measures replies of conversations the fit never saw."""
from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from schemas.errors import DialcheckError

TARGETS = ("entailment", "not_entailment", "contradiction", "not_contradiction")
# (badge label, judgement) → target; anything else is dropped
JUDGED_TARGETS = {("SUPPORTS", "right"): "entailment", ("SUPPORTS", "wrong"): "not_entailment",
                  ("REFUTES", "right"): "contradiction", ("REFUTES", "wrong"): "not_contradiction"}
# gold labels of an annotation export, three-way or binary (lower-cased, '-' and ' ' read as '_')
GOLD_TARGETS = {"supports": "entailment", "supported": "entailment", "fully_attributable": "entailment",
                "1": "entailment", "attributable": "entailment",
                "refutes": "contradiction", "refuted": "contradiction", "contradicted": "contradiction",
                "not_enough_info": "not_entailment", "nei": "not_entailment",
                "not_supports": "not_entailment", "not_supported": "not_entailment",
                "not_fully_attributable": "not_entailment", "unsupported": "not_entailment",
                "0": "not_entailment", "not_attributable": "not_entailment"}
DEFAULT_SOURCES = ("moderator", "annotator")
# a judgement's corrected label (feedback schema 1.1) → the targets it says
CORRECTED_TARGETS = {"SUPPORTS": ("entailment",), "REFUTES": ("contradiction",),
                     "NOT ENOUGH INFO": ("not_entailment", "not_contradiction"), "NOT SUPPORTS": ("not_entailment",)}


@dataclass(frozen=True)
class JudgedPair:
    premise: str
    hypothesis: str
    target: str  # one of TARGETS
    group: str  # the conversation: splits never cut one
    source: str = ""  # who or what judged it: "moderator", "annotator", "faithdial/wow", ...
    gold: str = ""  # the gold label when it came from one (SUPPORTS, REFUTES, NOT ENOUGH INFO, NOT SUPPORTS)

    @property
    def supported(self) -> bool | None:
        """Gold for "is this reply supported" where the target says it (None: it does not)."""
        return {"entailment": True, "not_entailment": False, "contradiction": False}.get(self.target)


def target_of_gold(label: str) -> str | None:
    """A DialFact-format `response_label` (three-way or binary) → target; None for one it does not know."""
    return GOLD_TARGETS.get(str(label).strip().lower().replace("-", "_").replace(" ", "_"))


def gold_name(target: str, raw: str) -> str:
    """The gold label in dialcheck's spelling: NOT ENOUGH INFO is kept apart from a binary NOT SUPPORTS."""
    key = str(raw).strip().lower().replace("-", "_").replace(" ", "_")
    if target == "not_entailment":
        return "NOT ENOUGH INFO" if key in ("not_enough_info", "nei") else "NOT SUPPORTS"
    return {"entailment": "SUPPORTS", "contradiction": "REFUTES"}[target]


def target_of_judgement(label_shown: str, judgement: str) -> str | None:
    """A judged badge → target (module table); None for NOT ENOUGH INFO and `unsure`."""
    return JUDGED_TARGETS.get((str(label_shown), str(judgement)))


def split_by_group(pairs: Sequence[JudgedPair], holdout_frac: float = 0.3,
                   seed: int = 0) -> tuple[list[JudgedPair], list[JudgedPair]]:
    """(fit, hold-out): whole conversations on each side, about `holdout_frac` of the pairs held out
    (conversations shuffled with `seed`, then taken until the share is reached)."""
    if not 0.0 < holdout_frac < 1.0:
        raise ValueError(f"holdout fraction must be between 0 and 1 (got {holdout_frac})")
    sizes = Counter(p.group for p in pairs)
    groups = sorted(sizes)
    random.Random(seed).shuffle(groups)
    held, n = set(), 0
    for g in groups:
        if n >= holdout_frac * len(pairs):
            break
        held.add(g)
        n += sizes[g]
    return [p for p in pairs if p.group not in held], [p for p in pairs if p.group in held]


def target_counts(pairs: Iterable[JudgedPair]) -> dict[str, int]:
    c = Counter(p.target for p in pairs)
    return {t: int(c.get(t, 0)) for t in TARGETS}


def sha1_of(path: str | Path) -> str:
    h = hashlib.sha1()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def pairs_sha1(pairs: Iterable[JudgedPair]) -> str:
    """A digest of the pairs themselves (names the adapted model's data)."""
    h = hashlib.sha1()
    for p in pairs:
        h.update(json.dumps([p.premise, p.hypothesis, p.target, p.group], ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()


class LabelsError(DialcheckError, ValueError):
    """A labels file or store that gives no usable pair; the message is one line."""


def _premise(evidence: Sequence[str]) -> str:
    """The gold evidence texts as the FV protocol reads them: each text once, in order."""
    return " ".join(dict.fromkeys(t.strip() for t in evidence if t and t.strip()))


def from_dialfact(path: str | Path, source: str = "annotator") -> list[JudgedPair]:
    """A DialFact-format JSONL (`response`, `response_label`, `evidence_list` [[title, url, text, ...]],
    `context_id`; three-way or binary labels) → pairs; premise = its gold evidence texts, hypothesis
    = the response. A row without evidence or with an unknown label is a LabelsError naming it."""
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                raise LabelsError(f"{path}:{n}: not JSON ({e.msg})") from None
            if not isinstance(r, dict) or "response" not in r or "response_label" not in r:
                raise LabelsError(f"{path}:{n}: needs `response` and `response_label` (DialFact format)")
            target = target_of_gold(r["response_label"])
            if target is None:
                raise LabelsError(f"{path}:{n}: response_label {str(r['response_label'])[:40]!r} is neither three-way "
                                  "(SUPPORTS, REFUTES, NOT ENOUGH INFO) nor binary (SUPPORTS / NOT SUPPORTS)")
            evidence = [str(e[2]) for e in r.get("evidence_list") or [] if isinstance(e, (list, tuple)) and len(e) >= 3]
            premise = _premise(evidence)
            if not premise:
                continue  # nothing to read: FV cannot judge it either
            group = str(r.get("context_id") or r.get("conversation_id") or r.get("id") or f"row-{n}")
            out.append(JudgedPair(premise, str(r["response"]).strip(), target, group, source, gold_name(target, r["response_label"])))
    return out


def deciding_window(verdict: dict) -> str | None:
    """The evidence window the stored verdict decided on: its rationale's window, else the window of
    the evidence that backs its label most (entailment for SUPPORTS, contradiction for REFUTES)."""
    rationale = verdict.get("rationale") if isinstance(verdict.get("rationale"), dict) else {}
    if isinstance(rationale.get("window"), str) and rationale["window"].strip():
        return rationale["window"].strip()
    key = "contradict" if verdict.get("label") == "REFUTES" else "entail"
    evidence = [e for e in verdict.get("evidence") or [] if isinstance(e, dict) and (e.get("window") or e.get("text"))]
    if not evidence:
        return None
    best = max(evidence, key=lambda e: float(e.get(key) or 0.0))
    return str(best.get("window") or best.get("text")).strip() or None


def claim_surface(verdict: dict) -> str | None:
    """The hypothesis the verifier read: the claim surface (the claim itself when none is stored)."""
    surface = verdict.get("surface") if isinstance(verdict.get("surface"), dict) else {}
    text = surface.get("text") or verdict.get("claim")
    return str(text).strip() if text else None


def latest_judgements(judged: Iterable, sources: Sequence[str] = DEFAULT_SOURCES) -> tuple[list, Counter]:
    """The latest judgement of each claim by each of `sources` whose verdict is stored, oldest first,
    and what was left out (`other_source`, `no_verdict`): a changed mind replaces, a replay does not add."""
    latest: dict = {}
    dropped = Counter()
    for j in sorted(judged, key=lambda j: float(j.received_at or 0.0)):
        if j.source not in sources:
            dropped["other_source"] += 1
        elif j.verdict is None:
            dropped["no_verdict"] += 1
        else:
            latest[(j.source, *j.claim_key)] = j
    return list(latest.values()), dropped


def from_feedback(judged: Iterable, sources: Sequence[str] = DEFAULT_SOURCES) -> tuple[list[JudgedPair], dict]:
    """The feedback store's judged verdicts (`FeedbackStore.judged()`) → (pairs, what was left out).
    Only `sources`; the latest judgement of a claim by a source wins; a judgement of another label
    than the stored verdict's, `unsure`, and a verdict without a window are left out.
    A judgement's `corrected_label` (feedback schema 1.1, the label the judge would give) says more than right / wrong: SUPPORTS → entailment, REFUTES →
    contradiction, NOT ENOUGH INFO → not_entailment and not_contradiction, a binary NOT SUPPORTS →
    not_entailment only. It replaces the judgement's own target (a REFUTES judged "right" against a
    binary "not supported" is not evidence of contradiction), and makes judged NOT ENOUGH INFO
    verdicts usable.
    A claim counts once: judged by a moderator and an annotator alike it is one pair; judged by them
    in opposite ways it is left out ("conflicting"), so flooding a conversation with contradicting
    judgements cancels rather than steers."""
    latest, dropped = latest_judgements(judged, sources)
    claims: dict = {}  # (conversation, turn, claim) → [(source, targets, pair fields)]
    for j in latest:
        v = j.verdict
        if j.label_shown and j.label_shown != v.get("label"):
            dropped["other_label"] += 1
            continue
        fixed = j.corrected_label if j.judgement != "unsure" else None
        targets = CORRECTED_TARGETS.get(fixed) if fixed else None
        if targets is None:
            target = target_of_judgement(v.get("label"), j.judgement)
            targets = (target,) if target else ()
        if not targets:
            dropped["unsure_or_nei"] += 1
            continue
        premise, hypothesis = deciding_window(v), claim_surface(v)
        if not premise or not hypothesis:
            dropped["no_window"] += 1
            continue
        claims.setdefault(j.claim_key, []).append(
            [JudgedPair(premise, hypothesis, t, str(j.conversation_id), j.source, fixed or "") for t in targets])
    out = []
    for judged_by in claims.values():  # one claim counts once, whoever judged it
        merged, conflict = _merge([p for ps in judged_by for p in ps])
        if conflict:
            dropped["conflicting"] += len(judged_by)
            continue
        dropped["same_claim"] += len(judged_by) - 1
        out += merged
    return out, {k: n for k, n in dropped.items() if n}


def _column(target: str) -> int:
    """The probability a target speaks about: 0 = entailment, 2 = contradiction."""
    return 0 if target in ("entailment", "not_entailment") else 2


def _merge(pairs: Sequence[JudgedPair]) -> tuple[list[JudgedPair], bool]:
    """Pairs of one claim → one pair per probability they speak about, or conflict=True when two of
    them say opposite things about the same probability (then none of them is learned from)."""
    by_col: dict[int, JudgedPair] = {}
    for p in pairs:
        seen = by_col.setdefault(_column(p.target), p)
        if seen.target != p.target:
            return [], True
    return list(by_col.values()), False


def dedupe(pairs: Sequence[JudgedPair]) -> tuple[list[JudgedPair], dict[str, int]]:
    """One pair per (conversation, evidence, reply, probability): a reply judged again counts once,
    and a reply judged both ways in one conversation (a flood of contradicting judgements, or an
    export with both labels) is not learned from at all. Why: the fit weighs pairs, so a repeated
    or flooded reply would steer it by its count, not by what the deployment's traffic says.
    Returns (pairs in first-seen order, {"duplicate": n, "conflicting": n})."""
    groups: dict[tuple, list[JudgedPair]] = {}
    for p in pairs:
        groups.setdefault((p.group, p.premise.strip(), p.hypothesis.strip(), _column(p.target)), []).append(p)
    out, dup, conflict = [], 0, 0
    for ps in groups.values():
        if len({p.target for p in ps}) > 1:
            conflict += len(ps)
            continue
        dup += len(ps) - 1
        out.append(ps[0])
    return out, {"duplicate": dup, "conflicting": conflict}


def folds_by_group(pairs: Sequence[JudgedPair], k: int, seed: int = 0) -> list[int]:
    """A fold (0 … k−1) per pair, whole conversations in one fold, folds about the same size:
    conversations shuffled with `seed`, then the largest first, each to the fold with fewest pairs."""
    if k < 2:
        raise ValueError(f"cross-fitting needs at least 2 folds (got {k})")
    sizes = Counter(p.group for p in pairs)
    groups = sorted(sizes)
    random.Random(seed).shuffle(groups)
    groups.sort(key=lambda g: -sizes[g])  # stable: equal sizes keep the seeded order
    load, fold_of = [0] * k, {}
    for g in groups:
        f = min(range(k), key=lambda i: (load[i], i))
        fold_of[g] = f
        load[f] += sizes[g]
    return [fold_of[p.group] for p in pairs]


def from_eval_set(s, source: str | None = None) -> list[JudgedPair]:
    """A yardstick set (lab/tuning/datasets.py EvalSet, FV items with gold evidence) → pairs: its
    gold labels mapped like an export's (a binary set's NOT SUPPORTS → not_entailment)."""
    out = []
    for it, gold, group in zip(s.items, s.labels, s.groups):
        premise = _premise([t for _, t in it.gold_evidence or []])
        target = target_of_gold(gold)
        if premise and target:
            out.append(JudgedPair(premise, it.claim, target, f"{s.name}:{group}", source or s.name, gold_name(target, gold)))
    return out
