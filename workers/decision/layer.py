"""The decision layer: window-level NLI probabilities (+ features) → claim label.

Methods (compared by grouped cross-validation in `dialcheck tune decision`):
- threshold: the per-window rule of workers/decision/rule.py + most-confident-decisive aggregation
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

from schemas import LABELS
from schemas.protocols import CONTRADICTION, ENTAILMENT

from ..scoring import macro_f1
from ..windows import Window
from .features import FEATURES, ClaimEvidence, feature_matrix
from .rule import DEFAULT_GAP, DEFAULT_THRESHOLD, NO_EVIDENCE, WindowDecision, aggregate, decide_window, label_probs

METHODS = ("threshold", "argmax", "perclass", "logreg", "guarded")
RULES = ("threshold", "argmax")  # methods with nothing fitted: the per-window rule + aggregation
FORMAT = "dialcheck-decision"
VERSION = 1


def rule_decision(ev: ClaimEvidence, rule: str, threshold: float = DEFAULT_THRESHOLD, gap: float = DEFAULT_GAP
                  ) -> tuple[str, int | None]:
    """(label, index of the deciding window) by the per-window rule and aggregation."""
    decisions = [WindowDecision(Window(int(i), ""), p, decide_window(p, threshold, gap, rule))
                 for p, i in zip(np.asarray(ev.probs), ev.passage_index)]
    label, best = aggregate(decisions)
    return label, (next(k for k, d in enumerate(decisions) if d is best) if best is not None else None)


def rule_label(ev: ClaimEvidence, rule: str, threshold: float = DEFAULT_THRESHOLD, gap: float = DEFAULT_GAP) -> str:
    return rule_decision(ev, rule, threshold, gap)[0]


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
    def fit(self, evs: Sequence[ClaimEvidence], labels: Sequence[str], C: float = 1.0,
            sets: Sequence[str] | None = None, spaces: dict | None = None) -> "DecisionLayer":
        """Fit on claims with gold labels; `sets` names each claim's data set and `spaces` the labels
        each set has (the guarded rule scores every set over its own labels)."""
        if self.method == "guarded":
            from . import guarded

            self.params = guarded.fit(evs, labels, sets, spaces,
                                      refutes_floor=self.params.get("refutes_floor", "per_set"))
            return self
        y = np.array([LABELS.index(lab) for lab in labels])
        if self.method in RULES:
            self.params = {"threshold": self.params.get("threshold", DEFAULT_THRESHOLD),
                           "gap": self.params.get("gap", DEFAULT_GAP)} if self.method == "threshold" else {}
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
        if self.method == "guarded":
            idx = np.array([self._guarded(e)[0] for e in evs], dtype=int)
        elif self.method == "perclass":
            X = feature_matrix(evs)
            idx = _perclass_predict(X[:, FEATURES.index("max_e")], X[:, FEATURES.index("max_c")],
                                    self.params["t_supports"], self.params["t_refutes"])
        else:
            kw = {"threshold": self.params.get("threshold", DEFAULT_THRESHOLD), "gap": self.params.get("gap", DEFAULT_GAP)}
            idx = np.array([LABELS.index(rule_label(e, self.method, **kw)) for e in evs], dtype=int)
        return np.eye(3)[idx] if len(idx) else np.zeros((0, 3))

    @classmethod
    def rule(cls, method: str, threshold: float = DEFAULT_THRESHOLD, gap: float = DEFAULT_GAP) -> "DecisionLayer":
        """A rule method (nothing to fit) with the given threshold and gap."""
        if method not in RULES:
            raise ValueError(f"{method!r} is not a rule; rules: {RULES}")
        return cls(method, {"threshold": threshold, "gap": gap} if method == "threshold" else {})

    def decide(self, ev: ClaimEvidence) -> tuple[str, dict[str, float], int | None]:
        """One claim: (label, probability per label, index of the window shown first). A rule
        reports the deciding window's probabilities; a fitted layer its class probabilities."""
        if ev.n == 0:
            return "NOT ENOUGH INFO", dict(NO_EVIDENCE), None
        p = np.asarray(ev.probs)
        if self.method in RULES:
            label, best = rule_decision(ev, self.method, self.params.get("threshold", DEFAULT_THRESHOLD),
                                        self.params.get("gap", DEFAULT_GAP))
            return label, label_probs(p[best]), best
        if self.method == "guarded":
            code, best = self._guarded(ev)
            probs = label_probs(p[best])
            if code == 2 and ev.on_topic[best] < self.params["on_topic"]:
                # contradiction from a window about something else is no evidence against the claim:
                # shown as NOT ENOUGH INFO mass, so an app never reads "R 0.62" on an NEI verdict
                probs = {"SUPPORTS": probs["SUPPORTS"], "REFUTES": 0.0,
                         "NOT ENOUGH INFO": probs["NOT ENOUGH INFO"] + probs["REFUTES"]}
            return LABELS[code], probs, best
        scores = self.scores([ev])[0]
        label = LABELS[int(np.argmax(scores))]
        col = {"SUPPORTS": ENTAILMENT, "REFUTES": CONTRADICTION}.get(label)
        best = int(np.argmax(p[:, col])) if col is not None else \
            int(np.argmax(np.maximum(p[:, ENTAILMENT], p[:, CONTRADICTION])))
        return label, {lab: float(x) for lab, x in zip(LABELS, scores)}, best

    def _guarded(self, ev: ClaimEvidence) -> tuple[int, int | None]:
        from . import guarded

        return guarded.decide(ev, self.params["t_supports"], self.params["t_refutes"], self.params["on_topic"])

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
