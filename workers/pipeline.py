"""The checking pipeline as plain Python: each protocol is a chain of stages, one runner.

`Pipeline.check_turns` — the one public entry — takes a batch (the stream agent's batch, or a
slice of an eval file), runs the chain over it (each stage batches its model calls across the
batch), times each stage (workers/chain.py), and turns only the declared outages
(ModelUnavailable, SearchUnavailable) into degraded/error verdicts via the stage's `on_outage`; per
item it returns a `TurnResult` (schemas/protocols.py): the verdicts to publish and the claim states
behind them. Any other exception is a bug: it propagates, and the stream worker turns it into error
verdicts for that batch.

The parts around it: which stages run, and the set a batch reads, are built in workers/building.py
(one declared table, checked when built: fields and capabilities, workers/state.py); splitting a
batch around the NLI reader is workers/overlap.py; re-reading the model, decision and display while
running is workers/reloading.py. What a batch reads is one `Chain`, swapped by one assignment and
read once per `check_turns`, so a batch uses the old or the new set, never a mix. Loading (models,
index, spaCy, the first ONNX run) happens in `from_settings`, timed in `Pipeline.load_ms`, so it
never lands inside a stage of the first verdict."""
from __future__ import annotations

import time

from dataclasses import replace

from schemas import Verdict
from schemas.items import CheckItem
from schemas.verdict import ClaimSpan
from schemas.protocols import PROTOCOLS, RETRIEVAL_PROTOCOLS, Encoder, NLIModel, Searcher, TurnResult
from schemas.settings import Settings
from schemas.secrets import Scrubber

from . import reloading
from .building import Builder, Chain, Chains, PipelineHooks
from .caches import cache_stats
from .chain import run_stages
from .decision import DecisionMethod
from .display import DisplayPolicy
from .llm.stages import R5_SURFACES
from .overlap import OverlapRunner
from .retrieval.factory import load_searcher
from .state import ClaimState, Stage
from .surfaces.pronouns import cached_parse
from .verdict import assemble, turn_summary
from .windows import MAX_WINDOW_WORDS

# checked once by from_settings so lazy loading happens there (a pronoun: R4 and the gate run too)
WARM_UP = CheckItem("dialcheck-warm-up", "0", ["Do you know where Elvis Presley was born?"],
                    "He was born in Tupelo, Mississippi.",
                    gold_evidence=[("Elvis Presley", "Elvis Presley was born in Tupelo, Mississippi, in 1935.")])

__all__ = ["CheckItem", "ClaimState", "Pipeline", "PipelineHooks", "PROTOCOLS", "TurnResult"]

UNGROUNDED = "no evidence given and no conversation knowledge (grounded-only worker: DIALCHECK_GROUNDED_ONLY)"


def reads_whole(item: CheckItem) -> bool:
    """Can the verifier read the item's reply as one hypothesis? Not a grounded reply longer than a
    window (workers/windows.py MAX_WINDOW_WORDS): the NLI would cut it silently at its token limit,
    so it is checked claim by claim. No DialFact or BEGIN reply is that long (at most 111 words)."""
    return item.gold_evidence is None or len(item.claim.split()) <= MAX_WINDOW_WORDS


def undecided(passages: int) -> str:
    """status.reason of a grounded claim its passages do not decide (attribution: NOT ENOUGH INFO)."""
    return f"not decided by the {passages} given passage{'' if passages == 1 else 's'}"


class Pipeline:
    """A Checker: `check_turns(list[CheckItem]) -> list[TurnResult]`, the call the stream worker,
    `dialcheck check` and `dialcheck eval` all make. `surface` None: the settings' `claims.surface`.

    An e2e Pipeline takes mixed traffic: an item that carries its passages (`gold_evidence`: a
    grounded turn) is checked by a second chain built for protocol fv on the same models (its
    decision and display files, the same stages `check --protocol fv` runs), any other by retrieval;
    with `grounding.only` there is no index, and an item without passages gets NOT ENOUGH INFO."""

    def __init__(self, settings: Settings, nli: NLIModel, encoder: Encoder, searcher: Searcher | None = None,
                 protocol: str = "e2e", surface: str | None = None, surface_builder=None,
                 hooks: PipelineHooks | None = None):
        self._builder = Builder.of(settings, encoder, searcher, protocol, surface or settings.claims.surface,
                                   surface_builder, hooks)
        self._grounded_builder = self._builder.grounded()
        self._chains = Chains(self._builder.chain(settings, nli),
                              self._grounded_builder.chain(settings, nli) if self._grounded_builder else None)
        self._overlap = OverlapRunner(settings.perf.overlap_parts, settings.stages.check_contracts)
        # status reasons quote backends' errors (URLs, passwords): for the publish boundaries (`_verdict`)
        self.scrub = Scrubber.from_settings(settings)
        self.load_ms: dict[str, float] = {}  # from_settings: models, index and warm-up milliseconds

    # what the chain in use reads (a reload replaces them together)
    @property
    def _chain(self) -> Chain:
        return self._chains.main

    @property
    def settings(self) -> Settings:
        return self._chain.settings

    @property
    def nli(self) -> NLIModel:
        return self._chain.nli

    @property
    def decision(self) -> DecisionMethod | None:
        return self._chain.decision

    @property
    def display(self) -> DisplayPolicy | None:
        return self._chain.display

    @property
    def stages(self) -> list[Stage]:
        return list(self._chain.stages)

    # what stays for the Pipeline's life
    @property
    def protocol(self) -> str:
        return self._builder.protocol

    @property
    def surface(self) -> str:
        return self._builder.surface

    @property
    def encoder(self) -> Encoder:
        return self._builder.encoder

    @property
    def searcher(self) -> Searcher | None:
        return self._builder.searcher

    @property
    def surface_builder(self):
        return self._builder.surface_builder

    @property
    def hooks(self) -> PipelineHooks:
        return self._builder.hooks

    # ---- reloading (workers/reloading.py; the worker's SIGHUP) ----------------------------------
    def reload(self) -> str:
        """Re-read the NLI model directory (`models.nli_model_dir`), the decision and the display
        together (for the grounded chain too) and use them from the next batch; ReloadRefused (the
        running set kept) for a missing, broken or mismatched directory. What is now in use, in words."""
        return self._reload_model(None)

    def reload_model(self, model_dir: str) -> str:
        """`reload` from another model directory."""
        return self._reload_model(model_dir)

    def _reload_model(self, model_dir: str | None) -> str:
        builders, chains = self._builders_and_chains()
        self._chains = Chains(*reloading.reload_models(builders, chains, model_dir))
        return reloading.model_in_words(self._builder, self._chain)

    def reload_display(self, display_params: str | None = None) -> str:
        """Re-read the display file alone (`decision.display_params`, overwritten in place by an
        operator, or `display_params` to point at another file), checked against the running NLI
        model; ReloadRefused (the policy in use kept) otherwise. The grounded chain re-reads protocol
        fv's display file (`display_params` names the e2e one). The policy now in use, in words."""
        main = reloading.reload_display(self._builder, self._chains.main, display_params)
        grounded = self._chains.grounded
        if grounded is not None:
            grounded = reloading.reload_display(self._grounded_builder, grounded)
        self._chains = Chains(main, grounded)
        return self.display_in_use()

    def _builders_and_chains(self) -> tuple[list[Builder], list[Chain]]:
        if self._chains.grounded is None:
            return [self._builder], [self._chains.main]
        return [self._builder, self._grounded_builder], [self._chains.main, self._chains.grounded]

    def display_in_use(self) -> str:
        """The display policy in use, in words."""
        return reloading.in_words(self._builder, self._chain)

    # ---- building and loading -------------------------------------------------------------------
    @classmethod
    def from_settings(cls, settings: Settings, protocol: str = "e2e", surface: str | None = None) -> "Pipeline":
        """Models and index loaded, then one warm-up claim checked: `load_ms` has the three times,
        and the first verdict's stage timings hold no loading."""
        from .models.factory import load_models

        t0 = time.perf_counter()
        nli, encoder = load_models(settings)
        t1 = time.perf_counter()
        grounded_only = protocol == "e2e" and settings.grounding.only  # no index built or loaded
        searcher = load_searcher(settings, encoder) if protocol in RETRIEVAL_PROTOCOLS and not grounded_only else None
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
        pipe.check_turns([WARM_UP, *([replace(WARM_UP, gold_evidence=None)] if pipe.searcher is not None else [])])
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
        """Per item, a TurnResult with every verdict to publish: with `claims.segment` a turn of
        several claims gets one verdict per claim (own claim_id) and then the turn summary (the
        turn's claim_id, the worst label — REFUTES > SUPPORTS > NEI — its rationale saying so);
        otherwise the one verdict of the turn — but a grounded reply too long for the verifier to
        read whole (`reads_whole`) is checked claim by claim whatever `claims.segment` says. Each
        verdict's `claim_span` is where its claim stands in the turn's text (the summary's: all of
        it). `states` are the claims' stage fields (IR metrics, tuning); under the IR protocol no
        label is decided. The chains are read once, here."""
        chains = self._chains
        settings = chains.main.settings
        whole = [ClaimSpan(0, len(it.claim)) for it in items]
        if self.protocol == "ir" or not (settings.claims.segment or any(not reads_whole(it) for it in items)):
            return [TurnResult(st.item, [replace(v, claim_span=span)], [st])
                    for (st, v), span in zip(self._check_claims(items, chains), whole)]
        from .segment import (ATTRIBUTION, SEVERITY, Segment, TurnSegments, capped, order_in_words, segment,
                              turn_label)

        flat, owner, spans, segs = [], [], [], []
        for i, it in enumerate(items):
            claims = segment(it.claim, settings.claims.max_claims_per_turn) if settings.claims.segment or \
                not reads_whole(it) else TurnSegments([Segment(0, it.claim, 0, len(it.claim))])  # capped: `note`
            segs.append(claims)
            lead = len(it.claim) - len(it.claim.lstrip())  # segment() reads the stripped text
            for seg in claims:
                flat.append(replace(it, context=list(it.context), claim=seg.text))
                owner.append(i)
                spans.append(whole[i] if len(claims) == 1 else ClaimSpan(lead + seg.start, lead + seg.end))
        checked = self._check_claims(flat, chains) if flat else []
        per_item: list[list[tuple[ClaimState, Verdict]]] = [[] for _ in items]
        for i, (st, v), span in zip(owner, checked, spans):
            per_item[i].append((st, replace(v, claim_span=span)))
        out = []
        for item, claims, done, span in zip(items, segs, per_item, whole):
            sts, verdicts = [st for st, _ in done], [v for _, v in done]
            note = getattr(claims, "note", None)
            if len(verdicts) <= 1 and not note:
                if not verdicts:
                    st, v = self._check_claims([item], chains, run=False)[0]
                    sts, verdicts = [st], [v]
                out.append(TurnResult(item, [replace(verdicts[0], claim_span=span)], sts))
                continue
            severity = ATTRIBUTION if item.gold_evidence is not None else SEVERITY
            summary = turn_summary(item, verdicts, turn_label((v.label for v in verdicts), severity),
                                   order_in_words(severity))
            out.append(TurnResult(item, verdicts + [replace(capped(summary, claims), claim_span=span)], sts, note))
        return out

    def _check_claims(self, items: list[CheckItem], chains: Chains, run: bool = True) -> list[tuple[ClaimState, Verdict]]:
        """Each claim's state and verdict, in order: a claim with its passages by the grounded chain
        (in an e2e Pipeline; an fv Pipeline's own chain is one), the rest by the main chain, or NOT
        ENOUGH INFO in a grounded-only Pipeline. `run` False: nothing checked (a turn with no claim)."""
        grounded = chains.grounded if chains.grounded is not None else (
            chains.main if self.protocol == "fv" else None)
        only = chains.grounded is not None and chains.main.settings.grounding.only
        routes = [grounded if grounded is not None and it.gold_evidence is not None else None if only else chains.main
                  for it in items]
        states: list[ClaimState | None] = [None] * len(items)
        for chain in {id(c): c for c in routes if c is not None}.values():
            at = [i for i, c in enumerate(routes) if c is chain]
            ran = self._run([items[i] for i in at], chain) if run else [ClaimState(items[i]) for i in at]
            for i, st in zip(at, ran):
                states[i] = st
        out = []
        for it, chain, st in zip(items, routes, states):
            if chain is None:
                st = ClaimState(it)
                out.append((st, self._verdict(st, chains.main).with_note(UNGROUNDED, replace_reason=True)))
            else:
                out.append((st, self._verdict(st, chain)))
        out = self._attributed(out, grounded, chains)
        return [(st, v.with_note(st.item.evidence_note) if st.item.evidence_note else v) for st, v in out]

    def _attributed(self, checked: list[tuple[ClaimState, Verdict]], grounded: Chain | None,
                    chains: Chains) -> list[tuple[ClaimState, Verdict]]:
        """Attribution: a grounded claim its passages leave undecided (NOT ENOUGH INFO, checked, no
        outage) says so; with `grounding.fallback` (and an index) it is checked against the index
        instead, its verdict saying why. A claim not checked (a question, another language) keeps
        its own reason."""
        if grounded is None:
            return checked
        undecided_at = [i for i, (st, v) in enumerate(checked)
                        if st.item.gold_evidence is not None and v.label == "NOT ENOUGH INFO"
                        and not st.problems and not st.skip_reason]
        fallback = chains.main.settings.grounding.fallback and self.searcher is not None and chains.grounded is not None
        out = list(checked)
        if fallback and undecided_at:
            again = self._run([replace(checked[i][0].item, gold_evidence=None) for i in undecided_at], chains.main)
            for i, st in zip(undecided_at, again):
                given = len(checked[i][0].item.gold_evidence)
                out[i] = (st, self._verdict(st, chains.main).with_note(
                    f"{undecided(given)}: checked against the index instead (DIALCHECK_GROUNDED_FALLBACK)"))
            return out
        for i in undecided_at:
            st, v = checked[i]
            out[i] = (st, v.with_note(undecided(len(st.item.gold_evidence))))
        return out

    def _run(self, items: list[CheckItem], chain: Chain) -> list[ClaimState]:
        """Every stage of the chain over the batch, timed (workers/chain.py): a per-claim stage claim
        by claim, a batched stage once, its time shared by `batch_items` claims. A claim a stage
        answered (not check-worthy) goes to no later stage. With `perf.overlap_parts` > 1 the batch
        may go through in parts around the NLI reader (workers/overlap.py); each claim gets the same
        stages and the same numbers."""
        states = [ClaimState(it) for it in items]
        shared: dict[int, int] = {}
        at = self._split_at(chain, len(states))
        if at is None:
            run_stages(chain.stages, states, shared, chain.settings.stages.check_contracts)
        else:
            self._overlap.run(chain.stages, at, states, shared)
        for st in states:
            if id(st) in shared:
                st.timings["batch_items"] = shared[id(st)]
        return states

    def _split_at(self, chain: Chain, claims: int) -> int | None:
        """Where the overlap runner splits a batch of `claims` (None: unsplit); never with a hook that
        swaps the NLI reader's inputs (its forward stays on the caller's thread)."""
        hooked = self.hooks.window_fn is not None or self.hooks.verify_forward is not None
        return self._overlap.split_at(chain.stages, claims, chain.nli, hooked)

    # ---- verdict ------------------------------------------------------------------------------
    def _verdict(self, st: ClaimState, chain: Chain) -> Verdict:
        """Not scrubbed here: secrets are scrubbed once, where a verdict leaves the process (the
        stream's publish, `dialcheck check`'s output, a run file), with `self.scrub`."""
        return assemble(st, chain.context)

    def decision_rule(self) -> str:
        return self.decision.rule if self.decision is not None else "none"

    def cache_stats(self) -> dict[str, dict[str, int]]:
        """Hits, misses, entries and capacity per cache (workers/caches.py), for the worker's /metrics."""
        return cache_stats(self.searcher, self.encoder, self.surface_builder, cached_parse())

    def llm_replies(self) -> dict[str, dict[str, int]]:
        """Replies of the LLM steps per step and kind (workers/llm/replies.py), for the worker's /metrics;
        empty while no LLM step ran."""
        from .llm.replies import COUNTS

        return COUNTS.snapshot()

    def model_versions(self) -> dict[str, str]:
        return dict(self._chain.context.model_versions)
