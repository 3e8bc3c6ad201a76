"""Which claims are checked: the surface read, the turns left unchecked, and splitting turns into claims."""
from __future__ import annotations

from typing import Literal

from schemas.protocols import SURFACES
from schemas.settings.base import Section, env


class ClaimSettings(Section):
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
