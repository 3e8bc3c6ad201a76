"""The decision checks, registered by name in one place (as spaCy registers pipeline components).

Why: a check is one idea — what of the claim it compares with the windows the label rests on, what
it calls a mismatch, and what a finding does to the label and the badge. Kept in one component, a
new check is one module with `@register` on it (docs/method.md "Adding a check"); `Checks`
(checks.py), the guarded rule's relabelling (guarded.py), the verdict's `mismatches` and the
schema's enum all read this registry, so none of them lists the checks by hand.

A component says
- `name`: the verdict's `mismatches[].check` (the schema's enum is tested against `names()`);
- `runs`: when it runs and what it costs; `order`: when it is asked among the others (the cheap
  ones first, so a parse runs only when they agree);
- `types`: the `mismatches[].type` values it emits;
- `effect`: what a finding does to a SUPPORTS label when its `switch` (a `GuardedParams` field,
  or a name in `GuardedParams.checks_on`) is on: REFUTES, withdrawn to NOT ENOUGH INFO, or nothing;
- `vetoes_badge`: whether any finding of it hides a SUPPORTS badge (the display's veto, `agrees`)."""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import TYPE_CHECKING, ClassVar, TypeVar

if TYPE_CHECKING:  # only types here
    from schemas.verdict import Mismatch

# `Checks` (checks.py) in the annotations below is named, not imported: checks.py imports this registry,
# and an import back, even for types only, is a circle (tests/test_layers.py)


class Effect(str, Enum):
    """What a check's finding does to a SUPPORTS label (when its switch is on)."""
    NONE = "none"  # the display's veto only
    REFUTES = "refutes"  # the evidence states it otherwise: REFUTES, as strong as its support for the rest
    WITHDRAW = "withdraw"  # the evidence does not say it: NOT ENOUGH INFO, the SUPPORTS mass moved there


@dataclass(frozen=True)
class Relabel:
    """A finding that changes a SUPPORTS label: the effect, the rationale's note and the `numbers`
    flag the verdict records it under."""
    effect: Effect
    note: str
    flag: str


class DecisionCheck:
    """One check of a decided claim against the windows its label rests on (subclass and `@register`).

    `find` works the check out once per `Checks` (cached there); the rest read its finding."""
    name: ClassVar[str]
    runs: ClassVar[str]
    types: ClassVar[tuple[str, ...]]
    effect: ClassVar[Effect] = Effect.NONE
    switch: ClassVar[str | None] = None  # the GuardedParams field that turns `effect` on (None: `checks_on`)
    vetoes_badge: ClassVar[bool] = True
    order: ClassVar[int] = 50  # asked in this order: the cheap checks first, a parse last

    def find(self, checks: "Checks") -> object:
        """The finding (whatever this check computes), asked once per claim and window set."""
        raise NotImplementedError

    def agrees(self, checks: "Checks") -> bool:
        """Does this check agree (the display's veto and `checked` read it)?"""
        raise NotImplementedError

    def mismatches(self, checks: "Checks") -> list["Mismatch"]:
        """What did not agree, for the verdict (a check that has not run reports nothing)."""
        raise NotImplementedError

    def describe(self, mismatch: "Mismatch") -> str:
        """The mismatch as the rationale's "The evidence does not state ..." ends."""
        return f"the claim's {mismatch.type} \"{mismatch.span}\""

    def relabel(self, checks: "Checks", topical: bool) -> Relabel | None:
        """The label change this check's finding asks for a SUPPORTS (asked only when its switch is
        on); `topical`: the deciding window is on the claim's topic."""
        return None


CHECKS: dict[str, DecisionCheck] = {}
C = TypeVar("C", bound=type[DecisionCheck])


def register(cls: C) -> C:
    """Register a check under its name (a second one of that name is a mistake, refused)."""
    if cls.name in CHECKS:
        raise ValueError(f"decision check {cls.name!r} is registered twice")
    CHECKS[cls.name] = cls()
    return cls


def registered() -> tuple[DecisionCheck, ...]:
    """The registered checks, in the order they are asked (`order`, then name)."""
    _load()
    return tuple(sorted(CHECKS.values(), key=lambda c: (c.order, c.name)))


def check(name: str) -> DecisionCheck:
    """The registered check of this name (the components loaded first)."""
    _load()
    return CHECKS[name]


def names() -> tuple[str, ...]:
    """The registered checks' names, in the order they are asked: the verdict's `mismatches[].check`."""
    return tuple(c.name for c in registered())


def switched_on(check: DecisionCheck, params) -> bool:
    """Is this check's label effect on under these guarded parameters?"""
    if check.effect is Effect.NONE:
        return False
    if check.switch is not None:
        return bool(getattr(params, check.switch, False))
    return check.name in getattr(params, "checks_on", ())


@lru_cache(maxsize=1)
def _load() -> None:
    """Import every module of workers/decision/components (once): registering is their import's side
    effect, so a new check is a new module there and nothing else."""
    from . import components

    for module in pkgutil.iter_modules(components.__path__):
        importlib.import_module(f"{components.__name__}.{module.name}")
