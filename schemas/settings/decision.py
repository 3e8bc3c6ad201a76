"""The decision: the label from the window probabilities (the fitted layer or a rule) and the display
policy that says when a badge is shown."""
from __future__ import annotations

from typing import Literal

from pydantic import ValidationInfo, field_validator

from schemas.settings.base import REPO_ROOT, Section, env, existing_path


class DecisionSettings(Section):
    method: Literal["layer", "threshold", "argmax"] = env(
        "DECISION", "layer",
        "Claim label from the window probabilities: 'layer' (the fitted decision layer in decision_params), "
        "'threshold' (entail/contradict >= threshold with the win gap, most "
        "confident window wins) or 'argmax' of the NLI classes per window.")
    decision_params: str = env("DECISION_PARAMS", str(REPO_ROOT / "workers" / "decision" / "params" / "decision.json"),
                                "Decision layer JSON (dialcheck-decision v1, `dialcheck tune fit`); a file named "
                                "decision-<protocol>.json next to it is preferred for that protocol.")
    display_params: str = env("DISPLAY_PARAMS", str(REPO_ROOT / "workers" / "display" / "params" / "display.json"),
                               "Display policy JSON (dialcheck-display v1, written by `dialcheck tune fit --method guarded`): when a badge is "
                               "shown and how confident; empty or missing file: the constant rule of workers/display/policy.py.")
    entail_threshold: float = env("ENTAIL_THRESHOLD", 0.55, "Minimum entailment (or contradiction) probability.",
                                   ge=0, le=1)
    win_gap: float = env("WIN_GAP", 0.15, "Required margin over the other two classes.", ge=0, le=1)

    @field_validator("decision_params")
    @classmethod
    def _decision_file_exists(cls, v: str, info: ValidationInfo) -> str:
        if info.data.get("method", "layer") != "layer":
            return v
        return existing_path(v, "file", "the decision layer JSON (`dialcheck tune fit`; or DIALCHECK_DECISION=threshold)")

    @field_validator("display_params")
    @classmethod
    def _display_file_exists(cls, v: str) -> str:
        return existing_path(v, "file", "the display policy JSON (empty: the constant rule)") if v else v
