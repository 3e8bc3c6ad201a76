"""Fitting the display policy (workers/display/): when is a badge shown, and when is it "high"?

The shipped fit (`fit_badges`) first fits a badge scorer — per badge label, a logistic regression of
"this badge is right" on BADGE_FEATURES, each training set weighing the same (`fit_scorer`) — and
hides every SUPPORTS with uncovered terms (`complete`); the thresholds below are then chosen on the
score instead of p(label) (`fit_display` alone is the fit on p, the policy before the scorer); and
a SUPPORTS the structured checks disagree with is never shown (`checked`, a veto on top).

For each badge label the least score at which it is shown, and the evidence strengths it may
rest on, are chosen by a grid search that keeps the shown badges right ≥ `floor` (80 %) on every
training set — the least total shortfall where no grid point does — at the largest mean coverage
(share of a set's claims shown); then "high" thresholds (≥ the shown ones) that keep high badges
right ≥ `high_floor` (90 %) on every training set at the largest mean high coverage. A set with
fewer than `min_badges` badges at a grid point puts no floor on it (too few to measure), and a set
whose badges reach the floor at no grid point is left out of the floors (named in the policy's
meta, `unreachable`), and so is HybriDial, whose labels are not attribution (datasets.NO_FLOOR): otherwise its shortfall alone would push every threshold to the top and hide
almost every badge on the sets that can be served.
`dialcheck tune decision --lodo` fits it leaving each set out in turn, so the numbers it reports
for a set were never fitted on that set."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from schemas import Status
from workers.display import BADGE_FEATURES, BADGES, BadgeFacts, BadgeScorer, DisplayPolicy

from .datasets import NO_FLOOR, SHOWN_FLOOR

GRID = tuple(np.round(np.arange(0.30, 1.001, 0.02), 2)) + (1.01,)  # 1.01: never shown
EVIDENCE_CHOICES = (("strong",), ("strong", "weak"))


@dataclass
class BadgeRows:
    """One set's decided claims, as the display sees them."""
    label: np.ndarray  # per claim: index into BADGES, or -1 (NOT ENOUGH INFO)
    p: np.ndarray  # p(label), or the badge score once `scored`
    strong: np.ndarray  # the evidence is strong
    weak: np.ndarray  # the evidence is weak
    right: np.ndarray  # the badge would be right
    x: np.ndarray | None = None  # (n, len(BADGE_FEATURES)): what a badge scorer reads
    complete: np.ndarray | None = None  # nothing of the claim is uncovered
    agreed: np.ndarray | None = None  # the structured checks agree (workers/decision/checks.py)

    @classmethod
    def of(cls, decisions, rights: list[bool], evs=None) -> "BadgeRows":
        label = np.array([BADGES.index(d.label) if d.label in BADGES else -1 for d in decisions], dtype=int)
        p = np.array([float(d.probabilities.get(d.label, 0.0)) for d in decisions])
        ev = [d.evidence for d in decisions]
        x = complete = agreed = None
        if evs is not None:
            facts = [BadgeFacts.of(d, e) for d, e in zip(decisions, evs)]
            x = np.array([f.vector(pi, s) if f is not None else [pi] + [0.0] * (len(BADGE_FEATURES) - 1)
                          for f, pi, s in zip(facts, p, ev)]).reshape(len(decisions), len(BADGE_FEATURES))
            complete = np.array([f is not None and f.uncovered == 0 for f in facts], dtype=bool)
            # asked of SUPPORTS only (the parse is the costly part; the display asks nothing of the others)
            agreed = np.array([f is not None and (k != 0 or f.agreed()) for f, k in zip(facts, label)], dtype=bool)
        return cls(label, p, np.array([e == "strong" for e in ev]), np.array([e == "weak" for e in ev]),
                   np.array(rights, dtype=bool), x, complete, agreed)

    def scored(self, scorer: BadgeScorer | None, complete: bool, checked: bool = False) -> "BadgeRows":
        """These rows as a policy with `scorer`, `complete` and `checked` sees them: p is the badge
        score, and an incomplete SUPPORTS, or one the structured checks disagree with, rests on no
        evidence it accepts."""
        p = self.p if scorer is None else np.array(
            [scorer.score(BADGES[k], list(v)) if k >= 0 else 0.0 for k, v in zip(self.label, self.x)])
        ok = ~((self.label == 0) & ~self.complete) if complete else np.ones(len(self.p), bool)
        if checked and self.agreed is not None:  # rows made without evidence carry no checks to apply
            ok &= ~((self.label == 0) & ~self.agreed)
        return BadgeRows(self.label, p, self.strong & ok, self.weak & ok, self.right, self.x, self.complete, self.agreed)


def fit_scorer(sets: dict[str, BadgeRows], C: float = 1.0) -> BadgeScorer:
    """Per badge label, a logistic regression of "right" on BADGE_FEATURES over the training sets'
    decided claims, each set weighing the same (a set with many badges must not speak for all)."""
    from sklearn.linear_model import LogisticRegression

    models = {}
    for k, label in enumerate(BADGES):
        parts = [(r.x[r.label == k], r.right[r.label == k]) for r in sets.values() if (r.label == k).sum()]
        if not parts:
            continue
        X = np.vstack([x for x, _ in parts])
        y = np.concatenate([y for _, y in parts])
        w = np.concatenate([np.full(len(y_), len(y) / (len(parts) * len(y_))) for _, y_ in parts])
        mean, scale = X.mean(0), X.std(0)
        scale[scale < 1e-9] = 1.0
        if len(set(y.tolist())) < 2:  # every badge right (or wrong): nothing to tell apart
            models[label] = {"mean": mean.tolist(), "scale": scale.tolist(), "coef": [0.0] * X.shape[1],
                             "intercept": 10.0 if y.all() else -10.0}
            continue
        clf = LogisticRegression(C=C, max_iter=5000).fit((X - mean) / scale, y, sample_weight=w)
        models[label] = {"mean": mean.tolist(), "scale": scale.tolist(), "coef": clf.coef_[0].tolist(),
                         "intercept": float(clf.intercept_[0])}
    return BadgeScorer(models)


def fit_badges(sets: dict[str, BadgeRows], scorer: bool = True, complete: bool = True, checked: bool = True,
               refit_checked: bool = False, **floors) -> DisplayPolicy:
    """The display policy: a badge scorer fitted on the training sets (`scorer`), the SUPPORTS
    completeness rule (`complete`) and checks rule (`checked`: the structured checks must agree,
    workers/decision/checks.py), and the thresholds `fit_display` chooses on the scores.

    The checks rule is a veto on top of thresholds fitted without it (`refit_checked` False, shipped):
    it can only hide badges. Fitted with it (`refit_checked`), the thresholds fall to where the
    training sets' floors hold without the vetoed badges, and a set left out gets the lower ones:
    measured (docs/results.md), WiCE's shown precision fell 12 points that way."""
    badge_scorer = fit_scorer(sets) if scorer else None
    policy = fit_display({n: r.scored(badge_scorer, complete, checked and refit_checked) for n, r in sets.items()},
                         **floors)
    return DisplayPolicy(policy.show, policy.high, policy.evidence, policy.meta, badge_scorer, complete, checked)


def shown_mask(rows: BadgeRows, show: tuple[float, float], evidence: tuple[str, ...]) -> np.ndarray:
    ok = rows.strong | (rows.weak if "weak" in evidence else False)
    t = np.where(rows.label == 0, show[0], np.where(rows.label == 1, show[1], 9.0))
    return ok & (rows.label >= 0) & (rows.p >= t)


def share_right(right: np.ndarray, z: float = 0.0) -> float:
    """The share of `right` badges, or with z > 0 its Wilson lower bound (z standard errors below):
    a floor held this way is not met by a handful of badges that happened to be right."""
    n = len(right)
    p = float(right.mean())
    if z <= 0.0:
        return p
    return (p + z * z / (2 * n) - z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))) / (1 + z * z / n)


def _shortfall(right: np.ndarray, floor: float, min_badges: int, z: float = 0.0) -> float:
    return max(0.0, floor - share_right(right, z)) if len(right) >= min_badges else 0.0


def _reachable(rows: BadgeRows, floor: float, min_badges: int, evidence=("strong",), z: float = 0.0) -> bool:
    """Does some grid point show ≥ min_badges of this set's badges at ≥ floor precision?"""
    for ts in GRID:
        for tr in GRID:
            m = shown_mask(rows, (ts, tr), evidence)
            if m.sum() >= min_badges and share_right(rows.right[m], z) >= floor:
                return True
    return False


def fit_display(sets: dict[str, BadgeRows], floor: float = SHOWN_FLOOR, high_floor: float = 0.90,
                min_badges: int = 10, show_z: float = 0.0, high_z: float = 0.0) -> DisplayPolicy:
    """`show_z` / `high_z`: hold the floors on the Wilson lower bound of each set's share right,
    that many standard errors below it (0: on the share itself)."""
    # a set whose labels are not attribution (NO_FLOOR: HybriDial) is scored but holds no floor
    held = {n: r for n, r in sets.items() if n not in NO_FLOOR and _reachable(r, floor, min_badges, z=show_z)}
    best = None
    for evidence in EVIDENCE_CHOICES:
        for ts in GRID:
            for tr in GRID:
                short, cover = 0.0, []
                for name, rows in sets.items():
                    m = shown_mask(rows, (ts, tr), evidence)
                    if name in held:
                        short += _shortfall(rows.right[m], floor, min_badges, show_z)
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
                    short += _shortfall(rows.right[m], high_floor, min_badges, high_z)
                cover.append(float(m.mean()) if len(m) else 0.0)
            key = (-round(short, 6), round(float(np.mean(cover)), 6), -hs, -hr)
            if high is None or key > high[0]:
                high = (key, (hs, hr))
    hs, hr = high[1]
    return DisplayPolicy({"SUPPORTS": float(ts), "REFUTES": float(tr)}, {"SUPPORTS": float(hs), "REFUTES": float(hr)},
                         tuple(evidence), {"floor": floor, "high_floor": high_floor, "min_badges": min_badges,
                                           **({"show_z": show_z} if show_z else {}),
                                           **({"high_z": high_z} if high_z else {}),
                                           "fitted_on": sorted(sets),
                                           "unreachable": sorted(set(sets) - set(held) - set(NO_FLOOR)),
                                           **({"no_floor": sorted(set(sets) & set(NO_FLOOR))}
                                              if set(sets) & set(NO_FLOOR) else {})})


TRAINING_FLOORS = tuple(np.round(np.arange(0.80, 0.951, 0.025), 3))


def _precision_on(rows: BadgeRows, policy: DisplayPolicy, high: bool = False) -> tuple[int, float]:
    """(badges shown, share right) of one set under `policy` (high: its "high" badges only)."""
    m = shown_mask(rows, (policy.show["SUPPORTS"], policy.show["REFUTES"]), policy.evidence)
    if high:
        m &= shown_mask(rows, (policy.high["SUPPORTS"], policy.high["REFUTES"]), ("strong",))
    return int(m.sum()), float(rows.right[m].mean()) if m.any() else 1.0


def fit_display_held(sets: dict[str, BadgeRows], floor: float = SHOWN_FLOOR, high_floor: float = 0.90,
                     min_badges: int = 10, scorer: bool = True, complete: bool = True,
                     checked: bool = True) -> DisplayPolicy:
    """The display policy (`fit_badges`) meant to stay right ≥ `floor` on a set it never saw, not
    only on the sets it was fitted on (measured: it does not, docs/results.md): fitted to a stricter training floor, the least of
    TRAINING_FLOORS at which every training set, itself left out of an inner fit on the others, still
    gets ≥ `floor` (≥ `high_floor` for "high"); with none, the floor with the least inner shortfall.
    The chosen training floors are in the policy's meta."""
    def chosen(target: float, high: bool, show_floor: float = floor) -> float:
        best = None
        for f in TRAINING_FLOORS:
            short = 0.0
            for name, rows in sets.items():
                inner = {k: r for k, r in sets.items() if k != name}
                pol = fit_badges(inner, scorer, complete, checked, floor=show_floor if high else f,
                                 high_floor=f if high else high_floor, min_badges=min_badges)
                n, right = _precision_on(rows.scored(pol.scorer, pol.complete, pol.checked), pol, high)
                if n >= min_badges:
                    short += max(0.0, target - right)
            key = (-round(short, 6), -f)
            if best is None or key > best[0]:
                best = (key, f)
        return float(best[1])

    show_floor = chosen(floor, high=False)
    high_train = chosen(high_floor, high=True, show_floor=show_floor)
    policy = fit_badges(sets, scorer, complete, checked, floor=show_floor, high_floor=high_train, min_badges=min_badges)
    policy.meta.update(floor=floor, high_floor=high_floor, training_floor=show_floor, training_high_floor=high_train)
    return policy


# the display fits the yardstick compares (`dialcheck tune decision --lodo`), by the name its report uses
DISPLAY_FITS = {
    "p": fit_display,  # thresholds on p(label), fitted to the floor in-sample (the policy before)
    "badge": fit_badges,  # badge scorer + completeness, fitted to the floor in-sample (shipped)
    "badge_held": fit_display_held,  # the same, to a training floor chosen by inner leave-one-set-out
    "badge_se": partial(fit_badges, show_z=1.0, high_z=1.0),  # the same, floors held one standard error below
    "badge_unchecked": partial(fit_badges, checked=False),  # the shipped fit without the checks rule (before the structured checks)
    "badge_refit": partial(fit_badges, refit_checked=True),  # the thresholds fitted with the checks rule applied
}
SHIPPED_FIT = "badge"


def displays(policy, decisions, evs) -> list:
    """Each decided claim's display under `policy` (FV: nothing failed, so status is ok)."""
    return [policy.display(d.label, d.probabilities, Status("ok", None, d.evidence), BadgeFacts.of(d, e))
            for d, e in zip(decisions, evs)]
