"""Building a Pipeline's chain: which stages a protocol and surface get (one declared table), and the
set a batch reads (the NLI model, the decision, the display, the stages on them, their versions).

Why a table and not code: what runs for `fv` at `r5g` is then read off one place, and a test walks
every protocol × surface through it (tests/test_stage_table.py). Why one `Chain` value: a reload
(workers/reloading.py) builds a whole new one beside the running one and swaps it with one
assignment, so a batch reads one model, decision and display, never a mix."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from typing import Callable

from schemas.protocols import (LABEL_PROTOCOLS, PROTOCOLS, RETRIEVAL_PROTOCOLS, SURFACES, Encoder, NLIModel,
                              Searcher)
from schemas.settings import Settings

from .caches import CachedEncoder, memoize
from .decision import DecisionMethod, load_decision
from .display import DisplayPolicy, load_display
from .gate import BiConGate
from .llm.client import client_for
from .llm.judge import JudgeStage
from .llm.stages import R5_SURFACES, EditStage, R5Stage, r5_cache
from .stages import CheckWorthyStage, GateStage, LanguageStage, GoldEvidenceStage, RetrieveStage, SurfaceStage, VerifyStage, surfaces_of
from .rival import RivalQueryStage
from .state import Stage, check_chain
from .surfaces.pronouns import set_parse_cache
from .verdict import VerdictContext
from .windows import top_windows

GATED_SURFACES = ("r4g", "r5g")  # the surfaces whose rewrite BiCon-Gate accepts or rejects


@dataclass(frozen=True)
class PipelineHooks:
    """What a caller (tuning) may swap without finding a stage by name: the verify stage's window
    selection, and its NLI forward (e.g. cached probabilities)."""
    window_fn: Callable | None = None  # (passage texts, fact, keep) → windows
    verify_forward: Callable | None = None  # (premises, hypotheses) → (n, 3) probabilities


@dataclass(frozen=True)
class Parts:
    """What one chain's stages are built from."""
    settings: Settings
    protocol: str
    surface: str
    nli: NLIModel
    encoder: Encoder
    searcher: Searcher | None
    surface_builder: Callable
    hooks: PipelineHooks
    decision: DecisionMethod | None
    display: DisplayPolicy | None

    @cached_property
    def gate(self) -> BiConGate:
        """One BiCon-Gate for the gate and R5 stages."""
        return BiConGate(self.nli, self.encoder, self.settings.gate.weights)

    @property
    def base_surface(self) -> str:
        """r5 → r4, r5g → r4g: the R4 path R5 falls back to."""
        return R5_SURFACES.get(self.surface, self.surface)


def _skip_turns(s: Settings) -> frozenset | None:
    """The turn kinds left unchecked; None: every kind that states no fact (`claims.checkworthy`)."""
    return None if s.claims.checkworthy else frozenset(k for k in s.claims.skip_turns.split(",") if k)


def _verify(p: Parts) -> VerifyStage:
    s = p.settings
    window_fn = p.hooks.window_fn or (partial(top_windows, max_words=s.windows.max_window_words)
                                      if s.windows.max_window_words else None)
    stage = VerifyStage(p.nli, s.windows, p.decision, batch_parse=s.perf.batch_parsing,
                        **({"window_fn": window_fn} if window_fn is not None else {}))
    if p.hooks.verify_forward is not None:
        stage.forward = lambda pairs: p.hooks.verify_forward(*pairs)
    return stage


@dataclass(frozen=True)
class StageRow:
    """One stage of the table: for which protocols and surfaces, under which parts (its settings, a
    searcher, the decision), built how."""
    stage: type
    protocols: tuple[str, ...]
    surfaces: tuple[str, ...]
    build: Callable[[Parts], Stage]
    when: Callable[[Parts], bool] = field(default=lambda p: True)

    def applies(self, parts: Parts) -> bool:
        return parts.protocol in self.protocols and parts.surface in self.surfaces and self.when(parts)


def rival_queries_wanted(p: Parts) -> bool:
    """Rival queries need a searcher, and (`retrieval.rival_queries` auto) a decision whose rival check
    is on: without it their passages would be read for nothing."""
    mode = p.settings.retrieval.rival_queries
    checks_on = (getattr(p.decision, "params", None) or {}).get("checks_on") or ()
    return p.searcher is not None and (mode == "on" or (mode == "auto" and "rival" in checks_on))


# In chain order. The judge re-judges the verifier's decision (workers/llm/judge.py); R5 and editing
# call the LLM (DIALCHECK_LLM_URL) and fall back to the R4 path and the first retrieval.
STAGE_TABLE: tuple[StageRow, ...] = (
    StageRow(LanguageStage, LABEL_PROTOCOLS, SURFACES, lambda p: LanguageStage()),  # English only: other languages NEI
    StageRow(CheckWorthyStage, LABEL_PROTOCOLS, SURFACES,
             lambda p: CheckWorthyStage(_skip_turns(p.settings), p.settings.perf.batch_parsing),
             when=lambda p: _skip_turns(p.settings) is None or bool(_skip_turns(p.settings))),
    StageRow(SurfaceStage, PROTOCOLS, SURFACES, lambda p: SurfaceStage(p.base_surface, p.surface_builder)),
    StageRow(GateStage, PROTOCOLS, GATED_SURFACES,
             lambda p: GateStage(p.gate, p.settings.gate)),
    StageRow(R5Stage, PROTOCOLS, tuple(R5_SURFACES),
             lambda p: R5Stage(client_for(p.settings.llm), p.gate, p.settings.gate, p.surface == "r5g", r5_cache(p.settings))),
    StageRow(RetrieveStage, RETRIEVAL_PROTOCOLS, SURFACES,
             lambda p: RetrieveStage(p.searcher, p.encoder, p.settings.retrieval,
                                     p.settings.perf.batch_query_encoding)),
    StageRow(EditStage, RETRIEVAL_PROTOCOLS, SURFACES,
             lambda p: EditStage(client_for(p.settings.llm), p.searcher, p.encoder, p.settings.retrieval,
                                 p.settings.llm),
             when=lambda p: p.settings.llm.edit),
    StageRow(RivalQueryStage, ("e2e",), SURFACES, lambda p: RivalQueryStage(p.searcher, p.settings.retrieval.rival_top_k),
             when=rival_queries_wanted),
    StageRow(GoldEvidenceStage, ("fv",), SURFACES, lambda p: GoldEvidenceStage()),
    StageRow(VerifyStage, LABEL_PROTOCOLS, SURFACES, _verify),
    StageRow(JudgeStage, LABEL_PROTOCOLS, SURFACES, lambda p: JudgeStage.of(p.settings.llm, p.decision, p.display),
             when=lambda p: p.settings.llm.judge),
)


def stages_for(parts: Parts, table: tuple[StageRow, ...] | None = None) -> list[Stage]:
    """The table's stages for the parts' protocol and surface, in order, checked (`check_chain`)."""
    rows = STAGE_TABLE if table is None else table
    stages = [row.build(parts) for row in rows if row.applies(parts)]
    check_chain(stages)
    return stages


@dataclass(frozen=True)
class Chain:
    """Everything one batch reads, replaced as one: the settings it was loaded from, the NLI model,
    the decision and display, the stages built on them, and the verdict context naming them."""
    settings: Settings
    nli: NLIModel
    decision: DecisionMethod | None
    display: DisplayPolicy | None
    stages: tuple
    context: VerdictContext

    def with_display(self, display: DisplayPolicy | None, settings: Settings, versions: dict) -> "Chain":
        """The same chain reading another display policy (the stages that declare "display" copied)."""
        return replace(self, settings=settings, display=display,
                       stages=tuple(st.with_display(display) for st in self.stages),
                       context=VerdictContext(self.context.protocol, versions, display))


@dataclass(frozen=True)
class Chains:
    """What one batch reads, swapped as one: the protocol's chain and, in an e2e Pipeline, `grounded`:
    protocol fv's chain on the same NLI model, for the items that carry the passages to check
    against (grounded turns, CheckItem.gold_evidence); None in an fv or ir Pipeline."""
    main: Chain
    grounded: Chain | None = None


@dataclass(frozen=True)
class Builder:
    """What stays for the Pipeline's life (encoder, index, protocol, surface, caches, hooks); `chain`
    builds the part a reload replaces."""
    protocol: str
    surface: str
    encoder: Encoder
    searcher: Searcher | None
    surface_builder: Callable
    hooks: PipelineHooks

    @classmethod
    def of(cls, settings: Settings, encoder: Encoder, searcher: Searcher | None, protocol: str, surface: str,
           surface_builder: Callable | None = None, hooks: PipelineHooks | None = None) -> "Builder":
        """Checked protocol and surface; the encoder and surface builder behind the `perf` caches, and
        the process-wide spaCy parse cache sized (`set_parse_cache`: a module's, shared by every
        Pipeline of the process)."""
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol {protocol!r} not in {PROTOCOLS}")
        if surface not in SURFACES:
            raise ValueError(f"surface {surface!r} not in {SURFACES}")
        n = settings.perf.cache_entries
        set_parse_cache(n)
        encoder = encoder if not n or isinstance(encoder, CachedEncoder) else CachedEncoder(encoder, n)
        return cls(protocol, surface, encoder, searcher, surface_builder or memoize(surfaces_of, n),
                   hooks or PipelineHooks())

    def grounded(self) -> "Builder | None":
        """An e2e builder's twin for grounded items: protocol fv (its decision and display files, its
        stages), the same encoder, caches and hooks, no index; None for other protocols."""
        return replace(self, protocol="fv", searcher=None) if self.protocol == "e2e" else None

    def chain(self, settings: Settings, nli: NLIModel, required_display: bool = False) -> Chain:
        """The decision and display for `nli` (each checked against its version: DecisionModelMismatch),
        the table's stages on them, and their versions. `required_display`: a named display file that
        is missing raises (a reload) instead of falling back to the constant rule."""
        version = getattr(nli, "version", None)
        decision = load_decision(settings.decision, self.protocol, version) if self.protocol in LABEL_PROTOCOLS else None
        display = load_display(settings.decision, version, self.protocol, required=required_display)
        parts = Parts(settings, self.protocol, self.surface, nli, self.encoder, self.searcher, self.surface_builder,
                      self.hooks, decision, display)
        stages = tuple(stages_for(parts))
        context = VerdictContext(self.protocol, self.versions(nli, decision, display), display)
        return Chain(settings, nli, decision, display, stages, context)

    def versions(self, nli: NLIModel, decision: DecisionMethod | None, display: DisplayPolicy | None) -> dict[str, str]:
        """What each verdict names in `model_versions`."""
        v = {"nli": getattr(nli, "version", "?"), "encoder": getattr(self.encoder, "version", "?"),
             "protocol": self.protocol, "surface_mode": self.surface}
        if self.searcher is not None:
            v["search"] = getattr(self.searcher, "name", "?")
        if decision is not None:
            v["decision"] = decision.version
        if display is not None:
            v["display"] = f"policy@{display.meta.get('date', 'fitted')}"
        return v
