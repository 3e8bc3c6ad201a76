"""The verdict's display hint (schema 2.1 `display`): what a chat app shows end users, decided in one
place from the label, the calibrated probability of the label, and the status.

Why a hint at all: apps asked "what do I show?" and each wrote its own rule over `probabilities`
and `status`; one documented rule lets the yardstick measure how often a shown badge is right, and
lets the rule change in one place.

The rule (docs/integration.md says the same), a `DisplayPolicy`:

- tone: SUPPORTS → "supported", REFUTES → "disputed", NOT ENOUGH INFO → "unverified".
- shown ("medium" or "high"): status.state is "ok", the label is not NOT ENOUGH INFO, the evidence
  is one the policy accepts (`evidence`), and p = probabilities[label] ≥ `show[label]`;
  "high" when also p ≥ `high[label]` and the evidence is "strong"; otherwise "low", not shown.
- The shipped policy is fitted (`dialcheck tune fit --method guarded`, lab/tuning/display_fit.py) so that shown
  badges are right ≥ 80 % and "high" ones ≥ 90 % on every yardstick set when that set is left out of
  the fit, at the largest coverage that allows; it is a JSON artifact beside decision.json
  (`verify.display_params`), fingerprinted to the NLI model like the decision.
- `CONSTANT` is the rule before a policy was fitted (p ≥ 0.80 with strong evidence → high, p ≥ 0.60
  with some evidence → medium): what `display_for` applies when it is given no policy.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from schemas import Display, Status

TONES = {"SUPPORTS": "supported", "REFUTES": "disputed", "NOT ENOUGH INFO": "unverified"}
FORMAT, VERSION = "dialcheck-display", 1
BADGES = ("SUPPORTS", "REFUTES")


@dataclass(frozen=True)
class DisplayPolicy:
    """When a verdict's badge is shown, and with which confidence."""
    show: dict[str, float]  # per badge label: the least p(label) at which it is shown
    high: dict[str, float]  # per badge label: the least p(label) for "high" (strong evidence only)
    evidence: tuple[str, ...] = ("strong",)  # evidence strengths a shown badge may rest on
    meta: dict = field(default_factory=dict, compare=False)

    def display(self, label: str, probabilities: dict[str, float], status: Status) -> Display:
        tone = TONES[label]
        p = float(probabilities.get(label, 0.0))
        evidence = status.evidence or "none"  # absent (a producer that does not say) counts as none
        shown = (status.state == "ok" and label in BADGES and evidence in self.evidence
                 and p >= self.show.get(label, 2.0))
        if not shown:
            # the old rule's "medium" for a low p on some evidence is "low" here: not shown is not shown
            return Display(show=False, tone=tone, confidence="low")
        confidence = "high" if p >= self.high.get(label, 2.0) and evidence == "strong" else "medium"
        return Display(show=True, tone=tone, confidence=confidence)

    def to_dict(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "show": dict(self.show), "high": dict(self.high),
                "evidence": list(self.evidence), "meta": self.meta}

    def save(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def from_dict(cls, d: dict) -> "DisplayPolicy":
        if d.get("format") != FORMAT or d.get("version") != VERSION:
            raise ValueError(f"not a {FORMAT} v{VERSION} file (format {d.get('format')!r}, version {d.get('version')!r})")
        return cls({k: float(v) for k, v in d["show"].items()}, {k: float(v) for k, v in d["high"].items()},
                   tuple(d.get("evidence", ("strong",))), d.get("meta", {}))

    @classmethod
    def load(cls, path: str | Path) -> "DisplayPolicy":
        return cls.from_dict(json.loads(Path(path).read_text()))


class _ConstantPolicy(DisplayPolicy):
    """The rule before any policy was fitted, kept as the baseline the yardstick compares against."""

    def display(self, label, probabilities, status):
        tone = TONES[label]
        p = float(probabilities.get(label, 0.0))
        evidence = status.evidence or "none"
        if status.state != "ok":
            confidence = "low"
        elif p >= 0.80 and evidence == "strong":
            confidence = "high"
        elif p >= 0.60 and evidence != "none":
            confidence = "medium"
        else:
            confidence = "low"
        show = status.state == "ok" and label != "NOT ENOUGH INFO" and confidence != "low"
        return Display(show=show, tone=tone, confidence=confidence)


CONSTANT = _ConstantPolicy({"SUPPORTS": 0.60, "REFUTES": 0.60}, {"SUPPORTS": 0.80, "REFUTES": 0.80},
                           ("strong", "weak"), {"name": "constant 0.80 / 0.60 (before the fitted policy)"})


def display_for(label: str, probabilities: dict[str, float], status: Status,
                policy: DisplayPolicy | None = None) -> Display:
    """The display hint of a verdict with this label, calibrated probabilities and status."""
    return (policy or CONSTANT).display(label, probabilities, status)
