"""The checking stages: small typed components with one batch interface, `run(list[ClaimState])`.

Each stage declares (`@component`, workers/state.py) which `ClaimState` fields it reads and writes
and whether it is batched (one model or search call for the whole batch) or works claim by claim;
`check_chain` refuses a protocol whose stage reads a field no earlier stage writes, when the
Pipeline is built (workers/pipeline.py), and with `stages.check_contracts` a stage touching an
undeclared field fails. A stage may declare how it degrades when
a backend is out ("degrade", `on_outage`); only `ModelUnavailable` and `SearchUnavailable` reach it — any
other exception is a bug and propagates (in the stream, to the error-verdict path). The model
stages (gate, verify) run as preprocess → forward → postprocess, as transformers pipelines do, and
`forward` is the one hook a caller may replace.

What else the Pipeline may ask of a stage is declared too (`@component(can=...)`, workers/state.py
CAPABILITIES): "beside_nli" (never calls the NLI model, so the overlap runner may run it while the NLI
reads another part), "begin" (the NLI reader's split run), "display" (reads the display policy) and
"degrade" (its own `on_outage`); what a stage does not declare comes from `BaseStage`, and the
declarations are checked with the fields when the chain is built. Which stages a protocol and surface
get is one table, workers/building.py `STAGE_TABLE`."""
from __future__ import annotations

from typing import Callable

import numpy as np

from schemas import Surface
from schemas.items import CheckItem, GivenPassage
from schemas.protocols import Encoder, ModelUnavailable, NLIModel, Passage, Searcher
from schemas.settings import GateSettings, RetrievalSettings, WindowSettings

from .decision import ClaimEvidence, DecisionMethod, WindowDecision
from .decision.aliases import aliases
from .gate import BiConGate, GateInput, gate_decision
from .retrieval.dense import dense_rescore, merge_context_hits
from .state import GIVEN, BaseStage, ClaimState, Retrieval, Stage, StageChainError, check_chain, component
from .surfaces import ClaimSurfaces, build_surfaces, parse_batch_ahead
from .text import last_turns, with_context
from .windows import Window, quiet, read_in_rounds, top_windows

__all__ = ["GIVEN", "CheckWorthyStage", "LanguageStage", "ClaimState", "GateStage", "Phases", "GoldEvidenceStage", "Retrieval", "RetrieveStage", "Stage",
           "StageChainError", "SurfaceStage", "VerifyStage", "check_chain", "claim_evidence", "component", "premise",
           "surfaces_of", "topic_of"]

# R4 alternatives (salience order) the gate chooses among. Measured on DialFact with the antecedent
# proxy (lab/probes/measure_r4.py): salience top-1 53.0%, gate's pick of the top 3 49.6%,
# recency 49.6%, so the gate only accepts or rejects the most salient candidate.
GATE_CANDIDATES = 1


class Phases(BaseStage):
    """preprocess → forward → postprocess; `forward` is the model call a caller may replace (tuning:
    cached probabilities)."""
    name: str

    def run(self, states: list[ClaimState]) -> None:
        inputs = self.preprocess(states)
        self.postprocess(states, inputs, self.forward(inputs))


@component(reads=("item",), writes=("skip_reason", "notes"), can=("beside_nli",))
class LanguageStage(BaseStage):
    """Language scope (workers/decision/scope.py): a reply the verifier cannot read (confidently not
    English) is answered here, NOT ENOUGH INFO with a status reason naming its language, never a
    badge; the runner passes it to no later stage, so no evidence is read for it."""
    name = "language"

    def run(self, states: list[ClaimState]) -> None:
        from .decision.scope import foreign

        for s in states:
            lang = foreign(s.item.claim)
            if lang is not None:
                s.skip_reason = lang.reason()
                s.notes["language"] = lang.code  # rationale {"rule": "out-of-scope", "language": "de", ...}


@component(reads=("item",), writes=("skip_reason", "notes"), can=("beside_nli",))
class CheckWorthyStage(BaseStage):
    """Claim detection: a turn that states no checkable fact is answered here ("not check-worthy":
    NOT ENOUGH INFO, nothing decided); the runner passes it to no later stage. `skip`: the turn kinds left
    unchecked (`claims.skip_turns`: questions, greetings, thanks by default), None for every kind
    of turn that states no fact (`claims.checkworthy`). `batch_parse` (settings `perf.batch_parsing`,
    with the parse cache on): the batch's turns are parsed in one `nlp.pipe` pass first (the same
    parses, 2.4x faster than one `nlp()` call each) and the surfaces reuse them."""
    name = "checkworthy"

    def __init__(self, skip: frozenset | None = None, batch_parse: bool = False):
        self.skip, self.batch_parse = skip, batch_parse

    def run(self, states: list[ClaimState]) -> None:
        from .checkworthy import check_worthiness
        from .surfaces.pronouns import parse, parse_ahead, parse_cache_on

        batched = self.batch_parse and parse_cache_on()
        if batched:
            parse_ahead(s.item.claim for s in states if s.item.claim.strip())
        for s in states:
            w = check_worthiness(s.item.claim, parse if batched else None)
            if w.skipped_by(self.skip):
                s.skip_reason = w.reason
                s.notes["kind"] = w.kind  # rationale {"rule": "not-check-worthy", "kind": "question", ...}


@component(reads=("item",), writes=("surfaces", "fv_surface", "ir_surface"), can=("beside_nli",))
class SurfaceStage(BaseStage):
    """R0–R4 for every claim; the fixed surfaces (r0…r4) are chosen here, r4g by `GateStage`."""
    name = "surfaces"

    def __init__(self, surface: str, build=None):
        self.surface = surface
        self.build = build or surfaces_of  # a memoized builder is shared across surface modes in eval

    def run(self, states: list[ClaimState]) -> None:
        parse_batch_ahead([(s.item.context, s.item.claim) for s in states])
        for s in states:
            s.surfaces = self.build(tuple(s.item.context), s.item.claim)
            if self.surface == "r4g":
                s.use_original()  # until the gate accepts a rewrite
            else:
                text = s.surfaces.get(self.surface)
                s.fv_surface = s.ir_surface = Surface(self.surface if text != s.item.claim else "r0", text)


def surfaces_of(context: tuple[str, ...], claim: str) -> ClaimSurfaces:
    return build_surfaces(list(context), claim)


@component(reads=("item", "surfaces"), writes=("fv_surface", "ir_surface", "problems"), can=("degrade",))
class GateStage(Phases):
    """BiCon-Gate over the R4 candidate: one batched NLI + encoder call for the whole batch."""
    name = "gate"

    def __init__(self, gate: BiConGate, settings: GateSettings):
        self.gate, self.settings = gate, settings

    def preprocess(self, states: list[ClaimState]) -> tuple[list[GateInput], list[int]]:
        """Each claim's R4 candidate(s) that differ from the claim, with their owner."""
        inputs, owners = [], []
        for i, s in enumerate(states):
            alts = [a for a in dict.fromkeys(s.surfaces.r4_alternatives[:GATE_CANDIDATES] or [s.surfaces.r4])
                    if a != s.item.claim]
            for a in alts:
                inputs.append(GateInput(last_turns(s.item.context, self.settings.context_turns), s.item.claim, a))
                owners.append(i)
        return inputs, owners

    def forward(self, prepared: tuple[list[GateInput], list[int]]) -> list:
        """The gate's scores: one batched NLI + encoder call."""
        return self.gate.score(prepared[0])

    def postprocess(self, states: list[ClaimState], prepared, scores: list) -> None:
        inputs, owners = prepared
        best: dict[int, tuple[tuple[float, float, float, float], str]] = {}
        for scored, i, inp in zip(scores, owners, inputs):
            if i not in best or scored[0] > best[i][0][0]:
                best[i] = (scored, inp.rewrite)
        for i, s in enumerate(states):
            if i in best:
                scored, text = best[i]
                s.fv_surface = self._decision(s, text, scored, self.settings.tau_fv)
                s.ir_surface = self._decision(s, text, scored, self.settings.tau_ir)

    @staticmethod
    def _decision(s: ClaimState, text: str, scored, tau: float) -> Surface:
        g = gate_decision(scored, tau)
        return Surface("r4g" if g.accepted else "r0", text if g.accepted else s.item.claim,
                       candidate="r4", candidate_text=text, gate=g)

    def on_outage(self, states: list[ClaimState], error: Exception) -> None:
        for s in states:
            s.problems.append(("degraded", f"gate unavailable, original claim used: {error}"))
            s.use_original()


@component(reads=("item", "ir_surface"), writes=("retrieval", "passages", "problems", "timings"),
           can=("beside_nli", "degrade"))
class RetrieveStage(BaseStage):
    """BM25 for the query (last turns + surface) ∪ top-1 per context turn (one `search_many` for
    the batch), then dense re-scoring; the verifier reads the top `verify_top_passages`."""
    name = "retrieve"

    def __init__(self, searcher: Searcher | None, encoder: Encoder, settings: RetrievalSettings,
                 batch_query_encoding: bool = True):
        self.searcher, self.encoder, self.settings = searcher, encoder, settings
        self.batch_query_encoding = batch_query_encoding

    def run(self, states: list[ClaimState]) -> None:
        cfg = self.settings
        if self.searcher is None:
            for s in states:
                s.problems.append(("degraded", "no search backend configured"))
            return
        queries = [with_context(s.item.context, s.ir_surface.text, cfg.query_context_turns) for s in states]
        flat = [text for s, q in zip(states, queries) for text in (q, *s.item.context)]
        hits = iter(self.searcher.search_many(flat, cfg.bm25_top_k))
        vectors = self._query_vectors(queries)
        for s, query, qv in zip(states, queries, vectors):
            bm25 = merge_context_hits([next(hits) for _ in range(1 + len(s.item.context))])
            try:
                dense, mode = dense_rescore(self.encoder, self.searcher, query, bm25, cfg.dense_top_k, qv)
            except ModelUnavailable as e:
                s.problems.append(("degraded", f"dense re-scoring unavailable, BM25 order used: {e}"))
                dense, mode = bm25[: cfg.dense_top_k], "bm25"
            if mode == "client-side-encoding":
                s.timings["dense_client_side"] = 1.0
            s.retrieval = Retrieval(bm25, dense)
            s.passages = dense[: cfg.verify_top_passages]

    def _query_vectors(self, queries: list[str]) -> list:
        """All queries of the batch in one encoder call (5x faster than one call each for E5 on
        this CPU, identical vectors); None per query where it failed or is switched off."""
        if not self.batch_query_encoding or not queries:
            return [None] * len(queries)
        try:
            return list(self.encoder.encode(queries, is_query=True))
        except ModelUnavailable:  # dense_rescore retries per query and degrades to BM25 order
            return [None] * len(queries)

    def on_outage(self, states: list[ClaimState], error: Exception) -> None:
        for s in states:
            s.problems.append(("degraded", f"search unavailable: {error}"))


@component(reads=("item",), writes=("passages",), batched=False, can=("beside_nli",))
class GoldEvidenceStage(BaseStage):
    """FV protocol: the record's gold evidence, or a grounded turn's given passages, are the verifier's passages."""
    name = "evidence"

    def run(self, states: list[ClaimState]) -> None:
        for s in states:
            s.passages = [given_passage(i, g) for i, g in enumerate(s.item.gold_evidence or [])]


def given_passage(i: int, given: tuple[str, str] | GivenPassage) -> Passage:
    """A given passage as the verifier reads it: a DialFact (title, text) pair, or a GivenPassage
    whose id (else `gold:<i>`), title ("" when none) and url go on to the verdict's evidence."""
    if isinstance(given, GivenPassage):
        return Passage(given.id or f"gold:{i}", given.title or "", given.text, doc_id=given.id or given.title or "",
                       url=given.url)
    title, text = given
    return Passage(f"gold:{i}", title, text, doc_id=title)


@component(reads=("item", "fv_surface", "passages", "surfaces"),
           writes=("windows", "decisions", "evidence", "decision", "problems"), can=("begin", "degrade"))
class VerifyStage(Phases):
    """Windows → lexical pre-score top-k → batched NLI calls → the claim's `Decision` from the
    configured decision method (workers/decision/). With a window budget (`windows.window_first` > 0)
    the windows are read best pre-score first in rounds, one NLI call per round for the whole batch,
    and a claim whose windows read so far are all quiet (neither entailment nor contradiction near
    any threshold: `windows.quiet`) reads no more; the top `max_windows` stays the upper bound. The
    windows read are the claim's `decisions`; `windows` keeps every candidate."""
    name = "verify"

    def __init__(self, nli: NLIModel, settings: WindowSettings, decision: DecisionMethod, window_fn=top_windows,
                 batch_parse: bool = False):
        self.nli, self.settings, self.decision = nli, settings, decision
        self.batch_parse = batch_parse  # the claims' topics parsed in one spaCy pass before deciding
        self.window_fn = window_fn  # (passages, fact, keep) → windows; tuning compares variants here

    def preprocess(self, states: list[ClaimState]) -> tuple[list[str], list[str]]:
        """Each claim's windows (pre-score top-k) and the (premise, hypothesis) pairs the NLI reads."""
        cfg = self.settings
        premises, hyps = [], []
        for s in states:
            hyp = with_context(s.item.context, s.fv_surface.text, cfg.hypothesis_context_turns)
            s.windows = self.window_fn([p.text for p in s.passages], s.fv_surface.text, cfg.max_windows)
            titles = [p.title for p in s.passages] if cfg.title_in_premise else []
            premises += [premise(w, titles) for w in s.windows]
            hyps += [hyp] * len(s.windows)
        return premises, hyps

    def forward(self, pairs: tuple[list[str], list[str]]) -> np.ndarray:
        """One batched NLI call: (n, 3) calibrated probabilities in NLI_LABELS order."""
        premises, hyps = pairs
        return self.nli.predict(premises, hyps) if premises else np.zeros((0, 3))

    def run(self, states: list[ClaimState]) -> None:
        self.begin(states)()

    def begin(self, states: list[ClaimState], submit: Callable | None = None) -> Callable[[], None]:
        """Preprocess now and start the NLI reads: here, or on `submit` (an executor's: the Pipeline
        runs the next part's earlier stages meanwhile, settings `perf.overlap_parts`). Returns the
        `finish` that waits for the reads and postprocesses; `run` is `begin(states)()`. Only the
        NLI model is used off the caller's thread: no cache, parse or decision."""
        pairs = self.preprocess(states)

        def read() -> list[np.ndarray]:
            return self.read(states, pairs)

        if submit is None:
            probs = read()
            result = lambda: probs  # noqa: E731
        else:
            result = submit(read).result

        def finish() -> None:
            self.postprocess(states, pairs, result())
        return finish

    def read(self, states: list[ClaimState], pairs: tuple[list[str], list[str]]) -> list[np.ndarray]:
        """Per claim, the probabilities of the windows read (`forward` once per round)."""
        premises, hyps = pairs
        counts = [len(s.windows) for s in states]
        starts = np.cumsum([0, *counts])

        def score(want: list[tuple[int, int]]) -> np.ndarray:
            rows = [int(starts[i]) + j for i, j in want]
            return self.forward(([premises[r] for r in rows], [hyps[r] for r in rows]))

        return read_in_rounds(counts, score, lambda i, probs: quiet(probs), self.settings.window_first,
                              self.settings.window_chunk)

    def postprocess(self, states: list[ClaimState], pairs, probs: list[np.ndarray]) -> None:
        for s, p in zip(states, probs):
            s.decisions = [WindowDecision(w, q) for w, q in zip(s.windows, p)]
            s.evidence = claim_evidence(s)
        if self.batch_parse:  # what evidence sufficiency parses (decision/sufficiency.py subject_terms)
            from .surfaces.pronouns import parse_ahead

            parse_ahead(s.evidence.topic or s.evidence.claim for s in states)
        for s, d in zip(states, self.decision.decide_many([s.evidence for s in states])):
            s.decision = d

    def on_outage(self, states: list[ClaimState], error: Exception) -> None:
        for s in states:
            s.decisions = []
            if s.windows:
                s.problems.append(("error", f"NLI model unavailable: {error}"))


def premise(w: Window, titles: list) -> str:
    """The NLI premise of a window: its text, prefixed with its passage title when one is given and
    the window does not already start with it (`windows.title_in_premise`)."""
    title = (titles[w.passage_index] if 0 <= w.passage_index < len(titles) else "") or ""
    title = title.strip()
    return f"{title}. {w.text}" if title and not w.text.startswith(title) else w.text


def claim_evidence(s: ClaimState) -> ClaimEvidence:
    """What the decision reads of a verified claim (the verify stage and the tuner both call this);
    nothing read for one answered before its surfaces (out of the language scope, not check-worthy)."""
    if s.fv_surface is None:
        return ClaimEvidence.of(s.item.claim, [], [], None, [], "", bool(s.item.context))
    gate = s.fv_surface.gate.accepted if s.fv_surface.gate is not None else None
    return ClaimEvidence.of(s.fv_surface.text, s.decisions, [p.score for p in s.passages], gate,
                            [p.title for p in s.passages], topic_of(s), bool(s.item.context),
                            [" / ".join(aliases(p.text)) for p in s.passages])


def topic_of(s: ClaimState) -> str:
    """What the claim is about, for evidence sufficiency: the R4 surface (pronouns resolved from the
    context, whether or not the gate let the verifier read it), else the surface read."""
    return s.surfaces.r4 if s.surfaces is not None else s.fv_surface.text
