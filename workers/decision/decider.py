"""The configured decision: `decision.method` = layer (the fitted JSON in `decision.decision_params`)
| threshold | argmax (the per-window rules with the settings' threshold and gap). The display policy
fitted with it is loaded by workers/display/loader.py.

A fitted decision is refused for an NLI model it was not fitted on: its thresholds and weights
are about another model's probabilities."""
from __future__ import annotations

from pathlib import Path

from schemas.errors import DialcheckError
from schemas.settings import DecisionSettings

from .methods import DecisionMethod, load, method


class DecisionModelMismatch(DialcheckError, ValueError):
    """A fitted decision was fitted on another NLI model's probabilities: its thresholds and
    weights mean nothing for this model, so it is refused rather than silently mis-deciding."""


def check_nli(decision, path: str, nli_version: str | None) -> None:
    fitted = (decision.meta.get("nli_model") or {}).get("version")
    if not fitted or not nli_version or nli_version == "unknown" or fitted == nli_version:
        return
    raise DecisionModelMismatch(
        f"decision {Path(path).name} was fitted for NLI model {fitted!r}, but the configured model is "
        f"{nli_version!r}: refit it (`dialcheck tune fit`) or set DIALCHECK_DECISION=threshold")


def decision_path(settings: DecisionSettings, protocol: str) -> Path:
    """`decision-<protocol>.json` beside `decision_params` when there is one, else decision_params."""
    path = Path(settings.decision_params or "")
    specific = path.with_name(f"decision-{protocol}.json")
    return specific if specific.exists() else path


def load_decision(settings: DecisionSettings, protocol: str = "e2e", nli_version: str | None = None) -> DecisionMethod:
    """The decision the verify stage calls, checked against the NLI model it will read."""
    if settings.method != "layer":
        return method(settings.method, {"threshold": settings.entail_threshold, "gap": settings.win_gap}
                      if settings.method == "threshold" else {})
    path = decision_path(settings, protocol)
    if not path.is_file():
        raise FileNotFoundError(f"decision layer {path} not found: run `dialcheck tune fit` or set "
                                "DIALCHECK_DECISION=threshold")
    decision = load(path)
    check_nli(decision, str(path), nli_version)
    return decision
