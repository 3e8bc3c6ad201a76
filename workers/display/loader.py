"""Where the display policy is read from: the shipped policy beside this code (params/display.json),
an adopted model's DIR/display.json beside its DIR/decision.json, or the file `decision.display_params`
names; refused like the decision when it was fitted for another NLI model's probabilities."""
from __future__ import annotations

from pathlib import Path

from schemas.settings import DecisionSettings

from ..decision.decider import check_nli, decision_path
from .policy import DisplayPolicy

SHIPPED = Path(__file__).resolve().parent / "params" / "display.json"


def display_path_for(decision: str | Path) -> Path:
    """Where the display policy fitted with this decision file lives (and `dialcheck tune fit` writes
    it): the shipped policy for the shipped decision, else beside the decision file
    (decision[-X].json → display[-X].json)."""
    decision = Path(decision)
    shipped = Path(DecisionSettings.model_fields["decision_params"].default)
    if decision.resolve() == shipped.resolve():
        return SHIPPED
    return decision.with_name(f"display{decision.stem[len('decision'):]}.json")


def display_file(settings: DecisionSettings, protocol: str = "e2e") -> Path | None:
    """The file `load_display` reads (None: `display_params` is empty, the constant rule). Left at its
    default, the policy fitted with the configured decision file when there is one (an adopted model's
    DIR/decision.json comes with DIR/display.json)."""
    if not settings.display_params:
        return None
    default = DecisionSettings.model_fields["display_params"].default
    path = Path(settings.display_params)
    if settings.display_params == default and settings.method == "layer":
        fitted = display_path_for(decision_path(settings, protocol))
        path = fitted if fitted.is_file() else path
    return path


def load_display(settings: DecisionSettings, nli_version: str | None = None, protocol: str = "e2e",
                 required: bool = False):
    """The display policy of this configuration (None: the constant rule, also for a named file that is
    not there unless `required`: a reload must not fall back silently, it raises FileNotFoundError).
    A broken file raises ValueError (or KeyError/TypeError), one fitted for another NLI model
    DecisionModelMismatch (a ValueError)."""
    path = display_file(settings, protocol)
    if path is None or (not required and not path.is_file()):
        return None
    policy = DisplayPolicy.load(path)
    check_nli(policy, str(path), nli_version)
    return policy
