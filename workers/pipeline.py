"""The checking pipeline as plain Python: each protocol is a list of stages, one runner.

`Pipeline.check_turns` — the one public entry — takes a batch (the stream agent's batch, or a
slice of an eval file), runs the protocol's stages over it (each stage batches its model calls
across the batch), times each stage, and turns only the declared outages (ModelUnavailable,
SearchUnavailable) into degraded/error verdicts via the stage's `on_outage`; per item it returns a
`TurnResult` (schemas/protocols.py): the verdicts to publish and the claim states behind them.
Any other exception is a bug: it propagates, and the stream worker turns it into error verdicts
for that batch. The stage chain is checked when the Pipeline is built (workers/state.py
`check_chain`), and with `verify.check_contracts` every stage runs on checked views of the states
(a field it does not declare fails: workers/state.py `Checked`); `PipelineHooks` is the one declared way to swap a stage's inputs or forward.

Timings (verdict `timings_ms`): a per-claim stage (`batched=False`: a loop over claims, nothing
shared) runs claim by claim and each claim gets its own milliseconds; a batched stage (one model
or search call for the whole batch) cannot be split, so each claim gets the batch's time divided
by the claims that shared it, and `timings_ms["batch_items"]` says by how many (with
`perf.overlap_parts` the stages up to the NLI reader run per part: the part's size). Loading (models,
index, spaCy, the first ONNX run) happens in `from_settings`, timed in `Pipeline.load_ms`, so it
never lands inside a stage of the first verdict.

The display policy can be re-read while running (`reload_display`, the worker's SIGHUP): what a
batch reads of it (the judge stage's copy, the verdict context, model_versions) is one `_Shown`,
swapped by one assignment and read once per `check_turns`, so a batch uses the old or the new
policy, never a mix."""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Callable

from schemas import Verdict
from schemas.items import CheckItem
from schemas.secrets import Scrubber
from schemas.protocols import (LABEL_PROTOCOLS, PROTOCOLS, RETRIEVAL_PROTOCOLS, Encoder, ModelUnavailable, NLIModel,
                              ReloadRefused, Searcher, SearchUnavailable, TurnResult)
from schemas.settings import Settings

from .caches import CachedEncoder, cache_stats, memoize
from .decision import load_decision
from .decision.decider import DecisionModelMismatch
from .display import DisplayPolicy, display_file, load_display
from .gate import BiConGate
from .llm.client import client_for
from .llm.stages import R5_SURFACES, EditStage, R5Stage, r5_cache
from .retrieval.factory import load_searcher
from .stages import CheckWorthyStage, GateStage, GoldEvidenceStage, RetrieveStage, SurfaceStage, VerifyStage, surfaces_of
from .state import ClaimState, Stage, check_chain, checked
from .surfaces.pronouns import cached_parse, set_parse_cache
from .verdict import VerdictContext, assemble, turn_summary

SURFACES = ("r0", "r1", "r2", "r3", "r4", "r4g", "r5", "r5g")  # r5/r5g: workers/llm (fall back to r4/r4g)
OUTAGES = (ModelUnavailable, SearchUnavailable)
# checked once by from_settings so lazy loading happens there (a pronoun: R4 and the gate run too)
WARM_UP = CheckItem("dialcheck-warm-up", "0", ["Do you know where Elvis Presley was born?"],
                    "He was born in Tupelo, Mississippi.",
                    gold_evidence=[("Elvis Presley", "Elvis Presley was born in Tupelo, Mississippi, in 1935.")])

__all__ = ["CheckItem", "ClaimState", "Pipeline", "PipelineHooks", "PROTOCOLS", "SURFACES", "TurnResult"]


def _views(settings: Settings, states: list[ClaimState], stage: Stage) -> list:
    """The states as `stage` may touch them (checked views with `verify.check_contracts`)."""
    return checked(states, stage) if settings.verify.check_contracts else states


def _degrading(stage: Stage, states: list, call: Callable, *args):
    """`call(*args)`; a declared outage (OUTAGES) is the stage's to degrade (`on_outage`): None."""
    try:
        return call(*args)
    except OUTAGES as e:
        stage.on_outage(states, e)
        return None


@dataclass(frozen=True)
class PipelineHooks:
    """What a caller (tuning) may swap without finding a stage by name: the verify stage's window
    selection, and its NLI forward (e.g. cached probabilities)."""
    window_fn: Callable | None = None  # (passage texts, fact, keep) → windows
    verify_forward: Callable | None = None  # (premises, hypotheses) → (n, 3) probabilities


@dataclass(frozen=True)
class _Shown:
    """Everything a batch reads of the display policy, replaced as one by `reload_display`."""
    display: DisplayPolicy | None
    stages: tuple  # the stages, the judge's copy holding `display`
    context: VerdictContext


class Pipeline:
    """A Checker: `check_turns(list[CheckItem]) -> list[TurnResult]`, the call the stream worker,
    `dialcheck check` and `dialcheck eval` all make."""

    def __init__(self, settings: Settings, nli: NLIModel, encoder: Encoder, searcher: Searcher | None = None,
                 protocol: str = "e2e", surface: str = "r4g", surface_builder=None,
                 hooks: PipelineHooks | None = None):
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol {protocol!r} not in {PROTOCOLS}")
        if surface not in SURFACES:
            raise ValueError(f"surface {surface!r} not in {SURFACES}")
        self.settings, self.nli, self.searcher = settings, nli, searcher
        self.encoder = encoder if not settings.perf.cache_entries or isinstance(encoder, CachedEncoder) \
            else CachedEncoder(encoder, settings.perf.cache_entries)
        self.protocol, self.surface = protocol, surface
        set_parse_cache(settings.perf.cache_entries)
        self.surface_builder = surface_builder or memoize(surfaces_of, settings.perf.cache_entries)
        self.gate = BiConGate(nli, self.encoder, settings.gate.weights)
        # the verifier's label decision (fv and e2e; ir decides no label)
        self.decision = load_decision(settings.verify, protocol, getattr(nli, "version", None)) \
            if protocol in LABEL_PROTOCOLS else None
        self.hooks = hooks or PipelineHooks()
        display = load_display(settings.verify, getattr(nli, "version", None), protocol)
        stages = self._stages(display)
        check_chain(stages)
        self._shown = _Shown(display, tuple(stages), VerdictContext(protocol, self._versions(display), display))
        # status reasons quote backends' errors (URLs, passwords): for the publish boundaries (`_verdict`)
        self.scrub = Scrubber.from_settings(settings)
        self.load_ms: dict[str, float] = {}  # from_settings: models, index and warm-up milliseconds
        self._pool = None  # the overlap thread (perf.overlap_parts), started on first use

    @property
    def display(self) -> DisplayPolicy | None:
        return self._shown.display

    @property
    def stages(self) -> list[Stage]:
        return list(self._shown.stages)

    @property
    def verdict_context(self) -> VerdictContext:
        return self._shown.context

    def reload_display(self, display_params: str | None = None) -> str:
        """Re-read the display file (`verify.display_params`, overwritten in place by an operator, or
        `display_params` to point at another file) through the loader the Pipeline was built with (the
        same NLI-fingerprint check), and use it from the next batch. A missing, broken or mismatched
        file raises ReloadRefused and the policy in use stays. Returns the policy now in use, in words."""
        path = display_params or display_file(self.settings.verify, self.protocol)
        try:
            settings = self.settings if display_params is None else \
                self.settings.updated(verify={"display_params": display_params})  # checks the file is there
            display = load_display(settings.verify, getattr(self.nli, "version", None), self.protocol, required=True)
        except DecisionModelMismatch as e:
            raise ReloadRefused(f"{e}; the old policy kept") from e
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:  # SettingsInvalid is a ValueError
            raise ReloadRefused(f"{path} is missing or broken ({type(e).__name__}: {str(e)[:200]}); "
                                f"the old policy kept") from e
        stages = tuple(self._with_display(st, display) for st in self._shown.stages)
        self._shown = _Shown(display, stages, VerdictContext(self.protocol, self._versions(display), display))
        self.settings = settings
        return self.display_in_use()

    def display_in_use(self) -> str:
        """The display policy in use, in words (the worker's log line after a reload)."""
        if self.display is None:
            return "the constant rule (no display file)"
        return f"{display_file(self.settings.verify, self.protocol)} ({self._versions(self.display)['display']})"

    @staticmethod
    def _with_display(stage: Stage, display: DisplayPolicy | None) -> Stage:
        """The stage itself, or for one that reads the display policy (the judge) a copy reading `display`."""
        if not hasattr(stage, "display"):
            return stage
        stage = copy.copy(stage)
        stage.display = display
        return stage

    def _stages(self, display: DisplayPolicy | None = None) -> list[Stage]:
        s = self.settings
        stages: list[Stage] = []
        skip = None if s.verify.checkworthy else frozenset(k for k in s.verify.skip_turns.split(",") if k)
        if (skip is None or skip) and self.protocol != "ir":
            stages.append(CheckWorthyStage(skip, s.perf.batch_parsing))
        base = R5_SURFACES.get(self.surface, self.surface)  # r5 → r4, r5g → r4g: R5's fallback path
        stages.append(SurfaceStage(base, self.surface_builder))
        if base == "r4g":
            stages.append(GateStage(self.gate, s.gate))
        if self.surface in R5_SURFACES:
            stages.append(R5Stage(client_for(s.llm), self.gate, s.gate, self.surface == "r5g", r5_cache(s)))
        if self.protocol in RETRIEVAL_PROTOCOLS:
            stages.append(RetrieveStage(self.searcher, self.encoder, s.retrieval, s.perf.batch_query_encoding))
            if s.llm.edit:
                stages.append(EditStage(client_for(s.llm), self.searcher, self.encoder, s.retrieval, s.llm))
        if self.protocol == "fv":
            stages.append(GoldEvidenceStage())
        if self.decision is not None:
            verify = VerifyStage(self.nli, s.verify, self.decision, batch_parse=s.perf.batch_parsing, **(
                {"window_fn": self.hooks.window_fn} if self.hooks.window_fn is not None else {}))
            if self.hooks.verify_forward is not None:
                verify.forward = lambda pairs: self.hooks.verify_forward(*pairs)
            stages.append(verify)
            if s.llm.judge:  # the cascade judge (workers/llm/judge.py); the NLI's label stays in notes["judge"]
                from .llm.judge import JudgeStage
                stages.append(JudgeStage.of(s.llm, self.decision, display))
        return stages

    @classmethod
    def from_settings(cls, settings: Settings, protocol: str = "e2e", surface: str = "r4g") -> "Pipeline":
        """Models and index loaded, then one warm-up claim checked: `load_ms` has the three times,
        and the first verdict's stage timings hold no loading."""
        from .models.factory import load_models

        t0 = time.perf_counter()
        nli, encoder = load_models(settings)
        t1 = time.perf_counter()
        searcher = load_searcher(settings, encoder) if protocol in RETRIEVAL_PROTOCOLS else None
        t2 = time.perf_counter()
        pipe = cls(settings, nli, encoder, searcher, protocol, surface)
        pipe.load_ms = {"models": round((t1 - t0) * 1000, 1), "index": round((t2 - t1) * 1000, 1),
                        "warm_up": pipe.warm_up()}
        return pipe

    def warm_up(self) -> float:
        """Check WARM_UP once (no LLM call: r5 takes its R4 path, no editing), so that what loads
        lazily (spaCy models, the truecaser, ONNX Runtime's first run) loads now. Milliseconds."""
        t = time.perf_counter()
        base = R5_SURFACES.get(self.surface, self.surface)
        pipe = self if base == self.surface and not self.settings.llm.edit else Pipeline(
            self.settings.updated(llm={"edit": False}), self.nli, self.encoder, self.searcher, self.protocol, base,
            self.surface_builder)
        pipe.check_turns([WARM_UP])
        return round((time.perf_counter() - t) * 1000, 1)

    def with_options(self, protocol: str | None = None, surface: str | None = None) -> "Pipeline":
        """Same models and index, another protocol/surface (the evaluator loops over surfaces)."""
        return Pipeline(self.settings, self.nli, self.encoder, self.searcher, protocol or self.protocol,
                        surface or self.surface, self.surface_builder, self.hooks)

    def load_report(self) -> str:
        """One line for people: what loading cost, kept out of every verdict's timings_ms."""
        if not self.load_ms:
            return ""
        return ("loaded before the first claim: " + ", ".join(f"{k.replace('_', '-')} {v:.0f} ms"
                                                              for k, v in self.load_ms.items()))

    # ---- public API ---------------------------------------------------------------------------
    def check_turns(self, items: list[CheckItem]) -> list[TurnResult]:
        """Per item, a TurnResult with every verdict to publish: with `verify.segment` a turn of
        several claims gets one verdict per claim (own claim_id) and then the turn summary (the
        turn's claim_id, the worst label — REFUTES > SUPPORTS > NEI — its rationale saying so);
        otherwise the one verdict of the turn. `states` are the claims' stage fields (IR metrics,
        tuning); under the IR protocol no label is decided. The display policy is read once, here."""
        shown = self._shown
        if not self.settings.verify.segment or self.protocol == "ir":
            return [TurnResult(st.item, [self._verdict(st, shown)], [st]) for st in self._run(items, shown)]
        from .segment import capped, segment, turn_label

        flat, owner, segs = [], [], []
        for i, it in enumerate(items):
            claims = segment(it.claim, self.settings.verify.max_claims_per_turn)  # capped: the rest in `note`
            segs.append(claims)
            for seg in claims:
                flat.append(CheckItem(it.conversation_id, it.turn_id, list(it.context), seg.text, it.gold_evidence))
                owner.append(i)
        states = self._run(flat, shown) if flat else []
        per_item: list[list[ClaimState]] = [[] for _ in items]
        for i, st in zip(owner, states):
            per_item[i].append(st)
        out = []
        for item, claims, sts in zip(items, segs, per_item):
            verdicts = [self._verdict(st, shown) for st in sts]
            note = getattr(claims, "note", None)
            if len(verdicts) <= 1 and not note:
                out.append(TurnResult(item, verdicts or [self._verdict(ClaimState(item), shown)], sts))
                continue
            summary = turn_summary(item, verdicts, turn_label(v.label for v in verdicts))
            out.append(TurnResult(item, verdicts + [capped(summary, claims)], sts, note))
        return out

    def _run(self, items: list[CheckItem], shown: _Shown) -> list[ClaimState]:
        """Every stage of the protocol over the batch, timed (module docstring): a per-claim stage
        claim by claim, a batched stage once, its time shared by `batch_items` claims. A claim a
        stage answered (not check-worthy) goes to no later stage. With `perf.overlap_parts` > 1 the
        batch goes through in parts: while the NLI model reads one part (a thread), the stages before
        it run on the next, and the stages after it (the judge) run once on the whole batch; each claim
        gets the same stages and the same numbers (`_overlap_at`)."""
        states = [ClaimState(it) for it in items]
        shared: dict[int, int] = {}
        at = self._overlap_at(shown.stages, len(states))
        if at is None:
            self._run_stages(shown.stages, states, shared)
        else:
            head, reader, tail = shown.stages[:at], shown.stages[at], shown.stages[at + 1:]
            n = self.settings.perf.overlap_parts
            finish = None
            for part in (states[i * len(states) // n:(i + 1) * len(states) // n] for i in range(n)):
                self._run_stages(head, part, shared)
                if finish is not None:
                    finish()
                finish = self._begin(reader, part, shared)
            finish()
            self._run_stages(tail, states, shared)  # once for the whole batch (the judge's budget is per batch)
        for st in states:
            if id(st) in shared:
                st.timings["batch_items"] = shared[id(st)]
        return states

    def _run_stages(self, stages, states: list[ClaimState], shared: dict[int, int]) -> None:
        for stage in stages:
            todo = [st for st in states if not st.skip_reason]
            if not stage.batched:
                for st in todo:
                    st.timings[stage.name] = round(self._timed(stage, [st]), 2)
            elif todo:
                self._share(stage, todo, self._timed(stage, todo), shared)

    @staticmethod
    def _share(stage: Stage, todo: list[ClaimState], ms: float, shared: dict[int, int]) -> None:
        for st in todo:
            st.timings[stage.name] = round(ms / len(todo), 2)
            shared[id(st)] = len(todo)

    def _overlap_at(self, stages, claims: int) -> int | None:
        """Where the batch may be split (the index of the NLI reader), or None: only with
        `perf.overlap_parts` > 1, a part of at least one claim, no hook swapping the reader's inputs,
        an NLI model that may be called from another thread (`any_thread`, workers/models/nli_base.py),
        and only when every stage before the reader declares `beside_nli` (never calls the NLI model:
        the gate and R5 do, so r4g and r5 run unsplit)."""
        parts = self.settings.perf.overlap_parts
        if parts < 2 or claims < parts or self.hooks.window_fn is not None or self.hooks.verify_forward is not None \
                or not getattr(self.nli, "any_thread", False):
            return None
        at = next((i for i, st in enumerate(stages) if hasattr(st, "begin")), None)
        if at is None or not all(getattr(st, "beside_nli", False) for st in stages[:at]):
            return None
        return at

    def _begin(self, stage, part: list[ClaimState], shared: dict[int, int]) -> Callable[[], None]:
        """Start `stage` (the NLI reader) on `part`, its reads on the overlap thread; the returned call
        waits for them and postprocesses. The stage's time per claim is its own work: preprocess, the
        reads (on the thread) and postprocess, not the wait."""
        from concurrent.futures import wait

        todo = [st for st in part if not st.skip_reason]
        if not todo:
            return lambda: None
        views = _views(self.settings, todo, stage)
        reads, read_ms = [], []

        def submit(fn):
            def timed():
                t = time.perf_counter()
                try:
                    return fn()
                finally:
                    read_ms.append((time.perf_counter() - t) * 1000)
            reads.append(self._overlap_pool().submit(timed))
            return reads[-1]

        t = time.perf_counter()
        finish = _degrading(stage, views, stage.begin, views, submit)
        ms = (time.perf_counter() - t) * 1000

        def done() -> None:
            nonlocal ms
            if finish is not None:
                wait(reads)  # the reads' time is counted on their thread
                t = time.perf_counter()
                _degrading(stage, views, finish)
                ms += (time.perf_counter() - t) * 1000 + sum(read_ms)
            self._share(stage, todo, ms, shared)
        return done

    def _overlap_pool(self):
        """One thread for the NLI reads of `perf.overlap_parts`, started on first use."""
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(1, thread_name_prefix="dialcheck-overlap")
        return self._pool

    def _timed(self, stage: Stage, states: list[ClaimState]) -> float:
        """Milliseconds of one stage call; a declared outage is the stage's to degrade."""
        states = _views(self.settings, states, stage)
        t = time.perf_counter()
        _degrading(stage, states, stage.run, states)
        return (time.perf_counter() - t) * 1000

    def phase_ms(self) -> dict[str, float]:
        """Milliseconds spent in each model stage's preprocess / forward / postprocess so far."""
        return {k: round(v, 1) for st in self.stages for k, v in getattr(st, "phase_ms", {}).items()}

    # ---- verdict ------------------------------------------------------------------------------
    def _verdict(self, st: ClaimState, shown: _Shown) -> Verdict:
        """Not scrubbed here: secrets are scrubbed once, where a verdict leaves the process (the
        stream's publish, `dialcheck check`'s output, a run file), with `self.scrub`."""
        return assemble(st, shown.context)

    def decision_rule(self) -> str:
        return self.decision.rule if self.decision is not None else "none"

    def cache_stats(self) -> dict[str, dict[str, int]]:
        """Hits, misses, entries and capacity per cache (workers/caches.py), for the worker's /metrics."""
        return cache_stats(self.searcher, self.encoder, self.surface_builder, cached_parse())

    def model_versions(self) -> dict[str, str]:
        return self._versions(self.display)

    def _versions(self, display: DisplayPolicy | None) -> dict[str, str]:
        v = {"nli": getattr(self.nli, "version", "?"), "encoder": getattr(self.encoder, "version", "?"),
             "protocol": self.protocol, "surface_mode": self.surface}
        if self.searcher is not None:
            v["search"] = getattr(self.searcher, "name", "?")
        if self.decision is not None:
            v["decision"] = self.decision.version
        if display is not None:
            v["display"] = f"policy@{display.meta.get('date', 'fitted')}"
        return v

