"""The verdict's display hint (schema 2.1 `display`): what a chat app shows end users, decided in one
place from the label, the calibrated probability of the label, and the status.

Why a hint at all: apps asked "what do I show?" and each wrote its own rule over `probabilities`
and `status`; one documented rule lets the yardstick measure how often a shown badge is right, and
lets the rule change in one place.

The rule (docs/integration.md says the same), a `DisplayPolicy`:

- tone: SUPPORTS → "supported", REFUTES → "disputed", NOT ENOUGH INFO → "unverified".
- shown ("medium" or "high"): status.state is "ok", the label is not NOT ENOUGH INFO, the evidence
  is one the policy accepts (`evidence`), and p = probabilities[label] ≥ `show[label]`;
  "high" when also p ≥ `high[label]` and the evidence is "strong"; otherwise "low", not shown.
- The shipped policy is fitted (`dialcheck tune fit --method guarded`, lab/tuning/display_fit.py) so that shown
  badges are right ≥ 80 % and "high" ones ≥ 90 % on every yardstick set when that set is left out of
  the fit, at the largest coverage that allows; it is a JSON artifact beside decision.json
  (`decision.display_params`), fingerprinted to the NLI model like the decision.
- Version 2 policies also carry a `BadgeScorer` (per badge label, a logistic regression of "this
  badge is right" on `BADGE_FEATURES`: p(label), the deciding window's entailment and contradiction,
  how many claim terms the evidence does not state, whether it is a reply in a conversation, ...)
  and its thresholds apply to that score instead of p(label): p alone hardly tells a right badge
  from a wrong one on chat responses. With `complete`, a SUPPORTS badge is never shown while some of
  the claim is uncovered (the verdict's `uncovered`): the app greys that part out, and a
  "supported" badge over greyed-out words would contradict it.
- `CONSTANT` is the rule before a policy was fitted (p ≥ 0.80 with strong evidence → high, p ≥ 0.60
  with some evidence → medium): what `display_for` applies when it is given no policy.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from schemas import Display, Status
from schemas.protocols import CONTRADICTION, ENTAILMENT
from schemas.verdict import TONES, hidden_display

from ..decision.rule import NO_EVIDENCE

FORMAT, VERSION = "dialcheck-display", 2
# 1: thresholds on p(label) only; 2: + a badge scorer and the completeness rule; 3: + the checks rule
VERSIONS = (1, 2, 3)
BADGES = ("SUPPORTS", "REFUTES")
BADGE_FEATURES = ("p_label", "entail", "contradict", "uncovered", "in_dialogue", "log_windows", "strong",
                  "on_topic", "question")


@dataclass(frozen=True)
class BadgeFacts:
    """What the badge scorer reads of a decided claim beside its label, probabilities and status."""
    entail: float  # the deciding window's
    contradict: float
    uncovered: int  # claim terms the windows the label rests on do not state
    in_dialogue: bool  # a reply in a conversation (it came with context turns)
    windows: int  # windows read
    on_topic: float  # the deciding window's coverage of the claim's key terms
    question: bool  # the claim is asked, not stated
    # the decision's structured checks (workers/decision/checks.py `Checks`, asked lazily: the parse runs
    # only for a badge that would otherwise be shown), or from a published verdict whether its
    # `mismatches` were empty; None: none ran (a caller with probabilities only, a verdict from before
    # schema 2.3): nothing to veto on
    checks: object = field(default=None, compare=False, repr=False)

    def agreed(self) -> bool:
        """Did the structured checks agree (True where none ran: a veto needs a finding)?"""
        c = self.checks
        return bool(c) if isinstance(c, bool) else (c is None or c.agreed)

    @classmethod
    def of(cls, decision, ev) -> "BadgeFacts | None":
        """From a `Decision` and the `ClaimEvidence` it was made on; None when nothing was decided."""
        if decision is None or ev is None or decision.window is None or not ev.n:
            return None
        p = ev.probs[decision.window]
        return cls(float(p[ENTAILMENT]), float(p[CONTRADICTION]), len(decision.uncovered), bool(ev.in_dialogue), int(ev.n),
                   float(decision.coverage or 0.0), ev.claim.rstrip().endswith("?"), getattr(decision, "checks", None))

    @classmethod
    def of_verdict(cls, v) -> "BadgeFacts | None":
        """The same facts read back from a published verdict (the guarded decision's rationale quotes
        the deciding window's entail / contradict, coverage, windows read and whether it was a reply), so the
        display can be recomputed from what an app received: equal to `of` up to the 4-decimal
        rounding of the quoted numbers."""
        n = (v.rationale or {}).get("numbers") or {}
        if "entail" not in n or "coverage" not in n:
            return None
        odd = getattr(v, "mismatches", None)
        return cls(float(n["entail"]), float(n["contradict"]), len(v.uncovered or []), bool(n.get("reply", False)),
                   int(n.get("windows_read", 0)), float(n["coverage"]), v.surface.text.rstrip().endswith("?"),
                   None if odd is None else not odd)

    def vector(self, p_label: float, evidence: str) -> list[float]:
        """BADGE_FEATURES, in order."""
        return [p_label, self.entail, self.contradict, float(self.uncovered), float(self.in_dialogue),
                math.log1p(self.windows), float(evidence == "strong"), self.on_topic, float(self.question)]


@dataclass(frozen=True)
class BadgeScorer:
    """Per badge label, P(the badge is right | BADGE_FEATURES): a logistic regression fitted offline
    (lab/tuning/display_fit.py) and stored as plain numbers (no scikit-learn at run time)."""
    models: dict  # label → {"mean": [...], "scale": [...], "coef": [...], "intercept": float}

    def score(self, label: str, x: list[float]) -> float:
        m = self.models.get(label)
        if m is None:
            return 0.0
        z = m["intercept"] + sum(c * (v - mu) / sd for c, v, mu, sd in zip(m["coef"], x, m["mean"], m["scale"]))
        return 1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0)))

    def to_dict(self) -> dict:
        return {"features": list(BADGE_FEATURES), "models": self.models}

    @classmethod
    def from_dict(cls, d: dict) -> "BadgeScorer":
        if list(d.get("features", [])) != list(BADGE_FEATURES):
            raise ValueError(f"badge scorer features {d.get('features')} are not {list(BADGE_FEATURES)}")
        return cls(d["models"])


@dataclass(frozen=True)
class DisplayPolicy:
    """When a verdict's badge is shown, and with which confidence."""
    show: dict[str, float]  # per badge label: the least score at which it is shown (p(label) without a scorer)
    high: dict[str, float]  # per badge label: the least score for "high" (strong evidence only)
    evidence: tuple[str, ...] = ("strong",)  # evidence strengths a shown badge may rest on
    meta: dict = field(default_factory=dict, compare=False)
    scorer: BadgeScorer | None = None  # None: the thresholds apply to p(label)
    complete: bool = False  # a SUPPORTS badge needs every claim term stated by the evidence
    checked: bool = False  # a SUPPORTS badge needs the structured checks to agree (slots, relations, subject)

    def score(self, label: str, probabilities: dict[str, float], evidence: str, facts: BadgeFacts | None) -> float:
        """What the thresholds compare: p(label), or with a scorer the chance the badge is right
        (0 when there is nothing to score it on)."""
        p = float(probabilities.get(label, 0.0))
        if self.scorer is None:
            return p
        return self.scorer.score(label, facts.vector(p, evidence)) if facts is not None else 0.0

    def display(self, label: str, probabilities: dict[str, float], status: Status,
                facts: BadgeFacts | None = None) -> Display:
        if status.state != "ok":  # degraded or error: never a badge (the contract's rule)
            return hidden_display(label)
        tone = TONES[label]
        evidence = status.evidence or "none"  # absent (a producer that does not say) counts as none
        score = self.score(label, probabilities, evidence, facts)
        incomplete = self.complete and label == "SUPPORTS" and (facts is None or facts.uncovered > 0)
        shown = (label in BADGES and evidence in self.evidence and not incomplete
                 and score >= self.show.get(label, 2.0))
        if shown and self.checked and label == "SUPPORTS" and (facts is None or not facts.agreed()):
            shown = False  # asked last: the structural check parses the window
        if not shown:
            # the old rule's "medium" for a low p on some evidence is "low" here: not shown is not shown
            return hidden_display(label)
        confidence = "high" if score >= self.high.get(label, 2.0) and evidence == "strong" else "medium"
        return Display(show=True, tone=tone, confidence=confidence)

    def describe(self) -> str:
        """The rule in one sentence (the decision card and the integration guide quote it)."""
        what = "the badge score (the fitted chance the badge is right)" if self.scorer is not None else "p(label)"
        full = " and the evidence states every term of the claim" if self.complete else ""
        full += " and the structured checks (numbers and dates, who did what to whom, the subject) agree" if self.checked else ""
        return (f"SUPPORTS shown when {what} ≥ {self.show['SUPPORTS']:.2f}{full}, REFUTES from "
                f"{self.show['REFUTES']:.2f}; \"high\" from {self.high['SUPPORTS']:.2f} / {self.high['REFUTES']:.2f} with "
                f"strong evidence; evidence accepted: {' or '.join(self.evidence)}")

    def to_dict(self) -> dict:
        version = 3 if self.checked else VERSION if self.scorer is not None or self.complete else 1
        return {"format": FORMAT, "version": version,
                "show": dict(self.show), "high": dict(self.high), "evidence": list(self.evidence),
                **({"scorer": self.scorer.to_dict()} if self.scorer is not None else {}),
                **({"complete": True} if self.complete else {}), **({"checked": True} if self.checked else {}),
                "meta": self.meta}

    def save(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def from_dict(cls, d: dict) -> "DisplayPolicy":
        if d.get("format") != FORMAT or d.get("version") not in VERSIONS:
            raise ValueError(f"not a {FORMAT} v{'/'.join(map(str, VERSIONS))} file "
                             f"(format {d.get('format')!r}, version {d.get('version')!r})")
        return cls({k: float(v) for k, v in d["show"].items()}, {k: float(v) for k, v in d["high"].items()},
                   tuple(d.get("evidence", ("strong",))), d.get("meta", {}),
                   BadgeScorer.from_dict(d["scorer"]) if d.get("scorer") else None, bool(d.get("complete", False)),
                   bool(d.get("checked", False)))

    @classmethod
    def load(cls, path: str | Path) -> "DisplayPolicy":
        return cls.from_dict(json.loads(Path(path).read_text()))


class _ConstantPolicy(DisplayPolicy):
    """The rule before any policy was fitted, kept as the baseline the yardstick compares against."""

    def display(self, label, probabilities, status, facts=None):
        if status.state != "ok":
            return hidden_display(label)
        tone = TONES[label]
        p = float(probabilities.get(label, 0.0))
        evidence = status.evidence or "none"
        if p >= 0.80 and evidence == "strong":
            confidence = "high"
        elif p >= 0.60 and evidence != "none":
            confidence = "medium"
        else:
            confidence = "low"
        show = label != "NOT ENOUGH INFO" and confidence != "low"
        return Display(show=show, tone=tone, confidence=confidence)


CONSTANT = _ConstantPolicy({"SUPPORTS": 0.60, "REFUTES": 0.60}, {"SUPPORTS": 0.80, "REFUTES": 0.80},
                           ("strong", "weak"), {"name": "constant 0.80 / 0.60 (before the fitted policy)"})


def display_for(label: str, probabilities: dict[str, float], status: Status,
                policy: DisplayPolicy | None = None, facts: BadgeFacts | None = None) -> Display:
    """The display hint of a verdict with this label, calibrated probabilities, status and (for a
    policy with a badge scorer) the facts of its decision."""
    return (policy or CONSTANT).display(label, probabilities, status, facts)


def display_of(decision, ev, status: Status, policy: DisplayPolicy | None = None) -> Display:
    """The display hint of a claim's `Decision` (None: nothing decided, NOT ENOUGH INFO on no evidence)
    under its status: what the verdict publishes and the judge asks about. The badge scorer reads the
    facts of the method's decision behind the label (`Decision.basis`): none when the label was replaced."""
    if decision is None:
        return display_for("NOT ENOUGH INFO", dict(NO_EVIDENCE), status, policy)
    basis = decision.basis
    return display_for(decision.label, decision.probabilities, status, policy,
                       BadgeFacts.of(basis, ev) if basis is not None else None)
