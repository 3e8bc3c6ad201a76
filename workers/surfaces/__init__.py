"""Claim surfaces R0–R4 (BiCon-Gate §2): each step is cumulative over the previous one."""
from __future__ import annotations

from dataclasses import dataclass, field

from .contractions import decontract
from .pronouns import resolve
from .punctuation import restore_punctuation
from .truecasing import truecase

SURFACE_NAMES = ("r0", "r1", "r2", "r3", "r4")


@dataclass
class ClaimSurfaces:
    r0: str
    r1: str
    r2: str
    r3: str
    r4: str
    r4_alternatives: list[str] = field(default_factory=list)  # R4 with each agreeing candidate, salience order

    def get(self, name: str) -> str:
        return getattr(self, name)


def build_surfaces(context: list[str], claim: str, candidates: int = 10) -> ClaimSurfaces:
    r1 = decontract(claim)
    r2 = restore_punctuation(r1)
    r3 = truecase(r2)
    r4, alternatives = resolve(r3, context, limit=candidates)
    return ClaimSurfaces(claim, r1, r2, r3, r4, alternatives)


__all__ = ["ClaimSurfaces", "SURFACE_NAMES", "build_surfaces", "decontract", "restore_punctuation", "truecase",
           "resolve"]
