"""The LLM steps as pipeline stages (workers/stages.py's interface: `run(list[ClaimState])`).

`R5Stage` runs after the R4 path (SurfaceStage, and GateStage for r5g) has chosen the surfaces, so
every way R5 can fail leaves exactly what r4 / r4g would have checked. `EditStage` runs after the
first retrieval and only ever adds passages to the pool it re-ranks, so a failed edit leaves the
first retrieval. LLM and gate outages are per claim: the claim's status says degraded and why,
nothing stalls longer than the client's deadline, no claim is dropped."""
from __future__ import annotations

from schemas import Surface
from schemas.protocols import LLM, Encoder, LLMUnavailable, Searcher
from schemas.settings import GateSettings, LLMSettings, RetrievalSettings

from ..gate import BiConGate, GateInput, gate_decision
from ..retrieval.dense import dense_rescore
from ..state import BaseStage, ClaimState, component
from ..text import last_turns
from . import editing, r5
from .replies import COUNTS, UNAVAILABLE

R5_SURFACES = {"r5": "r4", "r5g": "r4g"}  # each R5 surface and the R4 path it falls back to


def _note(s: ClaimState, key: str, value) -> None:
    """A rationale entry of the verdict (ClaimState.notes → verdict.rationale[key])."""
    s.notes[key] = value


@component(reads=("item", "fv_surface", "ir_surface"), writes=("fv_surface", "ir_surface", "notes", "problems"),
           can=("degrade",))
class R5Stage(BaseStage):
    """The one-shot LLM rewrite, checked (one sentence, nothing new named, length bound), then used
    as is (r5) or offered to BiCon-Gate (r5g: accepted at τ_FV / τ_IR it replaces the R4 path's
    surface for verification / retrieval; rejected, the R4 path stands)."""
    name = "r5"

    def __init__(self, llm: LLM | None, gate: BiConGate | None, gate_settings: GateSettings, gated: bool,
                 cache: r5.RewriteCache):
        self.llm, self.gate, self.settings, self.gated, self.cache = llm, gate, gate_settings, gated, cache

    def run(self, states: list[ClaimState]) -> None:
        if self.llm is None:
            return self._fallback(states, "no LLM configured (DIALCHECK_LLM_URL)")
        try:
            model = self.llm.model
        except LLMUnavailable as e:
            return self._fallback(states, str(e))
        checked: dict[int, r5.Checked] = {}
        ask = []
        for i, s in enumerate(states):
            hit = self.cache.get(r5.cache_key(s.item.context, s.item.claim, model))
            if hit is not None:
                checked[i] = hit
            else:
                ask.append(i)
        convs = [r5.prompt(states[i].item.context, states[i].item.claim) for i in ask]
        for i, conv, reply in zip(ask, convs, self.llm.complete_many(convs)):
            s = states[i]
            if isinstance(reply, LLMUnavailable):
                COUNTS.count("r5", UNAVAILABLE)
                self._fallback([s], str(reply))
                continue
            shown = last_turns(s.item.context, r5.CONTEXT_TURNS)
            checked[i] = r5.check_rewrite(reply, [*shown, s.item.claim], s.item.claim, conv)
            COUNTS.count("r5", checked[i].kind)
            self.cache.put(r5.cache_key(s.item.context, s.item.claim, model), checked[i])
        offer = []
        for i, c in checked.items():
            s = states[i]
            note = {"model": model, "text": c.text, "reply": c.kind}
            if c.text is None:
                note.update(outcome="refused", reason=f"R5 rewrite refused by the checks ({c.reason}); R4 path used")
            elif c.text == s.item.claim:
                note.update(outcome="unchanged")
            elif not self.gated:
                s.fv_surface = s.ir_surface = Surface("r5", c.text, candidate="r5", candidate_text=c.text)
                note.update(outcome="used")
            else:
                note.update(outcome="offered")  # to the gate, next
                offer.append(i)
            _note(s, "r5", note)
        if offer:
            self._offer(states, offer, checked)

    def _offer(self, states: list[ClaimState], offer: list[int], checked: dict[int, r5.Checked]) -> None:
        inputs = [GateInput(last_turns(states[i].item.context, self.settings.context_turns), states[i].item.claim,
                            checked[i].text) for i in offer]
        for i, scored in zip(offer, self.gate.score(inputs)):
            s, text = states[i], checked[i].text
            fv, ir = gate_decision(scored, self.settings.tau_fv), gate_decision(scored, self.settings.tau_ir)
            if fv.accepted:
                s.fv_surface = Surface("r5g", text, candidate="r5", candidate_text=text, gate=fv)
            if ir.accepted:
                s.ir_surface = Surface("r5g", text, candidate="r5", candidate_text=text, gate=ir)
            if fv.accepted:
                outcome, reason = "accepted", ""
            elif ir.accepted:
                outcome, reason = "accepted-for-retrieval", "the gate kept the R4 path's surface for verification"
            else:
                outcome, reason = "rejected", "the gate kept the R4 path's surface"
            s.notes["r5"].update(gate_score=fv.score, tau_fv=fv.threshold, tau_ir=ir.threshold, outcome=outcome,
                                 reason=reason)

    def _fallback(self, states: list[ClaimState], why: str) -> None:
        for s in states:
            s.problems.append(("degraded", f"R5 rewrite unavailable, R4 path used: {why}"))
            _note(s, "r5", {"outcome": "llm-unavailable", "text": None})

    def on_outage(self, states: list[ClaimState], error: Exception) -> None:
        """The gate's models failed while scoring R5 (the LLM's own failures are handled per claim)."""
        for s in states:
            if s.notes.get("r5", {}).get("outcome") == "offered":
                s.notes["r5"].update(outcome="gate-unavailable")
                s.problems.append(("degraded", f"gate unavailable for the R5 rewrite, R4 path used: {error}"))


@component(reads=("item", "ir_surface", "retrieval"), writes=("retrieval", "passages", "notes", "problems"),
           can=("degrade",))
class EditStage(BaseStage):
    """SuCEA's evidence-guided editing after the first retrieval: each sub-claim (≤ `edit_subclaims`)
    with its top evidence → an LLM-edited query → BM25 + dense re-scoring again → pooled with the
    first retrieval by best cosine, top `dense_top_k`; the verifier then reads the top passages as
    usual. Every edit is listed in the verdict's rationale (`edits`)."""
    name = "edit"

    def __init__(self, llm: LLM | None, searcher: Searcher | None, encoder: Encoder, retrieval: RetrievalSettings,
                 settings: LLMSettings):
        self.llm, self.searcher, self.encoder = llm, searcher, encoder
        self.retrieval, self.settings = retrieval, settings

    def run(self, states: list[ClaimState]) -> None:
        live = [s for s in states if s.retrieval is not None and s.retrieval.dense]
        if not live or self.searcher is None:
            return
        if self.llm is None:
            return self._fallback(live, "no LLM configured (DIALCHECK_LLM_URL)")
        jobs = []  # (state, sub-claim, top evidence)
        for s in live:
            for sub in editing.sub_claims(s.ir_surface.text, self.settings.edit_subclaims):
                ev = editing.top_evidence(sub, s.retrieval.dense)
                if ev is not None:
                    jobs.append((s, sub, ev))
        convs = [editing.prompt(sub, ev.window) for _, sub, ev in jobs]
        replies = self.llm.complete_many(convs)
        queries: dict[int, list[str]] = {}
        failed: dict[int, str] = {}
        for (s, sub, ev), conv, reply in zip(jobs, convs, replies):
            edit = {"sub_claim": sub, "evidence_passage_id": ev.passage.id, "evidence_title": ev.passage.title,
                    "query": None}
            if isinstance(reply, LLMUnavailable):
                COUNTS.count("edit", UNAVAILABLE)
                edit.update(outcome="llm-unavailable")
                failed[id(s)] = str(reply)
            else:
                c = r5.check_rewrite(reply, [*s.item.context, s.item.claim, sub, ev.passage.title, ev.window], sub,
                                     conv)
                COUNTS.count("edit", c.kind)
                edit["reply"] = c.kind
                if c.text is None:
                    edit.update(outcome="refused", reason=c.reason)
                else:
                    edit.update(outcome="used", query=c.text)
                    queries.setdefault(id(s), []).append(c.text)
            s.notes.setdefault("edits", []).append(edit)
        for s in live:
            if id(s) in failed:
                s.problems.append(("degraded", f"evidence-guided editing unavailable for a sub-claim, its first "
                                               f"retrieval kept: {failed[id(s)]}"))
        self._retrieve_again([s for s in live if id(s) in queries], queries)

    def _retrieve_again(self, states: list[ClaimState], queries: dict[int, list[str]]) -> None:
        cfg = self.retrieval
        flat = [(s, q) for s in states for q in queries[id(s)]]
        if not flat:
            return
        hits = self.searcher.search_many([q for _, q in flat], cfg.bm25_top_k)  # SearchUnavailable → on_outage
        again: dict[int, list] = {}
        for (s, q), bm25 in zip(flat, hits):
            dense, _ = dense_rescore(self.encoder, self.searcher, q, bm25, cfg.dense_top_k)
            again.setdefault(id(s), []).append(dense)
        for s in states:
            merged = editing.merge(s.retrieval.dense, again.get(id(s), []), cfg.dense_top_k)
            first = {p.id for p in s.retrieval.dense}
            s.notes["edit_retrieval"] = {"new_passages": sum(p.id not in first for p in merged),
                                         "pooled_from": 1 + len(again.get(id(s), []))}
            s.retrieval.dense = merged
            s.passages = merged[: cfg.verify_top_passages]

    def _fallback(self, states: list[ClaimState], why: str) -> None:
        for s in states:
            s.problems.append(("degraded", f"evidence-guided editing unavailable, first retrieval kept: {why}"))

    def on_outage(self, states: list[ClaimState], error: Exception) -> None:
        """Search or encoder failed on the second retrieval: the first retrieval stands."""
        for s in states:
            if s.retrieval is not None and s.retrieval.dense:
                s.problems.append(("degraded", f"second retrieval after editing unavailable, first retrieval "
                                               f"kept: {error}"))


_R5_CACHES: dict[int, r5.RewriteCache] = {}


def r5_cache(settings) -> r5.RewriteCache:
    """One process-wide R5 cache per size (`perf.cache_entries`; 0: none), shared by the pipelines
    eval builds per surface and by every batch of the stream worker."""
    n = settings.perf.cache_entries
    if n not in _R5_CACHES:
        _R5_CACHES[n] = r5.RewriteCache(n)
    return _R5_CACHES[n]
