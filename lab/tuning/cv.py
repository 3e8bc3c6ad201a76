"""Cross-validation of decision methods, grouped by conversation (`context_id`): claims from one
dialogue never sit on both sides of a split, so the layer cannot memorise a conversation."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from workers.decision import DecisionMethod
from lab.evaluation.scoring import macro_f1


def folds(groups: Sequence[str], k: int = 5) -> list[np.ndarray]:
    """Test indices per fold (sklearn GroupKFold: deterministic, balanced by size)."""
    from sklearn.model_selection import GroupKFold

    idx = np.arange(len(groups))
    return [test for _, test in GroupKFold(n_splits=k).split(idx, groups=list(groups))]


def cross_validate(evs: Sequence, labels: Sequence[str], groups: Sequence[str], fit: Callable[[list, list], DecisionMethod],
                   k: int = 5, transfer: dict | None = None) -> dict:
    """Per-fold and mean ± std macro-F1 of a method fitted (`fit(evs, labels)`) on the other folds; the out-of-fold
    predictions pooled give one more number (`pooled`). `transfer`: name → (evs, labels) scored with
    the layer fitted on each training fold (mean over folds)."""
    labels = list(labels)
    per, pooled = [], [None] * len(labels)
    trans: dict[str, list[float]] = {n: [] for n in (transfer or {})}
    for test in folds(groups, k):
        train = np.setdiff1d(np.arange(len(labels)), test)
        layer = fit([evs[i] for i in train], [labels[i] for i in train])
        pred = layer.predict([evs[i] for i in test])
        per.append(macro_f1([labels[i] for i in test], pred))
        for i, p in zip(test, pred):
            pooled[i] = p
        for name, (tev, tlab) in (transfer or {}).items():
            trans[name].append(macro_f1(tlab, layer.predict(tev), sorted(set(tlab))))
    out = {"folds": [round(f, 2) for f in per], "mean": round(float(np.mean(per)), 2),
           "std": round(float(np.std(per)), 2), "pooled": round(macro_f1(labels, pooled), 2)}
    if transfer:
        out["transfer"] = {n: round(float(np.mean(v)), 2) for n, v in trans.items()}
    return out
