"""The decision layer: window-level NLI probabilities (+ features) → claim label.

Methods (compared by grouped cross-validation in `dialcheck tune decision`):
- threshold: the per-window rule of workers/verify.py + most-confident-decisive aggregation
- argmax:    the same aggregation with the plain 3-way argmax per window
- perclass:  claim-level max entail / max contradict against two thresholds fitted on training data
- logreg:    multinomial logistic regression over `features.FEATURES` (standardised)
Fitted parameters are plain numbers saved as versioned JSON (never pickle), so the artifact is
readable, diffable and loads without scikit-learn."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..verify import WindowDecision, aggregate, decide_window
from ..windows import Window
from .features import FEATURES, ClaimEvidence, feature_matrix

LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
METHODS = ("threshold", "argmax", "perclass", "logreg")
FORMAT = "dialcheck-decision"
VERSION = 1


def macro_f1(gold: Sequence[str], pred: Sequence[str], labels: Sequence[str] | None = None) -> float:
    """Macro-F1 in percent over `labels` (default all three; transfer sets without NEI pass theirs)."""
    f = []
    labels = labels or LABELS
    for lab in labels:
        tp = sum(g == lab and p == lab for g, p in zip(gold, pred))
        fp = sum(g != lab and p == lab for g, p in zip(gold, pred))
        fn = sum(g == lab and p != lab for g, p in zip(gold, pred))
        f.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return 100 * sum(f) / len(f)


def rule_label(ev: ClaimEvidence, rule: str, threshold: float = 0.55, gap: float = 0.15) -> str:
    decisions = [WindowDecision(Window(int(i), ""), p, decide_window(p, threshold, gap, rule))
                 for p, i in zip(np.asarray(ev.probs), ev.passage_index)]
    return aggregate(decisions)[0]


def _perclass_predict(x_e: np.ndarray, x_c: np.ndarray, t_s: float, t_r: float) -> np.ndarray:
    s, r = x_e - t_s, x_c - t_r
    out = np.full(len(x_e), 2)
    out[(s >= 0) & (s >= r)] = 0
    out[(r >= 0) & (r > s)] = 1
    return out


@dataclass
class DecisionLayer:
    method: str = "threshold"
    params: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"decision method {self.method!r} not in {METHODS}")

    # ---- fit / predict ------------------------------------------------------------------------
    def fit(self, evs: Sequence[ClaimEvidence], labels: Sequence[str], C: float = 1.0) -> "DecisionLayer":
        y = np.array([LABELS.index(lab) for lab in labels])
        if self.method in ("threshold", "argmax"):
            self.params = {"threshold": 0.55, "gap": 0.15} if self.method == "threshold" else {}
        elif self.method == "perclass":
            X = feature_matrix(evs)
            xe, xc = X[:, FEATURES.index("max_e")], X[:, FEATURES.index("max_c")]
            grid = np.round(np.arange(0.05, 0.96, 0.025), 3)
            gold = [LABELS[i] for i in y]
            best = max(((macro_f1(gold, [LABELS[i] for i in _perclass_predict(xe, xc, ts, tr)]), -abs(ts - tr), ts, tr)
                        for ts in grid for tr in grid))
            self.params = {"t_supports": float(best[2]), "t_refutes": float(best[3])}
        else:
            from sklearn.linear_model import LogisticRegression

            X = feature_matrix(evs)
            mean, scale = X.mean(0), X.std(0)
            scale[scale < 1e-9] = 1.0
            clf = LogisticRegression(C=C, class_weight="balanced", max_iter=5000)
            clf.fit((X - mean) / scale, y)
            coef = np.zeros((3, X.shape[1]))
            icpt = np.zeros(3)
            coef[clf.classes_] = clf.coef_ if len(clf.classes_) > 2 else np.vstack([-clf.coef_, clf.coef_]) / 2
            icpt[clf.classes_] = clf.intercept_ if len(clf.classes_) > 2 else np.r_[-clf.intercept_, clf.intercept_] / 2
            self.params = {"C": C, "features": list(FEATURES), "mean": mean.tolist(), "scale": scale.tolist(),
                           "coef": coef.tolist(), "intercept": icpt.tolist(), "classes": list(LABELS)}
        return self

    def scores(self, evs: Sequence[ClaimEvidence]) -> np.ndarray:
        """(n, 3) scores in LABELS order: class probabilities for logreg, one-hot otherwise."""
        if self.method == "logreg":
            if list(self.params["features"]) != list(FEATURES):
                raise ValueError("decision layer was fitted on another feature set; refit it")
            X = (feature_matrix(evs) - np.array(self.params["mean"])) / np.array(self.params["scale"])
            z = X @ np.array(self.params["coef"]).T + np.array(self.params["intercept"])
            z -= z.max(1, keepdims=True)
            p = np.exp(z)
            return p / p.sum(1, keepdims=True)
        if self.method == "perclass":
            X = feature_matrix(evs)
            idx = _perclass_predict(X[:, FEATURES.index("max_e")], X[:, FEATURES.index("max_c")],
                                    self.params["t_supports"], self.params["t_refutes"])
        else:
            kw = {"threshold": self.params.get("threshold", 0.55), "gap": self.params.get("gap", 0.15)}
            idx = np.array([LABELS.index(rule_label(e, self.method, **kw)) for e in evs], dtype=int)
        return np.eye(3)[idx] if len(idx) else np.zeros((0, 3))

    def predict(self, evs: Sequence[ClaimEvidence]) -> list[str]:
        return [LABELS[i] for i in self.scores(evs).argmax(1)] if len(evs) else []

    # ---- versioned JSON -----------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "method": self.method, "params": self.params, "meta": self.meta}

    def save(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def from_dict(cls, d: dict) -> "DecisionLayer":
        if d.get("format") != FORMAT or d.get("version") != VERSION:
            raise ValueError(f"not a {FORMAT} v{VERSION} file (format {d.get('format')!r}, version {d.get('version')!r})")
        return cls(d["method"], d.get("params", {}), d.get("meta", {}))

    @classmethod
    def load(cls, path: str | Path) -> "DecisionLayer":
        return cls.from_dict(json.loads(Path(path).read_text()))
