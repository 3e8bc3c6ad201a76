"""The verdict's display hint (schema 2.1 `display`): what a chat app shows end users, decided in one
place from the label, the calibrated probability of the label, and the status.

Why a hint at all: apps asked "what do I show?" and each wrote its own rule over `probabilities`
and `status`; one documented rule, with its thresholds as constants here, lets a figure measure how
often a shown REFUTES is wrong per confidence band, and lets the rule change in one place.

The rule (docs/integration.md says the same):

- tone: SUPPORTS → "supported", REFUTES → "disputed", NOT ENOUGH INFO → "unverified".
- confidence, with p = probabilities[label] and e = status.evidence:
    "high"   when p ≥ HIGH (0.80) and e is "strong";
    "medium" when p ≥ MEDIUM (0.60) and e is "strong" or "weak" (not "none", not absent);
    "low"    otherwise, and always when status.state is "degraded" or "error".
- show: status.state is "ok", the label is not NOT ENOUGH INFO, and confidence is not "low".
  An NEI or a low-confidence verdict is not shown to end users by default (an app may still show it).
"""
from __future__ import annotations

from schemas import Display, Status

HIGH = 0.80    # p(label) from which, with strong evidence, confidence is "high"
MEDIUM = 0.60  # p(label) from which, with some evidence (strong or weak), confidence is "medium"
TONES = {"SUPPORTS": "supported", "REFUTES": "disputed", "NOT ENOUGH INFO": "unverified"}


def display_for(label: str, probabilities: dict[str, float], status: Status) -> Display:
    """The display hint of a verdict with this label, calibrated probabilities and status."""
    tone = TONES[label]
    p = float(probabilities.get(label, 0.0))
    evidence = status.evidence or "none"  # absent (a producer that does not say) counts as none
    if status.state != "ok":
        confidence = "low"
    elif p >= HIGH and evidence == "strong":
        confidence = "high"
    elif p >= MEDIUM and evidence != "none":
        confidence = "medium"
    else:
        confidence = "low"
    show = status.state == "ok" and label != "NOT ENOUGH INFO" and confidence != "low"
    return Display(show=show, tone=tone, confidence=confidence)
