"""The guarded rule: NOT ENOUGH INFO unless the evidence decides, and no REFUTES from evidence that
is off the claim's topic (../shared/docs/verifier-recipes.md §6.1–6.2).

- SUPPORTS if some window's entailment ≥ t_supports (the most entailing window decides);
- else REFUTES if some window is on topic (coverage ≥ on_topic, workers/decision/sufficiency.py)
  with contradiction ≥ t_refutes and above its entailment (the most contradicting such window);
- else NOT ENOUGH INFO.
Three parameters, fitted by a grid search that maximises the mean macro-F1 over the training sets
(each over the labels it has) while keeping REFUTES precision ≥ `min_refutes_precision` on every
training set; `dialcheck tune decision --lodo` fits them leaving each set out in turn."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from schemas.protocols import CONTRADICTION, ENTAILMENT

S, R, NEI, NOT_S = 0, 1, 2, 3
GOLD_CODES = {"SUPPORTS": S, "REFUTES": R, "NOT ENOUGH INFO": NEI, "NOT SUPPORTS": NOT_S}
T_SUPPORTS = tuple(np.round(np.arange(0.30, 0.96, 0.05), 2))
T_REFUTES = tuple(np.round(np.arange(0.30, 0.99, 0.04), 2))
ON_TOPIC = (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def decide(ev, t_supports: float, t_refutes: float, on_topic: float) -> tuple[int, int | None]:
    """(label code S/R/NEI, index of the window shown first) for one claim."""
    if ev.n == 0:
        return NEI, None
    p = np.asarray(ev.probs)
    e, c = p[:, ENTAILMENT], p[:, CONTRADICTION]
    if e.max() >= t_supports:
        return S, int(np.argmax(e))
    topical = ev.coverage[:, 0] >= on_topic
    refuting = topical & (c >= t_refutes) & (c > e)
    if refuting.any():
        return R, int(np.argmax(np.where(refuting, c, -1.0)))
    decided = np.maximum(e, c)  # shown: the on-topic window closest to deciding, else any
    return NEI, int(np.argmax(np.where(topical, decided, decided - 2.0)))


def _claim_summaries(evs) -> tuple[np.ndarray, np.ndarray]:
    """Per claim: max entailment, and per ON_TOPIC level the max contradiction of on-topic windows
    whose contradiction exceeds their entailment (-1 where none)."""
    max_e = np.array([np.asarray(ev.probs)[:, ENTAILMENT].max() if ev.n else -1.0 for ev in evs])
    max_c = np.full((len(evs), len(ON_TOPIC)), -1.0)
    for i, ev in enumerate(evs):
        if not ev.n:
            continue
        p = np.asarray(ev.probs)
        e, c, cov = p[:, ENTAILMENT], p[:, CONTRADICTION], ev.coverage[:, 0]
        for j, k in enumerate(ON_TOPIC):
            ok = (cov >= k) & (c > e)
            if ok.any():
                max_c[i, j] = c[ok].max()
    return max_e, max_c


def _score(gold: np.ndarray, pred: np.ndarray, space: tuple[int, ...], floor: float) -> tuple[float, float]:
    """(macro-F1 over `space` in percent, REFUTES precision shortfall below `floor`, 0 if none)."""
    seen = np.where(pred == S, S, NOT_S) if NOT_S in space else pred
    f1 = []
    for k in space:
        tp = float(np.sum((gold == k) & (seen == k)))
        n_pred, n_gold = float(np.sum(seen == k)), float(np.sum(gold == k))
        prec, rec = (tp / n_pred if n_pred else 0.0), (tp / n_gold if n_gold else 0.0)
        f1.append(2 * prec * rec / (prec + rec) if prec + rec else 0.0)
    n_r = int(np.sum(pred == R))
    right = np.sum((pred == R) & ((gold == R) | (gold == NOT_S)))
    short = max(0.0, floor - right / n_r) if n_r >= 5 else 0.0
    return 100 * float(np.mean(f1)), short


def fit(evs: Sequence, labels: Sequence[str], sets: Sequence[str] | None = None,
        spaces: dict[str, tuple[str, ...]] | None = None, min_refutes_precision: float = 0.60) -> dict:
    """The grid point with the best mean per-set macro-F1 among those keeping REFUTES precision
    ≥ the floor on every set (the least shortfall if none does); ties toward higher thresholds."""
    sets = list(sets) if sets is not None else ["all"] * len(labels)
    gold = np.array([GOLD_CODES[lab] for lab in labels])
    names = list(dict.fromkeys(sets))
    idx = {n: np.array([i for i, s in enumerate(sets) if s == n]) for n in names}
    space = {n: tuple(GOLD_CODES[x] for x in (spaces or {}).get(n, ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")))
             for n in names}
    max_e, max_c = _claim_summaries(evs)
    best = None
    for j, k in enumerate(ON_TOPIC):
        for tr in T_REFUTES:
            refute = max_c[:, j] >= tr
            for ts in T_SUPPORTS:
                pred = np.where(max_e >= ts, S, np.where(refute, R, NEI))
                scores = [_score(gold[idx[n]], pred[idx[n]], space[n], min_refutes_precision) for n in names]
                short = sum(s for _, s in scores)
                key = (-round(short, 6), round(float(np.mean([f for f, _ in scores])), 6), tr, k, ts)
                if best is None or key > best:
                    best = key
    return {"t_supports": float(best[4]), "t_refutes": float(best[2]), "on_topic": float(best[3]),
            "min_refutes_precision": min_refutes_precision}
