"""Verification: windows → pre-score top-24 → calibrated NLI → claim decision (the fitted decision
layer by default, workers/decision; or the rule below + aggregation).

Rule (method.md §5, mirrored for REFUTES): a window SUPPORTS if entail ≥ 0.55 and
entail − max(neutral, contradict) ≥ 0.15; REFUTES if contradict ≥ 0.55 and
contradict − max(entail, neutral) ≥ 0.15; otherwise NOT ENOUGH INFO. Across windows the most
confident decisive window wins; with none, the claim is NOT ENOUGH INFO."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .nli.labels import CONTRADICTION, ENTAILMENT, NEUTRAL
from .windows import Window


@dataclass(frozen=True)
class WindowDecision:
    window: Window
    probs: np.ndarray  # entail, neutral, contradict
    label: str


def decide_window(p: np.ndarray, threshold: float = 0.55, gap: float = 0.15, rule: str = "threshold") -> str:
    e, n, c = float(p[ENTAILMENT]), float(p[NEUTRAL]), float(p[CONTRADICTION])
    if rule == "argmax":  # the plain 3-way NLI prediction (the paper's FV protocol)
        return ("SUPPORTS", "NOT ENOUGH INFO", "REFUTES")[int(np.argmax(p))]
    if e >= threshold and e - max(n, c) >= gap:
        return "SUPPORTS"
    if c >= threshold and c - max(e, n) >= gap:
        return "REFUTES"
    return "NOT ENOUGH INFO"


NO_EVIDENCE = {"SUPPORTS": 0.0, "REFUTES": 0.0, "NOT ENOUGH INFO": 1.0}  # nothing read, nothing decided


def label_probs(p: np.ndarray) -> dict[str, float]:
    """A window's NLI probabilities under the claim labels."""
    return {"SUPPORTS": float(p[ENTAILMENT]), "REFUTES": float(p[CONTRADICTION]), "NOT ENOUGH INFO": float(p[NEUTRAL])}


def aggregate(decisions: list[WindowDecision]) -> tuple[str, WindowDecision | None]:
    """The decisive window with the highest winning probability; else the window closest to
    deciding (for the evidence shown), labelled NOT ENOUGH INFO."""
    if not decisions:
        return "NOT ENOUGH INFO", None
    decisive = [d for d in decisions if d.label != "NOT ENOUGH INFO"]
    if decisive:
        best = max(decisive, key=lambda d: d.probs[ENTAILMENT if d.label == "SUPPORTS" else CONTRADICTION])
        return best.label, best
    best = max(decisions, key=lambda d: max(d.probs[ENTAILMENT], d.probs[CONTRADICTION]))
    return "NOT ENOUGH INFO", best


class ClaimDecider:
    """The claim label from a claim's window decisions: the fitted decision layer (default) or the
    per-window rule + aggregation above (`verify.decision` = threshold | argmax)."""

    def __init__(self, decision: str = "layer", params_path: str | None = None, protocol: str = "e2e",
                 threshold: float = 0.55, gap: float = 0.15):
        self.decision, self.threshold, self.gap = decision, threshold, gap
        self.layer = None
        if decision == "layer":
            from pathlib import Path

            from .decision import DecisionLayer

            path = Path(params_path or "")
            specific = path.with_name(f"decision-{protocol}.json")
            path = specific if specific.exists() else path
            if not path.is_file():
                raise FileNotFoundError(f"decision layer {path} not found: run `dialcheck tune fit` or set "
                                        "DIALCHECK_DECISION=threshold")
            self.layer = DecisionLayer.load(path)
            self.path = str(path)

    @property
    def window_rule(self) -> str:
        return "argmax" if self.decision == "argmax" else "threshold"

    def decide(self, claim: str, decisions: list[WindowDecision], passage_scores: list, gate: bool | None
               ) -> tuple[str, dict[str, float], WindowDecision | None]:
        """(label, probabilities per label, the window shown first as evidence)."""
        if self.layer is None:
            label, best = aggregate(decisions)
            return label, (label_probs(best.probs) if best is not None else dict(NO_EVIDENCE)), best
        from .decision import LABELS, ClaimEvidence

        if not decisions:  # no evidence read (none retrieved, or an outage): nothing to decide on
            return "NOT ENOUGH INFO", dict(NO_EVIDENCE), None
        ev = ClaimEvidence(claim, np.array([d.probs for d in decisions]).reshape(len(decisions), 3),
                           np.array([d.window.prescore for d in decisions]),
                           np.array([d.window.passage_index for d in decisions], dtype=int), list(passage_scores), gate)
        scores = self.layer.scores([ev])[0]
        label = LABELS[int(np.argmax(scores))]
        col = {"SUPPORTS": ENTAILMENT, "REFUTES": CONTRADICTION}.get(label)
        key = (lambda d: d.probs[col]) if col is not None else (lambda d: max(d.probs[ENTAILMENT], d.probs[CONTRADICTION]))
        best = max(decisions, key=key)
        return label, {lab: float(s) for lab, s in zip(LABELS, scores)}, best
