"""The guarded rule's measured, unshipped variants, for the yardstick (lab/tuning/lodo.py) and the fit
(lab/tuning/fit.py); the runtime (workers/decision/guarded.py) knows only the shipped one.

- coverage scopes beyond "all" / "dialogue": a claim without dialogue context is still asked its names
  and numbers ("dialogue+names"), a supporting window on its topic ("dialogue+topic", the test REFUTES
  evidence already passes) or one naming its grammatical subject ("dialogue+subject"); measured in
  docs/history/results-2026-12-02.md (2–10 points of macro-F1 lost on FoolMeTwice, WiCE or
  TRUE-DialFact when left out);
- `slot_refutes`: a supported claim whose number an on-topic supporting window states differently
  (a value in the same slot) is REFUTES instead of NOT ENOUGH INFO;
- the fit's label codes: GOLD_CODES with NOT_S, a binary set's NOT SUPPORTS.

`guarded_method(params)` is the guarded method for any of these parameter sets: the runtime's class
when the shipped rule covers them, else `VariantGuardedMethod`; `STANDALONE` names the standalone
levels ("names", "topic", "subject") a lab caller can select by name (`with_standalone`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from workers.decision import guarded
from workers.decision.guarded import COVER_LEVELS, NEI, R, S, Coverage, GuardedParams, GuardedRule
from workers.decision.methods import GuardedMethod
from workers.decision.sufficiency import ON_TOPIC

NOT_S = 3
GOLD_CODES = {"SUPPORTS": S, "REFUTES": R, "NOT ENOUGH INFO": NEI, "NOT SUPPORTS": NOT_S}
TOPIC = "topic"  # a level of its own: the supporting window must be on the claim's topic (as REFUTES's must)
SUBJECT = "subject"  # weaker: the supporting window (or its title) names the claim's grammatical subject
COVER_SCOPES = {**guarded.COVER_SCOPES, "dialogue+names": "names", "dialogue+topic": TOPIC,
                "dialogue+subject": SUBJECT}
STANDALONE = {"names": "dialogue+names", "topic": "dialogue+topic", "subject": "dialogue+subject"}


@dataclass(frozen=True)
class VariantParams(GuardedParams):
    """The shipped parameters plus the variants' (every scope of COVER_SCOPES, `slot_refutes`)."""
    slot_refutes: bool = False

    scopes: ClassVar[dict] = COVER_SCOPES


class VariantCoverage(Coverage):
    """The coverage test with the TOPIC and SUBJECT levels."""

    def covers(self, windows: tuple[int, ...]) -> bool:
        if self.level == TOPIC:
            return any(float(self.ev.on_topic[i]) >= ON_TOPIC for i in windows)
        if self.level == SUBJECT:
            return any(float(self.ev.coverage[i, 2]) > 0 for i in windows)
        return super().covers(windows)


class VariantRule(GuardedRule):
    params: VariantParams

    def level_coverage(self, ev) -> Coverage:
        return VariantCoverage(ev, self.params.level(ev), COVER_LEVELS)

    def not_covered(self, ev, order, topical, cov):
        """With `slot_refutes`: REFUTES from the first on-topic supporting window whose number clashes."""
        if not self.params.slot_refutes or cov.level == "none":
            return None
        clash = next((i for i in order if topical[i] and cov.missing((i,))[1]), None)
        return (R, clash) if clash is not None else None


class VariantGuardedMethod(GuardedMethod):
    """The guarded method over VariantParams (fitted and scored by the yardstick, never shipped)."""
    params_type = VariantParams
    rule_type = VariantRule


def guarded_method(params: dict, meta: dict | None = None) -> GuardedMethod:
    """The guarded method for these parameters: the runtime's when it knows them all, else the variant."""
    try:
        return GuardedMethod(params, meta)
    except ValueError:
        return VariantGuardedMethod(params, meta)


def with_standalone(method: GuardedMethod, level: str) -> VariantGuardedMethod:
    """This guarded method (the shipped one, loaded) with claims that came without dialogue context
    asked `level` of STANDALONE ("names", "topic", "subject"); its thresholds and meta unchanged."""
    if level not in STANDALONE:
        raise ValueError(f"standalone level {level!r} not in {tuple(STANDALONE)}")
    return VariantGuardedMethod({**method.params, "cover_scope": STANDALONE[level]}, method.meta, method.rule)


def effective_cover(ev, cover: str, cover_scope: str = "all") -> str:
    """The coverage level asked of this claim under any scope (the fit groups claims by it)."""
    return VariantParams(0.0, 0.0, cover=cover, cover_scope=cover_scope).level(ev)


def covers(ev, windows: tuple[int, ...], level: str) -> bool:
    """`VariantCoverage.covers` for one question (the fit's summaries ask it window by window)."""
    return VariantCoverage(ev, level).covers(windows)


def slot_clash(ev, window: int) -> bool:
    """Does this window state one of the claim's numbers differently (a value in the same slot)?"""
    return guarded.missing_terms(ev, (window,))[1]


__all__ = ["COVER_SCOPES", "GOLD_CODES", "NOT_S", "STANDALONE", "SUBJECT", "TOPIC", "VariantGuardedMethod",
           "VariantParams", "covers", "effective_cover", "guarded_method", "slot_clash", "with_standalone"]
