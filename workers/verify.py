"""Verification: windows → pre-score top-24 → calibrated NLI → decision rule → aggregation.

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

