"""ClaimDecider: a claim's window decisions → (label, probabilities, the window shown first).

It always holds one `DecisionLayer`: the fitted layer from `verify.decision_params` (`layer`), or
the per-window rule (`threshold`, `argmax`) with the settings' threshold and gap, so the rule
exists once (workers/decision/rule.py) whichever way the claim is decided."""
from __future__ import annotations

from pathlib import Path

from schemas.settings import VerifySettings

from .features import ClaimEvidence
from .layer import DecisionLayer
from .rule import NO_EVIDENCE, WindowDecision


class DecisionModelMismatch(ValueError):
    """A fitted decision was fitted on another NLI model's probabilities: its thresholds and
    weights mean nothing for this model, so it is refused rather than silently mis-deciding."""


def check_nli(layer: DecisionLayer, path: str, nli_version: str | None) -> None:
    fitted = (layer.meta.get("nli_model") or {}).get("version")
    if not fitted or not nli_version or nli_version == "unknown" or fitted == nli_version:
        return
    raise DecisionModelMismatch(
        f"decision {Path(path).name} was fitted for NLI model {fitted!r}, but the configured model is "
        f"{nli_version!r}: refit it (`dialcheck tune fit`) or set DIALCHECK_DECISION=threshold")


def load_layer(settings: VerifySettings, protocol: str) -> tuple[DecisionLayer, str | None]:
    """The configured decision: (layer, the JSON it came from or None for a rule)."""
    if settings.decision != "layer":
        return DecisionLayer.rule(settings.decision, settings.entail_threshold, settings.win_gap), None
    path = Path(settings.decision_params or "")
    specific = path.with_name(f"decision-{protocol}.json")
    path = specific if specific.exists() else path
    if not path.is_file():
        raise FileNotFoundError(f"decision layer {path} not found: run `dialcheck tune fit` or set "
                                "DIALCHECK_DECISION=threshold")
    return DecisionLayer.load(path), str(path)


class ClaimDecider:
    """The claim label from a claim's window decisions (`verify.decision` = layer | threshold | argmax)."""

    def __init__(self, settings: VerifySettings, protocol: str = "e2e", nli_version: str | None = None):
        self.decision = settings.decision
        self.layer, self.path = load_layer(settings, protocol)
        if self.path:  # a fitted decision must come from this NLI model's probabilities
            check_nli(self.layer, self.path, nli_version)

    @property
    def window_rule(self) -> str:
        return "argmax" if self.decision == "argmax" else "threshold"

    @property
    def rule_name(self) -> str:
        """What decided, as the verdict's rationale names it ('layer:logreg', 'threshold', ...)."""
        return f"layer:{self.layer.method}" if self.path else self.decision

    @property
    def version(self) -> str:
        return f"{self.layer.method}@{Path(self.path).name}" if self.path else self.decision

    def decide(self, ev: ClaimEvidence, decisions: list[WindowDecision]
               ) -> tuple[str, dict[str, float], WindowDecision | None]:
        """(label, probabilities per label, the window shown first as evidence); `ev` holds the
        same windows as `decisions`, in the same order."""
        if not decisions:  # no evidence read (none retrieved, or an outage): nothing to decide on
            return "NOT ENOUGH INFO", dict(NO_EVIDENCE), None
        label, probs, best = self.layer.decide(ev)
        return label, probs, decisions[best] if best is not None else None
