"""Claim surfaces R0–R4 (BiCon-Gate §2): each step is cumulative over the previous one."""
from __future__ import annotations

from dataclasses import dataclass, field

from schemas.protocols import SURFACES

from .contractions import decontract
from .pronouns import find_pronoun, parse_ahead, parse_cache_on, resolve
from .punctuation import restore_punctuation
from .truecasing import truecase

SURFACE_NAMES = SURFACES[:SURFACES.index("r4") + 1]  # the rule rewrites, r0 to r4, of the one list


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
    r1, r2, r3 = r1_to_r3(claim)
    r4, alternatives = resolve(r3, context, limit=candidates)
    return ClaimSurfaces(claim, r1, r2, r3, r4, alternatives)


def r1_to_r3(claim: str) -> tuple[str, str, str]:
    r1 = decontract(claim)
    r2 = restore_punctuation(r1)
    return r1, r2, truecase(r2)


def parse_batch_ahead(claims: list[tuple[list[str], str]]) -> None:
    """Parse, batched, every text `build_surfaces` will parse for these (context, claim) pairs:
    each claim's R3 form, then the context turns of the claims that have a pronoun to resolve.
    Only with the parse cache on (settings `perf.cache_entries`); verdicts are unchanged."""
    if not parse_cache_on():
        return
    r3s = [r1_to_r3(claim)[2] for _, claim in claims]
    parse_ahead(r3s)
    parse_ahead(turn for (context, _), r3 in zip(claims, r3s) if find_pronoun(r3) for turn in context)


__all__ = ["ClaimSurfaces", "SURFACE_NAMES", "build_surfaces", "parse_batch_ahead", "decontract", "restore_punctuation", "truecase",
           "resolve"]
