"""A claim's state between the stages, and the stage contract over it, checked.

Why one mutable `ClaimState` and not typed per-stage outputs: the stages are small and run in
several orders (fv, e2e, ir; with or without the gate, R5, editing, the judge), a turn that is not
check-worthy leaves the chain early, and an outage degrades a stage in place. Typed outputs per
stage would need one input type per order. So the state stays one record, and its contract is held
to its word instead:

- each stage declares (`@component`, as Haystack 2 components and spaCy's `assigns`/`requires` do)
  the fields it reads and writes; `check_chain` refuses a protocol whose stage reads a field no
  earlier stage writes, when the Pipeline is built (workers/pipeline.py);
- each stage declares what else the Pipeline may ask of it (`CAPABILITIES`: runs beside the NLI, has
  a `begin` step, reads the display, degrades on an outage), with `BaseStage`'s defaults for the rest;
  `check_chain` holds each declaration to what the class defines, so the Pipeline asks, never probes;
- with `stages.check_contracts` (DIALCHECK_CHECK_CONTRACTS, on in the test suite) every stage runs on
  `Checked` views of the states: a stage that reads a field it declares neither to read nor to write,
  or writes one it does not declare to write, fails with `StageContractError`.

What the claim was decided to be lives once, in `decision` (workers/decision `Decision`): the
published label, probabilities and deciding window are read from it, never from a copy."""
from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from typing import Callable, ClassVar, Protocol

from schemas import Surface
from schemas.items import CheckItem
from schemas.protocols import Passage

from .decision import ClaimEvidence, Decision, WindowDecision
from .surfaces import ClaimSurfaces
from .windows import Window


@dataclass
class Retrieval:
    """Ranked passages per retrieval step, for the IR protocol's metrics."""
    bm25: list[Passage] = field(default_factory=list)
    dense: list[Passage] = field(default_factory=list)


@dataclass
class ClaimState:
    """One claim on its way through the stages."""
    item: CheckItem
    surfaces: ClaimSurfaces | None = None
    fv_surface: Surface | None = None  # what the verifier reads (τ_FV decision)
    ir_surface: Surface | None = None  # what retrieval reads (τ_IR decision)
    retrieval: Retrieval | None = None
    passages: list[Passage] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    decisions: list[WindowDecision] = field(default_factory=list)  # every window read, with its probabilities
    # what was decided: label, probabilities, the window shown first (the verify stage's decision method,
    # re-judged by the LLM judge where it runs); None: nothing decided (not check-worthy, or an outage)
    decision: Decision | None = None
    skip_reason: str = ""  # set when the claim is answered without checking (not check-worthy)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (degraded | error, reason)
    timings: dict[str, float] = field(default_factory=dict)
    evidence: ClaimEvidence | None = None  # what the decision read (windows, probabilities, topical coverage)
    notes: dict = field(default_factory=dict)  # extra rationale entries (the LLM steps: r5, edits)

    def use_original(self) -> None:
        self.fv_surface = self.ir_surface = Surface("r0", self.item.claim)

    @property
    def best(self) -> WindowDecision | None:
        """The window shown first as evidence: the decision's deciding window."""
        d = self.decision
        return self.decisions[d.window] if d is not None and d.window is not None else None


CLAIM_FIELDS = frozenset(f.name for f in fields(ClaimState))
# what every state has before any stage ran: the item, and the lists every stage may append to
GIVEN = frozenset({"item", "problems", "timings", "notes"})
# what a property of ClaimState reads, for the contract check (a stage reading `best` reads these)
DERIVED = {"best": frozenset({"decision", "decisions"})}


# What the Pipeline may ask of a stage besides `run`, each declared with `@component(can=...)`; what a
# stage does not declare comes from `BaseStage`. `check_chain` holds the declarations to what the
# class defines when a Pipeline is built, as it holds `reads` to the earlier stages' `writes`.
CAPABILITIES: dict[str, str] = {
    "beside_nli": "never calls the NLI model, so it may run while the NLI model reads another part of the batch",
    "begin": "the NLI reader: `begin(states, submit)` starts its reads on `submit` and returns the `finish` step",
    "display": "reads the display policy (its `display`): a reload gives the chain a copy holding the new one",
    "degrade": "turns a declared outage (ModelUnavailable, SearchUnavailable) into degraded states (`on_outage`); "
               "without it the outage propagates",
}


class Stage(Protocol):
    name: str
    reads: ClassVar[frozenset[str]]  # ClaimState fields it reads
    writes: ClassVar[frozenset[str]]  # ClaimState fields it fills
    batched: ClassVar[bool]  # one model or search call for the batch (else claim by claim)
    can: ClassVar[frozenset[str]]  # its CAPABILITIES

    def run(self, states: list[ClaimState]) -> None: ...

    def begin(self, states: list[ClaimState], submit: Callable | None = None) -> Callable[[], None]: ...

    def on_outage(self, states: list[ClaimState], error: Exception) -> None: ...

    def with_display(self, display) -> "Stage": ...


class BaseStage:
    """The defaults of every capability a stage does not declare (`CAPABILITIES`): its whole run on
    the caller's thread, no display, and an outage that is not the stage's to degrade."""
    name: ClassVar[str]
    reads: ClassVar[frozenset[str]] = frozenset()
    writes: ClassVar[frozenset[str]] = frozenset()
    batched: ClassVar[bool] = True
    can: ClassVar[frozenset[str]] = frozenset()

    def run(self, states: list[ClaimState]) -> None:
        raise NotImplementedError

    def begin(self, states: list[ClaimState], submit: Callable | None = None) -> Callable[[], None]:
        """Without "begin": the whole run now, nothing left to finish."""
        self.run(states)
        return lambda: None

    def on_outage(self, states: list[ClaimState], error: Exception) -> None:
        """Without "degrade": the outage is not this stage's to turn into verdicts."""
        raise error

    def with_display(self, display) -> "BaseStage":
        """The stage itself, or with "display" a copy reading `display` (the one a reload brings)."""
        if "display" not in self.can:
            return self
        stage = copy.copy(self)
        stage.display = display
        return stage


def component(*, reads: tuple[str, ...], writes: tuple[str, ...], batched: bool = True, can: tuple[str, ...] = ()):
    """Declare a stage's contract: the ClaimState fields it reads and writes, batched or per claim,
    and what else the Pipeline may ask of it (`CAPABILITIES`)."""
    def declare(cls):
        unknown = (set(reads) | set(writes)) - CLAIM_FIELDS
        if unknown:
            raise TypeError(f"{cls.__name__} declares fields ClaimState does not have: {sorted(unknown)}")
        unknown = set(can) - set(CAPABILITIES)
        if unknown:
            raise TypeError(f"{cls.__name__} declares capabilities no stage has: {sorted(unknown)} "
                            f"(known: {sorted(CAPABILITIES)})")
        cls.reads, cls.writes, cls.batched, cls.can = frozenset(reads), frozenset(writes), batched, frozenset(can)
        return cls
    return declare


class StageChainError(TypeError):
    """A protocol whose stage reads a field that no earlier stage writes, or a stage whose declared
    capabilities are not the ones it has."""


def check_chain(stages: list) -> None:
    """Every stage's capabilities are what it declares (`check_capabilities`), and every field a stage
    reads is given or written by an earlier stage: checked when a Pipeline is built, so a misdeclared
    or misordered protocol fails at start-up, not on the first claim."""
    available = set(GIVEN)
    for stage in stages:
        check_capabilities(stage)
        missing = stage.reads - available
        if missing:
            raise StageChainError(f"stage {stage.name!r} reads {sorted(missing)}, which no earlier stage writes "
                                  f"(stages: {[st.name for st in stages]})")
        available |= stage.writes


def check_capabilities(stage) -> None:
    """The stage derives from BaseStage, its declared capabilities are known, and they match its
    class: "begin" and "degrade" exactly when it has its own `begin` / `on_outage`, "display" only
    with a `display`, and the NLI reader ("begin") is never "beside_nli"."""
    name = getattr(stage, "name", type(stage).__name__)
    if not isinstance(stage, BaseStage):
        raise StageChainError(f"stage {name!r} does not derive from workers.state.BaseStage: the Pipeline has no "
                              f"defaults for what it does not declare")
    can, cls = stage.can, type(stage)
    unknown = set(can) - set(CAPABILITIES)
    if unknown:
        raise StageChainError(f"stage {name!r} declares unknown capabilities {sorted(unknown)} "
                              f"(known: {sorted(CAPABILITIES)})")
    for capability, method in (("begin", "begin"), ("degrade", "on_outage")):
        own = getattr(cls, method) is not getattr(BaseStage, method)
        if own != (capability in can):
            raise StageChainError(f"stage {name!r} " + (
                f"defines its own {method} but does not declare {capability!r}" if own else
                f"declares {capability!r} but has no {method} of its own"))
    if "display" in can and not hasattr(stage, "display"):
        raise StageChainError(f"stage {name!r} declares 'display' but holds no display")
    if {"begin", "beside_nli"} <= can:
        raise StageChainError(f"stage {name!r} declares 'begin' (it reads the NLI model) and 'beside_nli'")


class StageContractError(AttributeError):
    """A stage read or wrote a ClaimState field its `@component` does not declare."""


class Checked:
    """A ClaimState as one stage may touch it: its declared reads and writes (a stage may read back
    what it writes), anything else raises StageContractError. Methods run on the view, so what they
    touch is checked too. A container field read (problems, notes) may be appended to: declaring it
    in `writes` is what makes it readable."""
    __slots__ = ("_state", "_stage", "_readable", "_writable")

    def __init__(self, state: ClaimState, stage):
        object.__setattr__(self, "_state", state)
        object.__setattr__(self, "_stage", getattr(stage, "name", type(stage).__name__))
        object.__setattr__(self, "_writable", frozenset(stage.writes))
        object.__setattr__(self, "_readable", frozenset(stage.reads) | frozenset(stage.writes))

    def _refuse(self, verb: str, name: str):
        raise StageContractError(f"stage {self._stage!r} {verb} ClaimState.{name}, which its @component does not "
                                 f"declare (reads {sorted(self._readable)}, writes {sorted(self._writable)})")

    def __getattr__(self, name: str):
        if name in CLAIM_FIELDS:
            if name not in self._readable:
                self._refuse("reads", name)
            return getattr(self._state, name)
        attr = getattr(type(self._state), name)
        if isinstance(attr, property):
            for f in DERIVED.get(name, ()):
                if f not in self._readable:
                    self._refuse(f"reads (through {name})", f)
            return attr.fget(self)
        if callable(attr):
            return attr.__get__(self)
        return attr

    def __setattr__(self, name: str, value) -> None:
        if name not in CLAIM_FIELDS:
            raise AttributeError(f"ClaimState has no field {name!r}")
        if name not in self._writable:
            self._refuse("writes", name)
        setattr(self._state, name, value)


def checked(states: list[ClaimState], stage) -> list:
    """The states as `stage` may touch them (the Pipeline's runner, with `stages.check_contracts`)."""
    return [Checked(s, stage) for s in states]
