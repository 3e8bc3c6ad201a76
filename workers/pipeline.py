"""The checking pipeline as plain Python: surfaces → gate → retrieve → verify → Verdict.

`Pipeline.check_many` takes a batch (the stream agent's `stream.take` batch, or a whole eval file)
and batches model calls across it. Outages never drop a claim: they become status
degraded/error with the reason."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from schemas.settings import Settings, load_settings
from schemas import LABELS, Evidence, GateDecision, Status, Surface, Verdict, claim_id

from .gate import BiConGate, GateInput
from schemas.protocols import Encoder, NLIModel
from .nli.labels import CONTRADICTION, ENTAILMENT, NEUTRAL
from schemas.items import CheckItem
from schemas.protocols import Passage, Searcher

from .text import last_turns, with_context
from .retrieval.dense import context_union, dense_rescore
from .surfaces import ClaimSurfaces, build_surfaces
from .verify import WindowDecision, aggregate, decide_window
from .windows import top_windows

PROTOCOLS = ("fv", "e2e", "ir")
SURFACES = ("r0", "r1", "r2", "r3", "r4", "r4g")
# R4 alternatives (salience order) the gate chooses among. Measured on DialFact with the antecedent
# proxy (workers/surfaces/measure_r4.py): salience top-1 53.0%, gate's pick of the top 3 49.6%,
# recency 49.6%, so the gate only accepts or rejects the most salient candidate.
GATE_CANDIDATES = 1

__all__ = ["CheckItem", "Pipeline", "PROTOCOLS", "SURFACES"]


@dataclass
class _Work:
    """Per-item state while a batch moves through the stages."""
    item: CheckItem
    surfaces: ClaimSurfaces | None = None
    fv_surface: Surface | None = None
    ir_surface: Surface | None = None
    passages: list[Passage] = field(default_factory=list)
    retrieval: dict = field(default_factory=dict)  # stage name → ranked passages (ir protocol)
    windows: list = field(default_factory=list)
    decisions: list[WindowDecision] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (state, reason)
    timings: dict = field(default_factory=dict)


class Pipeline:
    def __init__(self, settings: Settings, nli: NLIModel, encoder: Encoder, searcher: Searcher | None = None,
                 protocol: str = "e2e", surface: str = "r4g"):
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol {protocol!r} not in {PROTOCOLS}")
        if surface not in SURFACES:
            raise ValueError(f"surface {surface!r} not in {SURFACES}")
        self.settings, self.nli, self.encoder, self.searcher = settings, nli, encoder, searcher
        self.protocol, self.surface = protocol, surface
        self.gate = BiConGate(nli, encoder, settings.gate.weights)

    @classmethod
    def from_settings(cls, settings: Settings, protocol: str = "e2e", surface: str = "r4g") -> "Pipeline":
        from .models.factory import load_models

        nli, encoder = load_models(settings)
        searcher = None
        if protocol in ("e2e", "ir"):
            searcher = load_searcher(settings, encoder)
        return cls(settings, nli, encoder, searcher, protocol, surface)

    def with_options(self, protocol: str | None = None, surface: str | None = None) -> "Pipeline":
        """Same models and index, another protocol/surface (the evaluator loops over surfaces)."""
        return Pipeline(self.settings, self.nli, self.encoder, self.searcher, protocol or self.protocol,
                        surface or self.surface)

    # ---- public API ---------------------------------------------------------------------------
    def check_many(self, items: list[CheckItem]) -> list[Verdict]:
        work = [_Work(it) for it in items]
        self._choose_surfaces(work)
        if self.protocol in ("e2e", "ir"):
            self._retrieve(work)
        if self.protocol == "fv":
            for w in work:
                w.passages = [Passage(f"gold:{i}", t, x, doc_id=t) for i, (t, x) in enumerate(w.item.gold_evidence or [])]
        if self.protocol in ("fv", "e2e"):
            self._verify(work)
        return [self._verdict(w) for w in work]

    def check(self, context: list[str], claim: str, conversation_id: str = "cli", turn_id: str = "1") -> Verdict:
        return self.check_many([CheckItem(conversation_id, turn_id, context, claim)])[0]

    def retrieve_many(self, items: list[CheckItem]) -> list[dict]:
        """IR protocol: ranked passages per stage (bm25, dense, top1) for each item."""
        work = [_Work(it) for it in items]
        self._choose_surfaces(work)
        self._retrieve(work)
        return [{**w.retrieval, "surface": w.ir_surface, "problems": w.problems} for w in work]

    # ---- stages -------------------------------------------------------------------------------
    def _choose_surfaces(self, work: list[_Work]) -> None:
        t = time.perf_counter()
        for w in work:
            w.surfaces = build_surfaces(w.item.context, w.item.claim)
        per = (time.perf_counter() - t) * 1000 / max(len(work), 1)
        for w in work:
            w.timings["surfaces"] = round(per, 2)
        if self.surface != "r4g":
            for w in work:
                text = w.surfaces.get(self.surface)
                w.fv_surface = w.ir_surface = Surface(self.surface if text != w.item.claim else "r0", text)
            return
        t = time.perf_counter()
        gate_ctx = self.settings.gate.context_turns
        inputs, owners = [], []
        for i, w in enumerate(work):
            alts = [a for a in dict.fromkeys(w.surfaces.r4_alternatives[:GATE_CANDIDATES] or [w.surfaces.r4])
                    if a != w.item.claim]
            for a in alts:
                inputs.append(GateInput(last_turns(w.item.context, gate_ctx), w.item.claim, a))
                owners.append(i)
        try:
            scored = self.gate.score(inputs)
        except Exception as e:  # model outage: fall back to the original claim, say so
            for w in work:
                w.problems.append(("degraded", f"gate unavailable, original claim used: {e}"))
                w.fv_surface = w.ir_surface = Surface("r0", w.item.claim)
            return
        best: dict[int, tuple[tuple[float, float, float, float], str]] = {}
        for (s, e, c, sim), i, inp in zip(scored, owners, inputs):
            if i not in best or s > best[i][0][0]:
                best[i] = ((s, e, c, sim), inp.rewrite)
        per = (time.perf_counter() - t) * 1000 / max(len(work), 1)
        for i, w in enumerate(work):
            w.timings["gate"] = round(per, 2)
            if i not in best:
                w.fv_surface = w.ir_surface = Surface("r0", w.item.claim)
                continue
            (s, e, c, sim), text = best[i]

            def decision(tau: float) -> Surface:
                g = GateDecision(round(s, 6), round(e, 6), round(c, 6), round(sim, 6), tau, s >= tau)
                return Surface("r4g" if g.accepted else "r0", text if g.accepted else w.item.claim,
                               candidate="r4", candidate_text=text, gate=g)

            w.fv_surface = decision(self.settings.gate.tau_fv)
            w.ir_surface = decision(self.settings.gate.tau_ir)

    def _query(self, w: _Work) -> str:
        return with_context(w.item.context, w.ir_surface.text, self.settings.retrieval.query_context_turns)

    def _retrieve(self, work: list[_Work]) -> None:
        s = self.settings
        if self.searcher is None:
            for w in work:
                w.problems.append(("degraded", "no search backend configured"))
            return
        for w in work:
            query = self._query(w)
            t = time.perf_counter()
            try:
                bm25 = context_union(self.searcher, query, w.item.context, s.retrieval.bm25_top_k)
                t_bm25 = time.perf_counter()
                w.timings["bm25"] = round((t_bm25 - t) * 1000, 2)
            except Exception as e:
                w.problems.append(("degraded", f"search unavailable: {e}"))
                continue
            try:
                dense, mode = dense_rescore(self.encoder, self.searcher, query, bm25, s.retrieval.dense_top_k)
                w.timings["dense"] = round((time.perf_counter() - t_bm25) * 1000, 2)
                if mode == "client-side-encoding":
                    w.timings["dense_client_side"] = 1.0
            except Exception as e:
                w.problems.append(("degraded", f"dense re-scoring unavailable, BM25 order used: {e}"))
                dense = bm25[: s.retrieval.dense_top_k]
            w.retrieval = {"bm25": bm25, "dense": dense}
            w.passages = dense[: s.retrieval.verify_top_passages]

    def _verify(self, work: list[_Work]) -> None:
        s = self.settings
        premises, hyps = [], []
        t = time.perf_counter()
        for w in work:
            hyp = with_context(w.item.context, w.fv_surface.text, s.verify.hypothesis_context_turns)
            w.windows = top_windows([p.text for p in w.passages], w.fv_surface.text, s.verify.max_windows)
            for win in w.windows:
                premises.append(win.text)
                hyps.append(hyp)
        try:
            probs = self.nli.predict(premises, hyps) if premises else np.zeros((0, 3))
        except Exception as e:
            for w in work:
                if w.windows:
                    w.problems.append(("error", f"NLI model unavailable: {e}"))
            return
        per = (time.perf_counter() - t) * 1000 / max(len(work), 1)
        k = 0
        for w in work:
            w.timings["verify"] = round(per, 2)
            for win in w.windows:
                p = probs[k]
                k += 1
                w.decisions.append(WindowDecision(win, p, decide_window(p, s.verify.entail_threshold, s.verify.win_gap, s.verify.decision_rule)))

    def _verdict(self, w: _Work) -> Verdict:
        label, best = aggregate(w.decisions)
        if best is not None:
            p = best.probs
            probs = {"SUPPORTS": float(p[ENTAILMENT]), "REFUTES": float(p[CONTRADICTION]),
                     "NOT ENOUGH INFO": float(p[NEUTRAL])}
        else:
            probs = {"SUPPORTS": 0.0, "REFUTES": 0.0, "NOT ENOUGH INFO": 1.0}
        evidence = []
        ranked = sorted(w.decisions, key=lambda d: -max(d.probs[ENTAILMENT], d.probs[CONTRADICTION]))
        shown = ([best] if best else []) + [d for d in ranked if d is not best][:2]
        for d in shown:
            p = w.passages[d.window.passage_index]
            evidence.append(Evidence(p.id, p.title, p.text, d.window.text, float(p.score) if p.score else None,
                                     round(d.window.prescore, 4), float(d.probs[ENTAILMENT]),
                                     float(d.probs[NEUTRAL]), float(d.probs[CONTRADICTION])))
        if w.problems:
            state = "error" if any(s == "error" for s, _ in w.problems) else "degraded"
            status = Status(state, "; ".join(r for _, r in w.problems))
        elif self.protocol == "e2e" and not w.passages:
            status = Status("ok", "no passage retrieved")
        else:
            status = Status("ok")
        assert label in LABELS
        return Verdict(
            conversation_id=w.item.conversation_id, turn_id=w.item.turn_id,
            claim_id=claim_id(w.item.conversation_id, w.item.turn_id, w.item.claim), claim=w.item.claim,
            surface=w.fv_surface or Surface("r0", w.item.claim), label=label, probabilities=probs,
            evidence=evidence, model_versions=self.model_versions(), timings_ms=w.timings, status=status)

    def model_versions(self) -> dict[str, str]:
        v = {"nli": getattr(self.nli, "version", "?"), "encoder": getattr(self.encoder, "version", "?"),
             "protocol": self.protocol, "surface_mode": self.surface}
        if self.searcher is not None:
            v["search"] = getattr(self.searcher, "name", "?")
        return v


def load_searcher(settings: Settings, encoder: Encoder | None = None) -> Searcher:
    if settings.retrieval.backend == "opensearch":
        from .retrieval.opensearch import OpenSearchSearcher

        return OpenSearchSearcher(settings.retrieval.opensearch_url, settings.retrieval.opensearch_index)
    from .retrieval.build import ensure_index

    return ensure_index(settings, encoder)
