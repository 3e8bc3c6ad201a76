"""Verification and the decision: NLI windows, the decision layer and display policy files, check-worthiness."""
from __future__ import annotations

from typing import Literal

from pydantic import ValidationInfo, field_validator

from schemas.protocols import SURFACES
from schemas.settings.base import REPO_ROOT, Section, env, existing_path


class VerifySettings(Section):
    hypothesis_context_turns: int = env("HYP_CONTEXT_TURNS", 0,
                                         "Context turns prepended to the claim as the verifier's NLI hypothesis (0: the "
                                         "claim alone).",
                                         ge=0, le=50)
    max_windows: int = env("MAX_WINDOWS", 24, "Windows kept by the lexical pre-score.", ge=1, le=1000)
    window_first: int = env("WINDOW_FIRST", 0,
                             "Adaptive window budget: the verifier reads this many of a claim's windows (best pre-score "
                             "first), then WINDOW_CHUNK more at a time while any read window's entailment or "
                             "contradiction reaches 0.20 (workers/windows.py QUIET); 0 (default): all MAX_WINDOWS in one "
                             "call. Off by default: 8 reads 5-11 % fewer windows on the long-evidence sets and, left out "
                             "(tune decision --lodo, same tree, 0 vs 8), keeps shown coverage and precision within "
                             "0.5 points on every set (WiCE macro-F1 69.91 -> 70.43), but end to end a claim has about "
                             "3 windows, so the stream gains little; not yet benchmarked as a default.",
                             ge=0, le=1000)
    window_chunk: int = env("WINDOW_CHUNK", 8, "Windows read per later round of the adaptive window budget.",
                             ge=1, le=1000)
    entail_threshold: float = env("ENTAIL_THRESHOLD", 0.55, "Minimum entailment (or contradiction) probability.",
                                   ge=0, le=1)
    title_in_premise: bool = env("TITLE_IN_PREMISE", False,
                                  "Prefix each evidence window with its passage title ('Title. window') before NLI, so "
                                  "a window that names its subject only by a pronoun is read about that subject.")
    win_gap: float = env("WIN_GAP", 0.15, "Required margin over the other two classes.", ge=0, le=1)
    decision: Literal["layer", "threshold", "argmax"] = env(
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
    checkworthy: bool = env("CHECKWORTHY", False,
                             "Skip every kind of turn that states no checkable fact (also first-person opinions and "
                             "short reactions, not only skip_turns).")
    skip_turns: str = env("SKIP_TURNS", "question,greeting,thanks",
                           "Turns made only of these kinds are answered NOT ENOUGH INFO unchecked (rationale "
                           "'not-check-worthy' and its kind; verdict display not shown): comma-separated from question, "
                           "greeting, thanks, personal, reaction, empty; empty: check every turn.",
                           pattern=r"^((question|greeting|thanks|personal|reaction|empty)(,(question|greeting|thanks|personal|reaction|empty))*)?$")
    segment: bool = env("SEGMENT", False,
                         "Split turns into claims (sentences, stand-alone and/but clauses): each claim gets a verdict and "
                         "the turn's verdict is its worst claim's.")
    max_claims_per_turn: int = env("MAX_CLAIMS_PER_TURN", 16,
                                    "Segmentation checks at most this many claims of one turn (the first ones); the "
                                    "rest are named in the turn verdict's status reason and rationale, so one long "
                                    "turn cannot cost a batch its deadline.", ge=1, le=1000)
    surface: Literal[SURFACES] = env(
        "SURFACE", "r0",
        "Claim surface the stream worker verifies and retrieves with when --surface is not given: r0 the reply as "
        "written (default: the shipped decision and display are fitted on R0 rows, and end to end on held-out "
        "dialogue data R0 scored at least as well as R4 + gate twice, without the gate's NLI + encoder call per "
        "claim), r4g R1-R4 rewrites behind the BiCon gate, r5/r5g the LLM rewrite (DIALCHECK_LLM_URL).")
    check_contracts: bool = env("CHECK_CONTRACTS", False,
                                 "Run every stage on checked views of the claim states: a stage that reads or writes a "
                                 "field its @component does not declare fails (workers/state.py). For tests and "
                                 "debugging; the test suite turns it on.")

    @field_validator("decision_params")
    @classmethod
    def _decision_file_exists(cls, v: str, info: ValidationInfo) -> str:
        if info.data.get("decision", "layer") != "layer":
            return v
        return existing_path(v, "file", "the decision layer JSON (`dialcheck tune fit`; or DIALCHECK_DECISION=threshold)")

    @field_validator("display_params")
    @classmethod
    def _display_file_exists(cls, v: str) -> str:
        return existing_path(v, "file", "the display policy JSON (empty: the constant rule)") if v else v
