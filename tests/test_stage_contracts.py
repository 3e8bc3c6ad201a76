"""The stage contract is checked: a stage that reads or writes a ClaimState field its @component does
not declare fails (workers/state.py `Checked`, on for the whole suite by ../conftest.py), and a
protocol whose stage reads what no earlier stage writes is refused when the chain is built."""
from __future__ import annotations

import pytest

from schemas.items import CheckItem
from schemas.protocols import Passage
from workers.decision import NO_EVIDENCE, Decision
from workers.state import ClaimState, StageContractError, StageChainError, check_chain, checked, component
from workers.stages import CheckWorthyStage, GoldEvidenceStage, SurfaceStage, VerifyStage

pytestmark = pytest.mark.unit


def _state() -> ClaimState:
    return ClaimState(CheckItem("c", "t", [], "The Eiffel Tower was completed in 1889.",
                                gold_evidence=[("Eiffel Tower", "It was completed in 1889.")]))


@component(reads=("item",), writes=("passages",), batched=False)
class _Honest:
    name = "honest"

    def run(self, states):
        for s in states:
            s.passages = [Passage("p", "T", s.item.claim)]
            s.passages.append(Passage("q", "T", "read back what it writes"))


@component(reads=("item",), writes=("passages",), batched=False)
class _ReadsUndeclared(_Honest):
    name = "peeks"

    def run(self, states):
        for s in states:
            s.passages = list(s.windows)  # windows: neither read nor written by its declaration


@component(reads=("item", "passages"), writes=("problems",), batched=False)
class _WritesUndeclared(_Honest):
    name = "scribbles"

    def run(self, states):
        for s in states:
            s.decision = Decision("SUPPORTS", dict(NO_EVIDENCE), None)  # decision: not declared


def test_a_stage_that_keeps_to_its_declaration_runs():
    s = _state()
    _Honest().run(checked([s], _Honest()))
    assert [p.id for p in s.passages] == ["p", "q"]


def test_a_stage_reading_an_undeclared_field_fails():
    with pytest.raises(StageContractError, match="'peeks' reads ClaimState.windows"):
        _ReadsUndeclared().run(checked([_state()], _ReadsUndeclared()))


def test_a_stage_writing_an_undeclared_field_fails_and_leaves_the_state():
    s = _state()
    with pytest.raises(StageContractError, match="'scribbles' writes ClaimState.decision"):
        _WritesUndeclared().run(checked([s], _WritesUndeclared()))
    assert s.decision is None


def test_methods_and_properties_are_checked_through_the_view():
    """`use_original` writes fv_surface / ir_surface, `best` reads decision and decisions: a stage
    calling them must declare those fields."""
    view = checked([_state()], _Honest())[0]
    with pytest.raises(StageContractError, match="writes ClaimState.fv_surface"):
        view.use_original()
    with pytest.raises(StageContractError, match=r"reads \(through best\) ClaimState.decision"):
        view.best
    with pytest.raises(AttributeError, match="no field 'label'"):
        view.label = "SUPPORTS"


def test_the_real_stages_without_a_model_keep_to_their_declarations():
    s = _state()
    for stage in (CheckWorthyStage(frozenset({"question"})), GoldEvidenceStage()):
        stage.run(checked([s], stage))
    assert not s.skip_reason and [p.title for p in s.passages] == ["Eiffel Tower"]


def test_a_misordered_protocol_is_refused_when_the_chain_is_built():
    verify = VerifyStage.__new__(VerifyStage)  # its declaration is what check_chain reads
    check_chain([SurfaceStage("r0"), GoldEvidenceStage(), verify])
    with pytest.raises(StageChainError, match=r"stage 'verify' reads \['fv_surface', 'passages', 'surfaces'\]"):
        check_chain([verify, SurfaceStage("r0"), GoldEvidenceStage()])
    with pytest.raises(StageChainError, match=r"reads \['passages'\]"):
        check_chain([SurfaceStage("r0"), verify, GoldEvidenceStage()])


def test_the_pipeline_runs_stages_on_checked_states_when_asked():
    from types import SimpleNamespace

    from schemas.settings import load_settings
    from workers.pipeline import Pipeline

    s = _state()
    on = SimpleNamespace(settings=load_settings(verify={"check_contracts": True}))
    with pytest.raises(StageContractError):
        Pipeline._timed(on, _ReadsUndeclared(), [s])
    off = SimpleNamespace(settings=load_settings(verify={"check_contracts": False}))
    Pipeline._timed(off, _ReadsUndeclared(), [s])  # unchecked: the stage's bug goes unnoticed
    assert s.passages == []
