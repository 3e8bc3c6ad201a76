"""Decision methods: a claim's window probabilities (`ClaimEvidence`) → a typed `Decision`.

One class per method behind one small protocol (`DecisionMethod`), so nothing downstream branches
on a method's name: the verdict renders whatever `Decision` it is handed (label, calibrated
probabilities, the deciding window, the numbers its rationale quotes, how strong the evidence is).

- threshold: the per-window rule of rule.py + most-confident-decisive aggregation
- argmax:    the same aggregation with the plain 3-way argmax per window
- perclass:  claim-level max entail / max contradict against two fitted thresholds
- logreg:    multinomial logistic regression over `features.FEATURES` (standardised)
- guarded:   NOT ENOUGH INFO unless the evidence decides, no REFUTES from off-topic windows (guarded.py)

The runtime only loads parameters (versioned JSON, never pickle: readable, diffable, no
scikit-learn at inference); fitting them is offline work, in `lab/tuning/fit.py`."""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar, Protocol, Sequence

import numpy as np

from schemas import LABELS
from schemas.protocols import CONTRADICTION, ENTAILMENT

from ..windows import Window
from . import guarded
from .checks import Checks, checks_of
from .features import FEATURES, ClaimEvidence, feature_matrix
from .rule import DEFAULT_GAP, DEFAULT_THRESHOLD, NO_EVIDENCE, WindowDecision, aggregate, decide_window, label_probs
from .sufficiency import ON_TOPIC, strength

FORMAT = "dialcheck-decision"
VERSION = 1


@dataclass(frozen=True)
class Decision:
    """What a method decided for one claim; the verdict renders it (workers/verdict.py)."""
    label: str
    probabilities: dict[str, float]
    window: int | None  # index of the deciding window (the one shown first) in the claim's windows
    numbers: dict = field(default_factory=dict)  # what the rationale quotes beside the window's own numbers
    coverage: float | None = None  # the deciding window's on-topic coverage; None when nothing was read
    evidence: str = "none"  # status.evidence: strong | weak | none
    note: str = ""  # a sentence the rationale's summary adds (why a contradiction could not refute, a reply too thin)
    rule: str = ""  # what decided, as the rationale names it ("layer:guarded", "threshold")
    uncovered: tuple[str, ...] = ()  # the claim's terms the windows the label rests on do not state
    # the decision method's own decision when a later stage (the LLM judge) re-judged label and window;
    # None: this is the method's. The rule, numbers, note, coverage and evidence strength stay the method's.
    method_decision: "Decision | None" = None
    # the structured checks (checks.py) of a SUPPORTS or REFUTES against the windows it rests on; None: not run
    checks: Checks | None = field(default=None, compare=False, repr=False)

    def rejudged(self, label: str, window: int) -> "Decision":
        """This decision with another label and deciding window (the LLM judge's answer); the
        probabilities stay the method's (the judge gives no calibrated number)."""
        return replace(self, label=label, window=window, method_decision=self.method_decision or self)

    @property
    def basis(self) -> "Decision | None":
        """The method's decision whose facts (deciding window, coverage, uncovered terms) stand behind
        the published label: None when a later stage replaced the label."""
        own = self.method_decision or self
        return own if own.label == self.label else None


class DecisionMethod(Protocol):
    name: str  # the method ("guarded")
    rule: str  # how the verdict's rationale names what decided ("layer:guarded", "threshold")
    params: dict
    meta: dict

    def decide(self, ev: ClaimEvidence) -> Decision: ...

    def decide_many(self, evs: Sequence[ClaimEvidence]) -> list[Decision]: ...

    def predict(self, evs: Sequence[ClaimEvidence]) -> list[str]: ...

    def to_dict(self) -> dict: ...


class _Method:
    """What every method shares: batch calls, the no-evidence answer, coverage, versioned JSON."""
    name: ClassVar[str]
    fitted: ClassVar[bool] = True  # False: nothing to fit (the per-window rules)

    def __init__(self, params: dict | None = None, meta: dict | None = None, rule: str | None = None):
        self.params, self.meta = dict(params or {}), dict(meta or {})
        self.rule = rule or self.name
        self.source: str | None = None  # the JSON file it was loaded from, if any

    @property
    def on_topic(self) -> float:
        return float(self.params.get("on_topic", ON_TOPIC))

    @property
    def version(self) -> str:
        """model_versions["decision"]: the method and the file it came from."""
        return f"{self.name}@{Path(self.source).name}" if self.source else self.rule

    def decide(self, ev: ClaimEvidence) -> Decision:
        if ev.n == 0:  # no evidence read (none retrieved, or an outage): nothing to decide on
            return Decision("NOT ENOUGH INFO", dict(NO_EVIDENCE), None, rule=self.rule)
        return self._decide(ev)

    def _decide(self, ev: ClaimEvidence) -> Decision:
        """The decision of a claim with at least one window."""
        raise NotImplementedError

    def _decision(self, ev: ClaimEvidence, label: str, probs: dict, window: int, numbers: dict,
                  note: str = "", uncovered: tuple[str, ...] = (), coverage: float | None = None,
                  checks: Checks | None = None) -> Decision:
        """A Decision with the deciding window's coverage (unless the method worked it out), the
        evidence strength it gives and, for a badge label, the structured checks against the
        deciding window (unless the method worked them out)."""
        cov = float(ev.on_topic[window]) if coverage is None else coverage
        if checks is None and label != "NOT ENOUGH INFO":
            checks = checks_of(ev, (window,))
        return Decision(label, probs, window, numbers, cov, strength(cov, self.on_topic), note, self.rule, uncovered,
                        checks=checks)

    def decide_many(self, evs: Sequence[ClaimEvidence]) -> list[Decision]:
        return [self.decide(e) for e in evs]

    def predict(self, evs: Sequence[ClaimEvidence]) -> list[str]:
        return [d.label for d in self.decide_many(evs)]

    def scores(self, evs: Sequence[ClaimEvidence]) -> np.ndarray:
        """(n, 3) in LABELS order: one-hot of the label (logreg: its class probabilities)."""
        idx = [LABELS.index(lab) for lab in self.predict(evs)]
        return np.eye(3)[idx] if idx else np.zeros((0, 3))

    def to_dict(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "method": self.name, "params": self.params, "meta": self.meta}

    def save(self, path: str | Path) -> None:
        """Written beside and renamed (schemas/atomic.py): a worker starting meanwhile reads the old or the new."""
        from schemas.atomic import write_text

        write_text(path, json.dumps(self.to_dict(), indent=1) + "\n")


class ThresholdMethod(_Method):
    """Per-window threshold + win-gap rule (docs/method.md §5), most confident decisive window wins."""
    name, fitted = "threshold", False
    window_rule = "threshold"

    def __init__(self, params=None, meta=None, rule=None):
        super().__init__({"threshold": DEFAULT_THRESHOLD, "gap": DEFAULT_GAP, **(params or {})}, meta, rule)

    def window_decisions(self, ev: ClaimEvidence) -> list[WindowDecision]:
        """Each window labelled by the rule: computed here, once per claim."""
        t, g = self.params.get("threshold", DEFAULT_THRESHOLD), self.params.get("gap", DEFAULT_GAP)
        return [WindowDecision(Window(int(i), ""), p, decide_window(p, t, g, self.window_rule))
                for p, i in zip(np.asarray(ev.probs), ev.passage_index)]

    def _decide(self, ev):
        decisions = self.window_decisions(ev)
        label, best = aggregate(decisions)
        k = next(j for j, d in enumerate(decisions) if d is best)
        return self._decision(ev, label, label_probs(np.asarray(ev.probs)[k]), k, self._numbers())

    def _numbers(self) -> dict:
        return {"threshold": self.params["threshold"], "win_gap": self.params["gap"]}


class ArgmaxMethod(ThresholdMethod):
    """The plain 3-way NLI argmax per window (the paper's FV protocol), same aggregation."""
    name, fitted = "argmax", False
    window_rule = "argmax"

    def __init__(self, params=None, meta=None, rule=None):
        _Method.__init__(self, params, meta, rule)

    def _numbers(self) -> dict:
        return {}


class _ClassScores(_Method):
    """Methods that score the claim as a whole: the label is the top class, its probabilities are
    the method's, and the window shown is the one most for that label."""

    def _decide(self, ev):
        scores = self.scores([ev])[0]
        label = LABELS[int(np.argmax(scores))]
        p = np.asarray(ev.probs)
        col = {"SUPPORTS": ENTAILMENT, "REFUTES": CONTRADICTION}.get(label)
        best = int(np.argmax(p[:, col])) if col is not None else \
            int(np.argmax(np.maximum(p[:, ENTAILMENT], p[:, CONTRADICTION])))
        probs = {lab: float(x) for lab, x in zip(LABELS, scores)}
        numbers = {f"p_{k.lower().replace(' ', '_')}": round(float(x), 4) for k, x in probs.items()}
        return self._decision(ev, label, probs, best, numbers)


def perclass_codes(x_e: np.ndarray, x_c: np.ndarray, t_s: float, t_r: float) -> np.ndarray:
    """Label codes (LABELS order) of claims with max entail x_e and max contradict x_c."""
    s, r = x_e - t_s, x_c - t_r
    out = np.full(len(x_e), 2)
    out[(s >= 0) & (s >= r)] = 0
    out[(r >= 0) & (r > s)] = 1
    return out


class PerclassMethod(_ClassScores):
    name = "perclass"

    def predict(self, evs):
        return [LABELS[i] for i in self._codes(evs)]

    def _codes(self, evs) -> np.ndarray:
        X = feature_matrix(evs)
        return perclass_codes(X[:, FEATURES.index("max_e")], X[:, FEATURES.index("max_c")],
                              self.params["t_supports"], self.params["t_refutes"])

    def scores(self, evs):
        idx = self._codes(evs)
        return np.eye(3)[idx] if len(idx) else np.zeros((0, 3))


class LogregMethod(_ClassScores):
    name = "logreg"

    def scores(self, evs):
        if list(self.params["features"]) != list(FEATURES):
            raise ValueError("decision layer was fitted on another feature set; refit it")
        if not len(evs):
            return np.zeros((0, 3))
        X = (feature_matrix(evs) - np.array(self.params["mean"])) / np.array(self.params["scale"])
        z = X @ np.array(self.params["coef"]).T + np.array(self.params["intercept"])
        z -= z.max(1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(1, keepdims=True)

    def predict(self, evs):
        return [LABELS[i] for i in self.scores(evs).argmax(1)] if len(evs) else []


class GuardedMethod(_Method):
    """guarded.py's rule with fitted t_supports / t_refutes and the fixed on-topic level; its
    parameters are typed (`guarded.GuardedParams`), its decision worked out once (`guarded.GuardedRule.decide`)."""
    name = "guarded"
    params_type: ClassVar[type[guarded.GuardedParams]] = guarded.GuardedParams
    rule_type: ClassVar[type[guarded.GuardedRule]] = guarded.GuardedRule

    def __init__(self, params=None, meta=None, rule=None):
        super().__init__(params, meta, rule)
        self.typed = self.params_type.from_dict(self.params)
        self.params = self.typed.to_dict()  # as decision.json stores them (the same dict for a file read)
        self.guard = self.rule_type(self.typed)

    @property
    def on_topic(self) -> float:
        return self.typed.on_topic

    def predict(self, evs):
        return [self.guard.decide(e).label if e.n else "NOT ENOUGH INFO" for e in evs]

    def _decide(self, ev):
        g = self.guard.decide(ev)
        return self._decision(ev, g.label, g.probabilities, g.window, g.numbers, g.note, g.uncovered, g.coverage,
                              g.checks)


METHODS: dict[str, type[_Method]] = {m.name: m for m in (ThresholdMethod, ArgmaxMethod, PerclassMethod, LogregMethod,
                                                        GuardedMethod)}
RULES = tuple(n for n, m in METHODS.items() if not m.fitted)  # nothing fitted: the per-window rules


def method(name: str, params: dict | None = None, meta: dict | None = None, rule: str | None = None) -> _Method:
    """The method called `name` with these parameters (a name it does not know is refused)."""
    if name not in METHODS:
        raise ValueError(f"decision method {name!r} not in {tuple(METHODS)}")
    return METHODS[name](params, meta, rule)


def from_dict(d: dict, rule: str | None = None) -> _Method:
    if d.get("format") != FORMAT or d.get("version") != VERSION:
        raise ValueError(f"not a {FORMAT} v{VERSION} file (format {d.get('format')!r}, version {d.get('version')!r})")
    return method(d["method"], d.get("params", {}), d.get("meta", {}), rule)


def load(path: str | Path) -> _Method:
    """A fitted decision from its JSON; the rationale names it 'layer:<method>'."""
    d = json.loads(Path(path).read_text())
    m = from_dict(d, rule=f"layer:{d.get('method')}")
    m.source = str(path)
    return m
