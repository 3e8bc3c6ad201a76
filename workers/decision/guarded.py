"""The guarded rule: NOT ENOUGH INFO unless the evidence decides, and no REFUTES from evidence that
is off the claim's topic (docs/method.md §6).

- SUPPORTS if some window's entailment ≥ t_supports and is its most likely class (the most
  entailing such window decides) and, with a coverage guard (`cover`), that window (or it and one
  other supporting window, together) states the claim (`Coverage.covers`);
- else REFUTES if some window is on topic (it names the claim's subject, pronouns resolved by R4,
  and covers ≥ on_topic of the claim's key terms: workers/decision/sufficiency.py)
  with contradiction ≥ t_refutes as its most likely class (the most contradicting such window);
- else NOT ENOUGH INFO; but with `clash_refutes` (shipped) REFUTES when an on-topic window states
  every term of the claim but one typed slot, and that slot with one other value (checks.py).
A supported claim whose slot the on-topic deciding window states otherwise is REFUTES (`slots`).
With `checked` (measured, not shipped: it cost up to 5 points of macro-F1 left out, docs/stress.md)
a SUPPORTS the structured checks disagree with is NOT ENOUGH INFO unless another supporting window
states the claim's relations; with `relation_clash` (shipped: docs/stress.md) only one whose deciding
window gives a relation of the claim to another word by the structural check's precise test (a clear
clash, not silence; the display's veto reads the broader test, so every such SUPPORTS was hidden before).
With all three at 0 this is the argmax rule with SUPPORTS first; the fit can only add guards.
t_supports and t_refutes are fitted offline by a grid search (lab/tuning/fit.py `fit_guarded`);
on_topic is fixed (sufficiency.py `ON_TOPIC` says why).

`GuardedRule.decide` works the claim out once and returns a `Guarded`: label, deciding window,
coverage, the coverage level asked, uncovered terms, thinness, probabilities, the numbers the
rationale quotes and its note. The method (methods.py), the verdict, the display and the judge
read that; nothing recomputes it. Only the shipped variant lives here; the measured, unshipped ones
(other coverage scopes, slot REFUTES) are lab/tuning/variants.py's subclasses of `GuardedRule`."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

import numpy as np

from schemas import LABELS
from schemas.protocols import CONTRADICTION, ENTAILMENT

from .checks import Checks, checks_of, of_passage, window_text
from .registry import Effect, names
from .rule import label_probs
from .sufficiency import ON_TOPIC, claim_terms, uncovered

S, R, NEI = 0, 1, 2


# what a SUPPORTS window must state of the claim (see `Coverage.covers`): every name and number, and
# this share of its content words (None: coverage not asked)
COVER_LEVELS = {"none": None, "names": 0.0, "half": 0.5, "most": 0.75, "all": 1.0}
# a reply asked coverage must state at least this many key terms to be covered at all: one that
# states fewer ("Seems so.", "Oh there it is", "I have an iguana") is too thin to check — every
# word of it may stand in the evidence while what it says (about the speaker, about nothing) does not
MIN_TERMS = 2
# scope → the level asked of a claim without dialogue context (None: the same as of a reply).
# "dialogue" ships: a chat reply is where an added detail hides; a claim written to be checked is
# read as it stands.
COVER_SCOPES: dict[str, str | None] = {"all": None, "dialogue": "none"}
# `checked`: how many other supporting windows are asked for one the structured checks agree with
RECHECK = 3


@dataclass(frozen=True)
class GuardedParams:
    """The guarded rule's parameters, as decision.json stores them (`params`)."""
    t_supports: float
    t_refutes: float
    on_topic: float = ON_TOPIC  # fixed, not fitted (sufficiency.ON_TOPIC says why)
    min_refutes_precision: float | None = None  # the fit's REFUTES floor: a record of how it was fitted
    refutes_floor: str | None = None  # the fit's floor mode when not "per_set" (a record)
    cover: str = "none"  # COVER_LEVELS: what a SUPPORTS window must state
    cover_scope: str = "all"  # COVER_SCOPES: which claims are asked it
    # a supported claim whose typed slot (a year, date, number, ordinal, percentage: checks.py) the
    # deciding window states with another value, on the claim's topic, is REFUTES; not fitted
    slots: bool = True
    # a supported claim the structured checks disagree with (a slot the window does not state or states
    # otherwise off topic, a named subject it does not name, a relation it gives to another word) is
    # NOT ENOUGH INFO: SUPPORTS means the evidence states what the claim states (attribution); not fitted
    checked: bool = False
    # a claim no window decides, whose every term an on-topic window states but one typed slot, which
    # it states with one other value ("Crete covers 780 km" / "Crete covers 260 km"), is REFUTES; not fitted
    clash_refutes: bool = True
    # a supported claim whose deciding window gives one of the claim's relations to another word (the
    # arguments swapped, another agent, the predicate said of another, a named participant replaced:
    # structure.py's precise test) is NOT ENOUGH INFO — `checked` narrowed to a clash, silence left to the
    # display; not fitted (shipped on in decision.json; the display is fitted on the decisions before it)
    relation_clash: bool = False
    # registered checks (registry.py) whose label effect is on, for a check without a field of its own above
    checks_on: tuple[str, ...] = ()

    levels: ClassVar[dict] = COVER_LEVELS
    scopes: ClassVar[dict] = COVER_SCOPES
    ALWAYS: ClassVar[tuple[str, ...]] = ("t_supports", "t_refutes", "on_topic")  # written even at their default

    def __post_init__(self):
        if self.cover not in self.levels:
            raise ValueError(f"guarded cover {self.cover!r} not in {tuple(self.levels)}")
        if self.cover_scope not in self.scopes:
            raise ValueError(f"guarded cover_scope {self.cover_scope!r} not in {tuple(self.scopes)} "
                             "(the measured, unshipped scopes: lab/tuning/variants.py)")
        object.__setattr__(self, "checks_on", tuple(self.checks_on))  # decision.json stores a list
        unknown = sorted(set(self.checks_on) - set(names()))
        if unknown:
            raise ValueError(f"guarded checks_on {unknown} are not registered checks {names()}")

    @classmethod
    def from_dict(cls, d: dict) -> "GuardedParams":
        """From decision.json's `params`; a key this rule does not know is refused, not ignored."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"guarded parameters {unknown} are not the shipped rule's "
                             "(the measured, unshipped variants: lab/tuning/variants.py)")
        return cls(**d)

    def to_dict(self) -> dict:
        """As decision.json stores them: the thresholds, then what differs from the defaults."""
        return {f.name: list(v) if isinstance(v, tuple) else v for f in fields(self)
                for v in [getattr(self, f.name)] if f.name in self.ALWAYS or v != f.default}

    def level(self, ev) -> str:
        """The coverage level asked of this claim: `cover`, or for a claim without dialogue context
        under a dialogue scope, the scope's level for it."""
        standalone = self.scopes[self.cover_scope]
        if standalone is None or self.cover == "none" or ev.in_dialogue:
            return self.cover
        return standalone


def missing_terms(ev, windows: tuple[int, ...]) -> tuple[list[str], bool]:
    """The claim's terms (pronouns resolved: the R4 topic) none of these windows state, and whether
    one of its numbers is stated differently there (sufficiency.uncovered)."""
    if len(ev.window_texts) != ev.n:  # no texts (a caller that gave probabilities only): nothing to check
        return [], False
    return uncovered(ev.topic or ev.claim, tuple(window_text(ev, i) for i in windows))


def too_thin(ev) -> bool:
    """Does the claim (pronouns resolved) state fewer than MIN_TERMS key terms?"""
    return len(claim_terms(ev.topic or ev.claim)) < MIN_TERMS


class Coverage:
    """The coverage test of one claim at one level; each window set's missing terms are worked out
    once (the rule asks about the same windows again for the verdict's `uncovered`)."""

    def __init__(self, ev, level: str, levels: dict = COVER_LEVELS):
        self.ev, self.level = ev, level
        self.share = levels.get(level)
        self.thin = self.share is not None and too_thin(ev)  # asked, and too thin to check
        self._missing: dict[tuple[int, ...], tuple[list[str], bool]] = {}

    def missing(self, windows: tuple[int, ...]) -> tuple[list[str], bool]:
        if windows not in self._missing:
            self._missing[windows] = missing_terms(self.ev, windows)
        return self._missing[windows]

    def covers(self, windows: tuple[int, ...]) -> bool:
        """Does the claim hold nothing these windows do not state? Every name and number of the claim
        must be there, and at least the level's share of its content words ('all': every key term;
        'none': not asked); a claim of fewer than MIN_TERMS key terms is never covered (`thin`)."""
        if self.share is None:
            return True
        if self.thin:
            return False
        missing = set(self.missing(windows)[0])
        if not missing:
            return True
        terms = claim_terms(self.ev.topic or self.ev.claim)
        if any(k in ("anchor", "number") and w in missing for k, w, _ in terms):
            return False
        words = [w for k, w, _ in terms if k == "word"]
        return bool(words) and sum(w not in missing for w in words) / len(words) >= self.share and self.share < 1.0


@dataclass(frozen=True)
class Guarded:
    """What the guarded rule decided for one claim, computed once."""
    code: int  # S / R / NEI
    window: int  # the deciding window (the one shown first)
    coverage: float  # the deciding window's on-topic coverage
    level: str  # the coverage level asked of this claim ("none": not asked)
    uncovered: tuple[str, ...]  # asked: the claim's terms the windows the label rests on (one, or a pair) do not state
    thin: bool  # asked, and the claim states fewer than MIN_TERMS key terms
    probabilities: dict[str, float]
    numbers: dict  # what the rationale quotes beside the window's own numbers
    note: str  # the sentence the rationale's summary adds ("" for none)
    checks: Checks | None = None  # the structured checks against the windows the label rests on (S and R)

    @property
    def label(self) -> str:
        return LABELS[self.code]


def _relabelled(effect: Effect, probs: dict) -> tuple[int, dict]:
    """A SUPPORTS a check relabels: REFUTES with the window's support for the rest read as
    contradiction (it states the claim's slot otherwise), or withdrawn to NOT ENOUGH INFO."""
    if effect is Effect.REFUTES:
        return R, {"SUPPORTS": probs["REFUTES"], "REFUTES": probs["SUPPORTS"], "NOT ENOUGH INFO": probs["NOT ENOUGH INFO"]}
    return NEI, _support_withdrawn(probs)


def _read_as_contradiction(w: dict) -> dict:
    """A window that states the claim's slot otherwise (a clashing value, a rival filler): its decided
    mass, the entailment of the words it shares with the claim and its contradiction, read as REFUTES."""
    return {"SUPPORTS": 0.0, "REFUTES": w["REFUTES"] + w["SUPPORTS"], "NOT ENOUGH INFO": w["NOT ENOUGH INFO"]}


def _support_withdrawn(probs: dict) -> dict:
    """A SUPPORTS the structured checks take back: its mass goes to NOT ENOUGH INFO (not to REFUTES:
    the evidence does not say the claim is false, only that it does not say the claim)."""
    return {"SUPPORTS": 0.0, "REFUTES": probs["REFUTES"], "NOT ENOUGH INFO": probs["NOT ENOUGH INFO"] + probs["SUPPORTS"]}


class GuardedRule:
    """The rule over one parameter set. lab/tuning/variants.py subclasses it for the measured,
    unshipped variants (`level_coverage`, `not_covered` are its two hooks)."""

    def __init__(self, params: GuardedParams):
        self.params = params

    def checks_of(self, ev, windows: tuple[int, ...]) -> Checks | None:
        """The structured checks against these windows, the checks switched on by name enabled."""
        return checks_of(ev, windows, self.params.checks_on, self.params.on_topic)

    def level_coverage(self, ev) -> Coverage:
        return Coverage(ev, self.params.level(ev), self.params.levels)

    def not_covered(self, ev, order: list[int], topical: np.ndarray, cov: Coverage) -> tuple[int, int] | None:
        """(code, window) for a claim supported by windows that do not cover it; None: NOT ENOUGH INFO."""
        return None

    def pick(self, ev, cov: Coverage) -> tuple[int, int, tuple[int, ...]]:
        """(label code, window shown first, the windows the label rests on) for a claim with windows."""
        p = self.params
        probs = np.asarray(ev.probs)
        e, c = probs[:, ENTAILMENT], probs[:, CONTRADICTION]
        top = probs.argmax(1)
        supporting = (e >= p.t_supports) & (top == ENTAILMENT)
        topical = ev.on_topic >= p.on_topic
        if supporting.any():
            order = [int(i) for i in np.argsort(-np.where(supporting, e, -1.0)) if supporting[i]]
            for i in order:
                if cov.covers((i,)):
                    return S, i, (i,)
            pair = next(((i, j) for a, i in enumerate(order) for j in order[a + 1:] if cov.covers((i, j))), None)
            if pair is not None:
                return S, pair[0], pair
            held = self.not_covered(ev, order, topical, cov)
            if held is not None:
                return held[0], held[1], (held[1],)
            return NEI, order[0], (order[0],)
        refuting = topical & (c >= p.t_refutes) & (top == CONTRADICTION)
        if refuting.any():
            i = int(np.argmax(np.where(refuting, c, -1.0)))
            return R, i, (i,)
        decided = np.maximum(e, c)  # shown: the on-topic window closest to deciding, else any
        i = int(np.argmax(np.where(topical, decided, decided - 2.0)))
        return NEI, i, (i,)

    def next_supporting(self, ev, cov: Coverage, used: tuple[int, ...], accept) -> tuple[int, Checks] | None:
        """The next supporting, covering window beyond `used` (at most RECHECK of them, strongest
        entailment first: each may be a parse) whose checks `accept(i, checks)`."""
        probs = np.asarray(ev.probs)
        e = probs[:, ENTAILMENT]
        supporting = (e >= self.params.t_supports) & (probs.argmax(1) == ENTAILMENT)
        order = [int(i) for i in np.argsort(-np.where(supporting, e, -1.0)) if supporting[i] and int(i) not in used]
        for i in [i for i in order if cov.covers((i,))][:RECHECK]:
            checks = self.checks_of(ev, (i,))
            if checks is not None and accept(i, checks):
                return i, checks
        return None

    def agreeing(self, ev, cov: Coverage, used: tuple[int, ...]) -> tuple[int, Checks] | None:
        """With `checked`, when the checks disagree with the windows the SUPPORTS rests on: the next
        supporting, covering window they agree with, on a relation of the claim it states (a window
        that only names a word of the claim agrees vacuously)."""
        return self.next_supporting(ev, cov, used, lambda i, checks: checks.agreed and checks.structure.asked)

    def naming(self, ev, cov: Coverage, used: tuple[int, ...]) -> tuple[int, Checks] | None:
        """With "subject" in `checks_on`, when the windows a SUPPORTS rests on never name the claim's
        subject: the next supporting, covering window of a passage about the subject (its title or
        the other names its opening gives name it), so a true claim is not withdrawn because its
        strongest window was another passage's ("It is mainly situated in the Himalayas" of Nepal for
        "Mount Everest is in the Himalayas"). Only the subject's own passage: a window of another that
        merely names it ("Moscow is the capital of Russia" for a claim about Russia) is no better than
        the one withdrawn."""
        from .components.subject import subject_named

        def about_subject(i: int, checks: Checks) -> bool:
            about = tuple(t for t in (of_passage(ev.titles, ev, i), of_passage(ev.aliases, ev, i)) if t)
            return bool(about) and bool(subject_named(checks.claim, about)) and checks.subject is not False

        return self.next_supporting(ev, cov, used, about_subject)

    def clashing(self, ev) -> tuple[int, Checks] | None:
        """With `clash_refutes`: the first on-topic window (most on topic first; RECHECK of them) that
        states every slot of the claim but one, that one with one other value, and every other term
        of the claim (its missing terms are the clashing slot's words). Regular expressions only."""
        topical = [int(i) for i in np.argsort(-ev.on_topic) if ev.on_topic[i] >= self.params.on_topic][:RECHECK]
        for i in topical:
            checks = self.checks_of(ev, (i,))
            if checks is None or checks.clash is None or checks.subject is False:
                continue
            if sum(s.status != "stated" for s in checks.slots) != 1:
                continue
            span = checks.clash.slot.text.lower()
            if all(w.lower() in span for w in missing_terms(ev, (i,))[0]):
                return i, checks
        return None

    def rivalled(self, ev) -> tuple[int, Checks, str] | None:
        """With "rival" in `checks_on`: (the window, its checks, the rationale's note) of the first firm
        rival among every window the claim read — another filler of the claim's one-filler relation,
        stated in a window about the relation's parties (components/rival.py). Regular expressions only."""
        if "rival" not in self.params.checks_on or not ev.n:
            return None
        from .components.rival import note
        from .registry import check

        pool = self.checks_of(ev, (0,))  # every Checks of the claim holds the same pool: window 0's will do
        firm = check("rival").firm(pool) if pool is not None else None
        if firm is None:
            return None
        return firm[1], self.checks_of(ev, (firm[1],)), note(firm[0])

    def decide(self, ev) -> Guarded:
        """The claim decided (it has at least one window; methods.py answers a claim without any)."""
        p = self.params
        cov = self.level_coverage(ev)
        code, best, used = self.pick(ev, cov)
        checks = self.checks_of(ev, used) if code != NEI else None
        if code == S and p.checked and checks is not None and checks.clash is None and not checks.agreed:
            agreeing = self.agreeing(ev, cov, used)  # another supporting window that states it
            if agreeing is not None:
                best, used, checks = agreeing[0], (agreeing[0],), agreeing[1]
        if code == S and "subject" in p.checks_on and checks is not None and checks.subject is False:
            named = self.naming(ev, cov, used)  # another supporting window that names the subject
            if named is not None:
                best, used, checks = named[0], (named[0],), named[1]
        on_topic = float(ev.on_topic[best])
        probs = label_probs(np.asarray(ev.probs)[best])
        if code == NEI and on_topic < p.on_topic:
            # contradiction from a window about something else is no evidence against the claim:
            # shown as NOT ENOUGH INFO mass, so an app never reads "R 0.62" on an NEI verdict
            probs = {"SUPPORTS": probs["SUPPORTS"], "REFUTES": 0.0,
                     "NOT ENOUGH INFO": probs["NOT ENOUGH INFO"] + probs["REFUTES"]}
        numbers = {"coverage": round(on_topic, 4), "reply": bool(ev.in_dialogue),
                   "t_supports": p.t_supports, "t_refutes": p.t_refutes, "on_topic": p.on_topic}
        note = ""
        if code == NEI and cov.thin:
            note = f"The reply states fewer than {MIN_TERMS} names, numbers or content words: too little to check."
        elif code == NEI and on_topic < p.on_topic:
            note = (f"The windows read are off the claim's topic (coverage {on_topic:.2f} < {p.on_topic:g}), "
                    "so their contradiction cannot refute it.")
        rival = self.rivalled(ev) if code != R else None
        relabel = checks.relabel(p, on_topic >= p.on_topic, p.checked) \
            if rival is None and checks is not None and code == S else None  # a parse, not asked once refuted
        if rival is not None:
            # another filler of a one-filler slot, from a window about its parties: REFUTES on that window,
            # its decided mass (entailment of the shared words, contradiction) read as contradiction
            best, checks, note = rival
            code, used, on_topic = R, (best,), float(ev.on_topic[best])
            probs = _read_as_contradiction(label_probs(np.asarray(ev.probs)[best]))
            numbers.update(coverage=round(on_topic, 4), rival=True)
        elif relabel is not None:
            code, probs = _relabelled(relabel.effect, probs)
            numbers[relabel.flag] = True
            note = relabel.note
        elif code == NEI and p.clash_refutes:
            found = self.clashing(ev)
            if found is not None:
                best, used, checks = found[0], (found[0],), found[1]
                clash = checks.clash
                code, on_topic = R, float(ev.on_topic[best])
                # the window's decided mass (entailment of the rest, contradiction) read as contradiction;
                # with the window's own probabilities instead, WiCE's shown precision left out fell 76.5 -> 72.2 %
                probs = _read_as_contradiction(label_probs(np.asarray(ev.probs)[best]))
                numbers.update(coverage=round(on_topic, 4), slot_clash=True)
                note = (f"The evidence states every term of the claim but its {clash.slot.type} "
                        f"\"{clash.slot.text}\", which it states as \"{clash.evidence}\".")
        missing = tuple(cov.missing(used)[0]) if cov.level != "none" else ()
        return Guarded(code, best, on_topic, cov.level, missing, cov.thin, probs, numbers, note, checks)
