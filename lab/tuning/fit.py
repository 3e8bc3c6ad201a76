"""Fitting the decision methods (workers/decision/methods.py) on claims with gold labels.

The runtime only loads the parameters this writes; every fit lives here, offline:
- threshold / argmax: nothing to fit (the per-window rules keep their threshold and gap);
- perclass: a grid over two claim-level thresholds, best macro-F1;
- logreg: scikit-learn's multinomial logistic regression, stored as plain numbers;
- guarded: t_supports and t_refutes by a grid search that maximises the mean macro-F1 over the
  training sets (each over the labels it has) while keeping REFUTES precision ≥
  `min_refutes_precision` on every training set (the least shortfall where no grid point does);
  `dialcheck tune decision --lodo` fits them leaving each set out in turn. `refutes_floor="pooled"`
  holds the floor over all training claims together instead (measured in docs/history/results-2026-12-02.md, not the
  default: it trades REFUTES precision for macro-F1)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from schemas import LABELS
from schemas.protocols import CONTRADICTION, ENTAILMENT
from workers.decision import method
from workers.decision.features import FEATURES, feature_matrix
from workers.decision.guarded import NEI, R, S
from workers.decision.methods import RULES, perclass_codes
from workers.decision.sufficiency import ON_TOPIC

from lab.evaluation.scoring import macro_f1
from lab.tuning.variants import GOLD_CODES, NOT_S, covers, effective_cover, guarded_method, slot_clash

T_SUPPORTS = tuple(np.round(np.arange(0.0, 0.96, 0.05), 2))
T_REFUTES = tuple(np.round(np.arange(0.0, 0.99, 0.04), 2))
REFUTES_FLOORS = ("per_set", "pooled")


def fit_decision(name: str, evs: Sequence, labels: Sequence[str], *, C: float = 1.0,
                 sets: Sequence[str] | None = None, spaces: dict | None = None, refutes_floor: str = "per_set",
                 params: dict | None = None, cover: str = "none", slot_refutes: bool = False,
                 cover_scope: str = "all", slots: bool = True, checked: bool = False,
                 clash_refutes: bool = True, relation_clash: bool = False, checks_on: Sequence[str] = ()):
    """A fitted method. `sets` names each claim's data set and `spaces` the labels each set has
    (the guarded fit scores every set over its own labels); a rule keeps `params` (threshold, gap)."""
    if name in RULES:
        return method(name, params)
    if name == "guarded":
        return guarded_method(fit_guarded(evs, labels, sets, spaces, refutes_floor=refutes_floor, cover=cover,
                                          slot_refutes=slot_refutes, cover_scope=cover_scope, slots=slots,
                                          checked=checked, clash_refutes=clash_refutes,
                                          relation_clash=relation_clash, checks_on=checks_on))
    if name == "perclass":
        return method(name, fit_perclass(evs, labels))
    if name == "logreg":
        return method(name, fit_logreg(evs, labels, C))
    return method(name)  # refuses the unknown name


def fit_perclass(evs, labels) -> dict:
    X = feature_matrix(evs)
    xe, xc = X[:, FEATURES.index("max_e")], X[:, FEATURES.index("max_c")]
    grid = np.round(np.arange(0.05, 0.96, 0.025), 3)
    gold = list(labels)
    best = max(((macro_f1(gold, [LABELS[i] for i in perclass_codes(xe, xc, ts, tr)]), -abs(ts - tr), ts, tr)
                for ts in grid for tr in grid))
    return {"t_supports": float(best[2]), "t_refutes": float(best[3])}


def fit_logreg(evs, labels, C: float = 1.0) -> dict:
    from sklearn.linear_model import LogisticRegression

    y = np.array([LABELS.index(lab) for lab in labels])
    X = feature_matrix(evs)
    mean, scale = X.mean(0), X.std(0)
    scale[scale < 1e-9] = 1.0
    clf = LogisticRegression(C=C, class_weight="balanced", max_iter=5000)
    clf.fit((X - mean) / scale, y)
    coef = np.zeros((3, X.shape[1]))
    icpt = np.zeros(3)
    coef[clf.classes_] = clf.coef_ if len(clf.classes_) > 2 else np.vstack([-clf.coef_, clf.coef_]) / 2
    icpt[clf.classes_] = clf.intercept_ if len(clf.classes_) > 2 else np.r_[-clf.intercept_, clf.intercept_] / 2
    return {"C": C, "features": list(FEATURES), "mean": mean.tolist(), "scale": scale.tolist(),
            "coef": coef.tolist(), "intercept": icpt.tolist(), "classes": list(LABELS)}


def _claim_summaries(evs, levels: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Per claim: max entailment of windows whose most likely class is entailment, and per on-topic
    level the max contradiction of on-topic windows whose most likely class is contradiction (-1
    where none)."""
    def best_e(ev):
        p = np.asarray(ev.probs)
        ok = p.argmax(1) == ENTAILMENT
        return float(p[ok, ENTAILMENT].max()) if ev.n and ok.any() else -1.0

    max_e = np.array([best_e(ev) for ev in evs])
    max_c = np.full((len(evs), len(levels)), -1.0)
    for i, ev in enumerate(evs):
        if not ev.n:
            continue
        p = np.asarray(ev.probs)
        c, cov = p[:, CONTRADICTION], ev.on_topic
        top = p.argmax(1) == CONTRADICTION
        for j, k in enumerate(levels):
            ok = (cov >= k) & top
            if ok.any():
                max_c[i, j] = c[ok].max()
    return max_e, max_c


def _covered_summaries(evs, cover: str, on_topic: float) -> tuple[np.ndarray, np.ndarray]:
    """Per claim, for the coverage guard (lab/tuning/variants.py `covers` at the claim's level): the
    highest threshold at which a covering window, or a covering pair of supporting windows (the
    pair's lower entailment), still supports it; and the highest at which an on-topic supporting
    window states another value in the claim's number slot (-1 where none)."""
    cov_e, clash_e = np.full(len(evs), -1.0), np.full(len(evs), -1.0)
    for n, ev in enumerate(evs):
        if not ev.n:
            continue
        p = np.asarray(ev.probs)
        e = p[:, ENTAILMENT]
        sup = [int(i) for i in np.argsort(-e) if p[i].argmax() == ENTAILMENT]
        singles = [e[i] for i in sup if covers(ev, (i,), cover)]
        best = singles[0] if singles else -1.0
        for a, i in enumerate(sup):
            if e[i] <= best:
                break
            for j in sup[a + 1:]:
                if e[j] <= best:
                    break
                if covers(ev, (i, j), cover):
                    best = max(best, float(e[j]))
                    break
        cov_e[n] = best
        clash = [e[i] for i in sup if ev.on_topic[i] >= on_topic and slot_clash(ev, i)]
        clash_e[n] = clash[0] if clash else -1.0
    return cov_e, clash_e


def _refutes_shortfall(gold: np.ndarray, pred: np.ndarray, floor: float) -> float:
    """How far REFUTES precision falls below `floor` (0 if not, or with under 5 REFUTES); a REFUTES
    is right when the gold is REFUTES or, on a binary set, NOT SUPPORTS."""
    n_r = int(np.sum(pred == R))
    right = np.sum((pred == R) & ((gold == R) | (gold == NOT_S)))
    return max(0.0, floor - right / n_r) if n_r >= 5 else 0.0


def _score(gold: np.ndarray, pred: np.ndarray, space: tuple[int, ...], floor: float) -> tuple[float, float]:
    """(macro-F1 over `space` in percent, REFUTES precision shortfall below `floor`, 0 if none).
    The same 2PR/(P+R) as lab/evaluation/scoring.py per_class_f1, on code arrays: the grid calls it ~10^4 times."""
    seen = np.where(pred == S, S, NOT_S) if NOT_S in space else pred
    f1 = []
    for k in space:
        tp = float(np.sum((gold == k) & (seen == k)))
        n_pred, n_gold = float(np.sum(seen == k)), float(np.sum(gold == k))
        prec, rec = (tp / n_pred if n_pred else 0.0), (tp / n_gold if n_gold else 0.0)
        f1.append(2 * prec * rec / (prec + rec) if prec + rec else 0.0)
    return 100 * float(np.mean(f1)), _refutes_shortfall(gold, pred, floor)


def fit_guarded(evs: Sequence, labels: Sequence[str], sets: Sequence[str] | None = None,
        spaces: dict[str, tuple[str, ...]] | None = None, min_refutes_precision: float = 0.60,
        on_topic: tuple[float, ...] = (ON_TOPIC,), refutes_floor: str = "per_set", cover: str = "none",
        slot_refutes: bool = False, cover_scope: str = "all", slots: bool = True, checked: bool = False,
        clash_refutes: bool = True, relation_clash: bool = False, checks_on: Sequence[str] = ()) -> dict:
    """The grid point with the best mean per-set macro-F1 among those keeping REFUTES precision
    ≥ the floor on every set (the least shortfall if none does); ties toward higher thresholds.
    `cover` and `slot_refutes` are the rule's coverage guard (not fitted: chosen by the yardstick);
    `slots` (the typed-slot REFUTES, workers/decision/guarded.py) is not fitted either: the thresholds
    are chosen without it, and the yardstick scores the rule with it; nor is `checked` (a SUPPORTS the
    structured checks disagree with is NOT ENOUGH INFO), `relation_clash` (the same, only where the
    deciding window gives the claim's relation to another word), `clash_refutes` (an undecided claim
    an on-topic window states but for one slot, stated otherwise, is REFUTES) and `checks_on` (the
    registered checks named: the rival filler, the named subject), for the same reason."""
    if refutes_floor not in REFUTES_FLOORS:
        raise ValueError(f"refutes_floor must be one of {REFUTES_FLOORS}, got {refutes_floor!r}")
    sets = list(sets) if sets is not None else ["all"] * len(labels)
    gold = np.array([GOLD_CODES[lab] for lab in labels])
    names = list(dict.fromkeys(sets))
    idx = {n: np.array([i for i, s in enumerate(sets) if s == n]) for n in names}
    space = {n: tuple(GOLD_CODES[x] for x in (spaces or {}).get(n, ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")))
             for n in names}
    max_e, max_c = _claim_summaries(evs, on_topic)
    cov_e, clash_e = max_e.copy(), np.full(len(evs), -1.0)  # claims asked no coverage: as without the guard
    levels = [effective_cover(ev, cover, cover_scope) for ev in evs]  # a dialogue scope asks less of standalone claims
    for level in sorted(set(levels) - {"none"}):
        at = np.array([i for i, lv in enumerate(levels) if lv == level])
        cov_e[at], clash_e[at] = _covered_summaries([evs[i] for i in at], level, on_topic[0])
    best = None
    for j, k in enumerate(on_topic):
        for tr in T_REFUTES:
            refute = max_c[:, j] >= tr
            for ts in T_SUPPORTS:
                held = np.where(slot_refutes & (clash_e >= ts), R, NEI)  # supported but not covered
                pred = np.where(cov_e >= ts, S, np.where(max_e >= ts, held, np.where(refute, R, NEI)))
                scores = [_score(gold[idx[n]], pred[idx[n]], space[n], min_refutes_precision) for n in names]
                short = sum(s for _, s in scores) if refutes_floor == "per_set" else \
                    _refutes_shortfall(gold, pred, min_refutes_precision)
                key = (-round(short, 6), round(float(np.mean([f for f, _ in scores])), 6), tr, k, ts)
                if best is None or key > best:
                    best = key
    return {"t_supports": float(best[4]), "t_refutes": float(best[2]), "on_topic": float(best[3]),
            "min_refutes_precision": min_refutes_precision,
            **({"refutes_floor": refutes_floor} if refutes_floor != "per_set" else {}),
            **({"cover": cover} if cover != "none" else {}), **({"slot_refutes": True} if slot_refutes else {}),
            **({"cover_scope": cover_scope} if cover != "none" and cover_scope != "all" else {}),
            **({"slots": False} if not slots else {}), **({"checked": True} if checked else {}),
            **({"clash_refutes": False} if not clash_refutes else {}),
            **({"relation_clash": True} if relation_clash else {}),
            **({"checks_on": list(checks_on)} if checks_on else {})}
