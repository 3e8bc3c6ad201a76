"""Fitting the display policy (workers/display.py): when is a badge shown, and when is it "high"?

For each badge label the least p(label) at which it is shown, and the evidence strengths it may
rest on, are chosen by a grid search that keeps the shown badges right ≥ `floor` (80 %) on every
training set — the least total shortfall where no grid point does — at the largest mean coverage
(share of a set's claims shown); then "high" thresholds (≥ the shown ones) that keep high badges
right ≥ `high_floor` (90 %) on every training set at the largest mean high coverage. A set with
fewer than `min_badges` badges at a grid point puts no floor on it (too few to measure), and a set
whose badges reach the floor at no grid point is left out of the floors (named in the policy's
meta, `unreachable`): otherwise its shortfall alone would push every threshold to the top and hide
almost every badge on the sets that can be served.
`dialcheck tune decision --lodo` fits it leaving each set out in turn, so the numbers it reports
for a set were never fitted on that set."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from schemas import Status
from workers.display import BADGES, DisplayPolicy

GRID = tuple(np.round(np.arange(0.30, 1.001, 0.02), 2)) + (1.01,)  # 1.01: never shown
EVIDENCE_CHOICES = (("strong",), ("strong", "weak"))


@dataclass
class BadgeRows:
    """One set's decided claims, as the display sees them."""
    label: np.ndarray  # per claim: index into BADGES, or -1 (NOT ENOUGH INFO)
    p: np.ndarray  # p(label)
    strong: np.ndarray  # the evidence is strong
    weak: np.ndarray  # the evidence is weak
    right: np.ndarray  # the badge would be right

    @classmethod
    def of(cls, decisions, rights: list[bool]) -> "BadgeRows":
        label = np.array([BADGES.index(d.label) if d.label in BADGES else -1 for d in decisions], dtype=int)
        p = np.array([float(d.probabilities.get(d.label, 0.0)) for d in decisions])
        ev = [d.evidence for d in decisions]
        return cls(label, p, np.array([e == "strong" for e in ev]), np.array([e == "weak" for e in ev]),
                   np.array(rights, dtype=bool))


def shown_mask(rows: BadgeRows, show: tuple[float, float], evidence: tuple[str, ...]) -> np.ndarray:
    ok = rows.strong | (rows.weak if "weak" in evidence else False)
    t = np.where(rows.label == 0, show[0], np.where(rows.label == 1, show[1], 9.0))
    return ok & (rows.label >= 0) & (rows.p >= t)


def _shortfall(right: np.ndarray, floor: float, min_badges: int) -> float:
    return max(0.0, floor - float(right.mean())) if len(right) >= min_badges else 0.0


def _reachable(rows: BadgeRows, floor: float, min_badges: int, evidence=("strong",)) -> bool:
    """Does some grid point show ≥ min_badges of this set's badges at ≥ floor precision?"""
    for ts in GRID:
        for tr in GRID:
            m = shown_mask(rows, (ts, tr), evidence)
            if m.sum() >= min_badges and rows.right[m].mean() >= floor:
                return True
    return False


def fit_display(sets: dict[str, BadgeRows], floor: float = 0.80, high_floor: float = 0.90,
                min_badges: int = 10) -> DisplayPolicy:
    held = {n: r for n, r in sets.items() if _reachable(r, floor, min_badges)}
    best = None
    for evidence in EVIDENCE_CHOICES:
        for ts in GRID:
            for tr in GRID:
                short, cover = 0.0, []
                for name, rows in sets.items():
                    m = shown_mask(rows, (ts, tr), evidence)
                    if name in held:
                        short += _shortfall(rows.right[m], floor, min_badges)
                    cover.append(float(m.mean()) if len(m) else 0.0)
                key = (-round(short, 6), round(float(np.mean(cover)), 6), -ts, -tr)
                if best is None or key > best[0]:
                    best = (key, (ts, tr), evidence)
    (_, (ts, tr), evidence) = best
    high = None
    for hs in [g for g in GRID if g >= ts]:
        for hr in [g for g in GRID if g >= tr]:
            short, cover = 0.0, []
            for name, rows in sets.items():
                m = shown_mask(rows, (hs, hr), ("strong",))
                if name in held:
                    short += _shortfall(rows.right[m], high_floor, min_badges)
                cover.append(float(m.mean()) if len(m) else 0.0)
            key = (-round(short, 6), round(float(np.mean(cover)), 6), -hs, -hr)
            if high is None or key > high[0]:
                high = (key, (hs, hr))
    hs, hr = high[1]
    return DisplayPolicy({"SUPPORTS": float(ts), "REFUTES": float(tr)}, {"SUPPORTS": float(hs), "REFUTES": float(hr)},
                         tuple(evidence), {"floor": floor, "high_floor": high_floor, "min_badges": min_badges,
                                           "fitted_on": sorted(sets), "unreachable": sorted(set(sets) - set(held))})


def displays(policy, decisions) -> list:
    """Each decided claim's display under `policy` (FV: nothing failed, so status is ok)."""
    return [policy.display(d.label, d.probabilities, Status("ok", None, d.evidence)) for d in decisions]
