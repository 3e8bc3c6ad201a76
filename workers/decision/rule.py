"""The per-window rule and the aggregation across windows (docs/method.md §5, mirrored for REFUTES).

A window SUPPORTS if entail ≥ threshold and entail − max(neutral, contradict) ≥ gap; REFUTES if
contradict ≥ threshold and contradict − max(entail, neutral) ≥ gap; otherwise NOT ENOUGH INFO.
Across windows the most confident decisive window wins; with none, the claim is NOT ENOUGH INFO.
The defaults of threshold and gap are the settings' (`DIALCHECK_ENTAIL_THRESHOLD`, `DIALCHECK_WIN_GAP`),
read from there so the numbers exist once."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from schemas.protocols import CONTRADICTION, ENTAILMENT, NEUTRAL
from schemas.settings import DecisionSettings
from schemas.verdict import NO_EVIDENCE  # nothing read, nothing decided (one home: the contract)

from ..windows import Window

DEFAULT_THRESHOLD: float = DecisionSettings.model_fields["entail_threshold"].default
DEFAULT_GAP: float = DecisionSettings.model_fields["win_gap"].default


@dataclass(frozen=True)
class WindowDecision:
    window: Window
    probs: np.ndarray  # entail, neutral, contradict
    label: str | None = None  # the per-window rule's label, where a rule method labelled it


def decide_window(p: np.ndarray, threshold: float = DEFAULT_THRESHOLD, gap: float = DEFAULT_GAP,
                  rule: str = "threshold") -> str:
    e, n, c = float(p[ENTAILMENT]), float(p[NEUTRAL]), float(p[CONTRADICTION])
    if rule == "argmax":  # the plain 3-way NLI prediction (the paper's FV protocol)
        return ("SUPPORTS", "NOT ENOUGH INFO", "REFUTES")[int(np.argmax(p))]
    if e >= threshold and e - max(n, c) >= gap:
        return "SUPPORTS"
    if c >= threshold and c - max(e, n) >= gap:
        return "REFUTES"
    return "NOT ENOUGH INFO"


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
