"""The decision checks' registry (workers/decision/registry.py): the verdict's schema and the
`Mismatch` type name exactly the registered checks, each check says what it emits, and a check
added by one module is asked, reported and switched on by name."""
from __future__ import annotations

import json
import typing
from pathlib import Path

import numpy as np
import pytest

from schemas.verdict import Mismatch
from workers.decision import ClaimEvidence, method
from workers.decision.checks import Checks
from workers.decision.guarded import GuardedParams
from workers.decision.registry import CHECKS, DecisionCheck, Effect, Relabel, names, register, registered

pytestmark = pytest.mark.unit

SCHEMA = json.loads((Path(__file__).parents[1] / "schemas" / "verdict.schema.json").read_text())


def _mismatch_schema() -> dict:
    return SCHEMA["properties"]["mismatches"]["items"]["properties"]


def test_the_schema_and_the_mismatch_type_name_exactly_the_registered_checks():
    assert set(_mismatch_schema()["check"]["enum"]) == set(names())
    assert set(typing.get_args(typing.get_type_hints(Mismatch)["check"])) == set(names())


def test_every_type_a_check_emits_is_documented_in_the_schema():
    described = _mismatch_schema()["type"]["description"]
    for check in registered():
        assert check.types and check.runs and check.name
        for kind in check.types:
            assert kind in described, (check.name, kind)


def test_the_checks_are_asked_cheap_first():
    assert names() == ("slot", "subject", "structure", "rival")


def test_a_name_registered_twice_is_refused():
    with pytest.raises(ValueError, match="twice"):
        register(type("Again", (DecisionCheck,), {"name": "slot"}))


def test_the_structure_types_are_the_roles_it_emits():
    from workers.decision.structure import Role

    assert set(CHECKS["structure"].types) == {r.value for r in Role}


def test_an_unknown_check_switched_on_is_refused():
    with pytest.raises(ValueError, match="not registered"):
        GuardedParams(0.3, 0.5, checks_on=("no_such_check",))


class _Shouting(DecisionCheck):
    """The worked example of docs/method.md, registered for one test only: a claim in capitals is
    not checkable as written."""
    name, runs, types, effect, order = "shouting", "every decided claim", ("capitals",), Effect.WITHDRAW, 40

    def find(self, checks: Checks) -> bool:
        return checks.claim.isupper()

    def agrees(self, checks: Checks) -> bool:
        return not checks.finding(self.name)

    def mismatches(self, checks: Checks) -> list[Mismatch]:
        return [Mismatch(self.name, "capitals", checks.claim, "differs")] if checks.finding(self.name) else []

    def relabel(self, checks: Checks, topical: bool) -> Relabel | None:
        return Relabel(Effect.WITHDRAW, "The claim is shouted.", "shouting") if checks.finding(self.name) else None


@pytest.fixture
def shouting():
    register(_Shouting)
    try:
        yield
    finally:
        CHECKS.pop("shouting")


def _supported(claim: str) -> ClaimEvidence:
    """A claim one window entails, the window stating it word for word."""
    return ClaimEvidence(claim, np.array([[0.9, 0.05, 0.05]]), np.ones(1), np.zeros(1, int), [None], None, [claim], [""])


@pytest.mark.model  # the subject and relation checks parse (spaCy)
def test_a_check_added_by_one_module_is_asked_reported_and_switched_on_by_name(shouting):
    params = {"t_supports": 0.35, "t_refutes": 0.56, "on_topic": 0.5}
    claim = "THE EIFFEL TOWER WAS COMPLETED IN 1889."
    off = method("guarded", params).decide(_supported(claim))
    assert off.label == "SUPPORTS" and [m.check for m in off.checks.mismatches()] == ["shouting"]
    assert not off.checks.agreed  # the display's veto reads it without a switch
    on = method("guarded", {**params, "checks_on": ["shouting"]}).decide(_supported(claim))
    assert (on.label, on.numbers.get("shouting"), on.note) == ("NOT ENOUGH INFO", True, "The claim is shouted.")
