"""The rewrite gate: thresholds and weights of the C+R0 <=> Rk score."""
from __future__ import annotations

from typing import Annotated

from pydantic import field_validator
from pydantic_settings import NoDecode

from schemas.settings.base import Section, env


class GateSettings(Section):
    tau_ir: float = env("TAU_IR", 0.50, "Gate threshold when the surface feeds retrieval.", ge=0, le=1)
    tau_fv: float = env("TAU_FV", 0.80, "Gate threshold when the surface feeds verification.",
                         ge=0, le=1)
    weights: Annotated[tuple[float, float, float], NoDecode] = env(
        "GATE_WEIGHTS", (0.4, 0.2, 0.4), "alpha, beta, gamma of the gate score (comma list).")
    context_turns: int = env("GATE_CONTEXT_TURNS", 2,
                              "Context turns C the gate reads in C+R0 <=> Rk (antecedents of R4 live there).", ge=0, le=50)

    @field_validator("weights", mode="before")
    @classmethod
    def _split(cls, v):
        return tuple(float(x) for x in v.split(",")) if isinstance(v, str) else v

    @field_validator("weights")
    @classmethod
    def _non_negative(cls, v):
        if any(x < 0 for x in v):
            raise ValueError("weights must be >= 0")
        return v
