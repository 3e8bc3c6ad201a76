"""The stage contract is checked: a stage that reads or writes a ClaimState field its @component does
not declare fails (workers/state.py `Checked`, on for the whole suite by ../conftest.py), and a
protocol whose stage reads what no earlier stage writes is refused when the chain is built."""
from __future__ import annotations

import pytest

from schemas.items import CheckItem
from schemas.protocols import Passage
from workers.decision import NO_EVIDENCE, Decision
from workers.state import BaseStage, ClaimState, StageContractError, StageChainError, check_chain, checked, component
from workers.stages import CheckWorthyStage, GoldEvidenceStage, SurfaceStage, VerifyStage

pytestmark = pytest.mark.unit


def _state() -> ClaimState:
    return ClaimState(CheckItem("c", "t", [], "The Eiffel Tower was completed in 1889.",
                                gold_evidence=[("Eiffel Tower", "It was completed in 1889.")]))


@component(reads=("item",), writes=("passages",), batched=False)
class _Honest(BaseStage):
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


@pytest.mark.model  # parses with spaCy
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
    from workers.chain import timed

    s = _state()
    with pytest.raises(StageContractError):
        timed(_ReadsUndeclared(), [s], check_contracts=True)
    timed(_ReadsUndeclared(), [s], check_contracts=False)  # unchecked: the stage's bug goes unnoticed
    assert s.passages == []


# ---- capabilities: what the Pipeline may ask of a stage besides `run` (workers/state.py CAPABILITIES)

@component(reads=("item",), writes=("passages",), batched=False, can=("beside_nli",))
class _Beside(_Honest):
    name = "beside"


def _declared(name: str, can: frozenset, **methods):
    """A stage class whose capabilities are set by hand after @component (as a plugin could)."""
    cls = type(name, (_Honest,), {"name": name, **methods})
    cls.can = frozenset(can)
    return cls()


def test_an_unknown_capability_is_refused_when_declared():
    with pytest.raises(TypeError, match=r"declares capabilities no stage has: \['teleport'\]"):
        component(reads=("item",), writes=(), can=("teleport",))(type("_Teleports", (BaseStage,), {}))


@pytest.mark.parametrize("stage,why", [
    (_declared("teleports", {"teleport"}), r"declares unknown capabilities \['teleport'\]"),
    (_declared("no_begin", {"begin"}), "declares 'begin' but has no begin of its own"),
    (_declared("hidden_begin", set(), begin=lambda self, states, submit=None: (lambda: None)),
     "defines its own begin but does not declare 'begin'"),
    (_declared("no_outage", {"degrade"}), "declares 'degrade' but has no on_outage of its own"),
    (_declared("hidden_outage", set(), on_outage=lambda self, states, error: None),
     "defines its own on_outage but does not declare 'degrade'"),
    (_declared("no_display", {"display"}), "declares 'display' but holds no display"),
    (_declared("reads_beside", {"begin", "beside_nli"}, begin=lambda self, states, submit=None: (lambda: None)),
     "declares 'begin' .* and 'beside_nli'"),
])
def test_a_misdeclared_capability_fails_the_chain_check(stage, why):
    check_chain([_Honest(), _Beside()])
    with pytest.raises(StageChainError, match=why):
        check_chain([_Honest(), stage])


def test_a_stage_without_the_base_is_refused():
    @component(reads=("item",), writes=("passages",))
    class Bare:
        name = "bare"

        def run(self, states):
            pass

    with pytest.raises(StageChainError, match="does not derive from workers.state.BaseStage"):
        check_chain([Bare()])


def test_the_defaults_come_from_the_base():
    """Undeclared: an outage propagates, `begin` runs the whole stage, `with_display` is the stage."""
    from schemas.protocols import ModelUnavailable

    stage, s = _Honest(), _state()
    with pytest.raises(ModelUnavailable):
        stage.on_outage([s], ModelUnavailable("down"))
    stage.begin([s])()
    assert [p.id for p in s.passages] == ["p", "q"]
    assert stage.with_display(object()) is stage


@pytest.mark.model
def test_a_misdeclared_stage_fails_when_the_pipeline_is_built(settings, nli, encoder, monkeypatch):
    """The table's stages are checked when a Pipeline is built, before any claim."""
    from workers import building
    from workers.pipeline import Pipeline

    bad = building.StageRow(_Honest, ("fv",), building.SURFACES, lambda p: _declared("no_outage", {"degrade"}))
    monkeypatch.setattr(building, "STAGE_TABLE", (*building.STAGE_TABLE, bad))
    with pytest.raises(StageChainError, match="'no_outage' declares 'degrade'"):
        Pipeline(settings, nli, encoder, None, protocol="fv", surface="r0")
