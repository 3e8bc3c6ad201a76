"""The checking pipeline as plain Python: each protocol is a list of stages, one runner.

`Pipeline.check_many` takes a batch (the stream agent's batch, or a slice of an eval file), runs
the protocol's stages over it (each stage batches its model calls across the batch), times each
stage, and turns only the declared outages (ModelUnavailable, SearchUnavailable) into
degraded/error verdicts via the stage's `on_outage`. Any other exception is a bug: it propagates,
and the stream worker turns it into error verdicts for that batch."""
from __future__ import annotations

import time
from pathlib import Path

from schemas import LABELS, Evidence, Status, Surface, Verdict, claim_id
from schemas.items import CheckItem
from schemas.secrets import Scrubber
from schemas.protocols import Encoder, ModelUnavailable, NLIModel, Searcher, SearchUnavailable
from schemas.settings import Settings

from .caches import CachedEncoder, memoize
from .gate import BiConGate
from .nli.labels import CONTRADICTION, ENTAILMENT, NEUTRAL
from .stages import (CheckWorthyStage, ClaimState, GateStage, GoldEvidenceStage, RetrieveStage, Stage, SurfaceStage,
                     VerifyStage, surfaces_of)
from .surfaces.pronouns import set_parse_cache
from .verify import NO_EVIDENCE, ClaimDecider

PROTOCOLS = ("fv", "e2e", "ir")
SURFACES = ("r0", "r1", "r2", "r3", "r4", "r4g")
OUTAGES = (ModelUnavailable, SearchUnavailable)
# e2e: below this lexical pre-score the deciding window hardly mentions the claim's words; the
# verdict stays ok (a decision was made) but says so in its status reason
WEAK_EVIDENCE_PRESCORE = 0.15

__all__ = ["CheckItem", "ClaimState", "Pipeline", "PROTOCOLS", "SURFACES", "load_searcher"]


class Pipeline:
    """A Checker: `check_many(list[CheckItem]) -> list[Verdict]`, the call the stream worker,
    `dialcheck check` and `dialcheck eval` all make."""

    def __init__(self, settings: Settings, nli: NLIModel, encoder: Encoder, searcher: Searcher | None = None,
                 protocol: str = "e2e", surface: str = "r4g", surface_builder=None):
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
        v = settings.verify  # the verifier's label decision (fv and e2e; ir decides no label)
        self.decider = ClaimDecider(v.decision, v.decision_params, protocol, v.entail_threshold, v.win_gap) \
            if protocol in ("fv", "e2e") else None
        self.stages: list[Stage] = self._stages()
        self.scrub = Scrubber.from_settings(settings)  # status reasons quote backends' errors (URLs, passwords)

    def _stages(self) -> list[Stage]:
        s = self.settings
        stages: list[Stage] = []
        if s.verify.checkworthy and self.protocol != "ir":
            stages.append(CheckWorthyStage())
        stages.append(SurfaceStage(self.surface, self.surface_builder))
        if self.surface == "r4g":
            stages.append(GateStage(self.gate, s.gate))
        if self.protocol in ("e2e", "ir"):
            stages.append(RetrieveStage(self.searcher, self.encoder, s.retrieval, s.perf.batch_query_encoding))
        if self.protocol == "fv":
            stages.append(GoldEvidenceStage())
        if self.decider is not None:
            stages.append(VerifyStage(self.nli, s.verify, self.decider))
        return stages

    @classmethod
    def from_settings(cls, settings: Settings, protocol: str = "e2e", surface: str = "r4g") -> "Pipeline":
        from .models.factory import load_models

        nli, encoder = load_models(settings)
        searcher = load_searcher(settings, encoder) if protocol in ("e2e", "ir") else None
        return cls(settings, nli, encoder, searcher, protocol, surface)

    def with_options(self, protocol: str | None = None, surface: str | None = None) -> "Pipeline":
        """Same models and index, another protocol/surface (the evaluator loops over surfaces)."""
        return Pipeline(self.settings, self.nli, self.encoder, self.searcher, protocol or self.protocol,
                        surface or self.surface, self.surface_builder)

    # ---- public API ---------------------------------------------------------------------------
    def run(self, items: list[CheckItem]) -> list[ClaimState]:
        """Every stage of the protocol over the batch; per-item timings are the stage's share. A
        claim a stage answered (not check-worthy) goes to no later stage."""
        states = [ClaimState(it) for it in items]
        for stage in self.stages:
            todo = [st for st in states if not st.skip_reason]
            t = time.perf_counter()
            try:
                stage.run(todo)
            except OUTAGES as e:
                stage.on_outage(todo, e)
            per_item = (time.perf_counter() - t) * 1000 / max(len(todo), 1)
            for st in todo:
                st.timings[stage.name] = round(per_item, 2)
        return states

    def check_many(self, items: list[CheckItem]) -> list[Verdict]:
        """One verdict per item. With `verify.segment`, each turn is checked claim by claim and its
        verdict is the turn summary: the worst claim's label (REFUTES > SUPPORTS > NEI) and evidence."""
        return [turn[-1] for turn in self.check_turns(items)]

    def check_turns(self, items: list[CheckItem]) -> list[list[Verdict]]:
        """Per item, every verdict to publish: with `verify.segment` a turn of several claims gets
        one verdict per claim (own claim_id) and then the turn summary (the turn's claim_id, the
        worst label, its rationale saying so); otherwise the one verdict of the turn."""
        if not self.settings.verify.segment or self.protocol == "ir":
            return [[self._verdict(st)] for st in self.run(items)]
        from dataclasses import replace

        from .segment import capped, turn_label

        out = []
        for item, claims in zip(items, self.check_segments(items)):
            if len(claims) <= 1 and not getattr(claims, "note", None):
                out.append(claims or [self._verdict(ClaimState(item))])
                continue
            label = turn_label(v.label for v in claims)
            worst = next(v for v in claims if v.label == label)
            why = {"rule": "turn-summary", "numbers": {"claims": len(claims)}, "window": (worst.rationale or {}).get("window"),
                   "summary": f"{label}: the worst of {len(claims)} claims (REFUTES > SUPPORTS > NOT ENOUGH INFO); "
                              f"claim ids {', '.join(v.claim_id for v in claims)}."}
            out.append(claims + [capped(replace(worst, claim=item.claim, surface=Surface("r0", item.claim), label=label,
                                         claim_id=claim_id(item.conversation_id, item.turn_id, item.claim), rationale=why),
                                        claims)])
        return out

    def check_segments(self, items: list[CheckItem]) -> list[list[Verdict]]:
        """Each turn split into claims (workers/segment.py), each checked with its own stable
        claim_id (conversation, turn, claim text); a one-claim turn keeps its text and id."""
        from .segment import TurnClaims, segment

        flat, owner, notes = [], [], [None] * len(items)
        for i, it in enumerate(items):
            segs = segment(it.claim, self.settings.verify.max_claims_per_turn)  # capped: the rest in `note`
            notes[i] = segs
            for seg in segs:
                flat.append(CheckItem(it.conversation_id, it.turn_id, list(it.context), seg.text, it.gold_evidence))
                owner.append(i)
        verdicts = [self._verdict(st) for st in self.run(flat)] if flat else []
        out: list[list[Verdict]] = [TurnClaims(note=getattr(n, "note", None), unchecked=getattr(n, "unchecked", 0))
                                    for n in notes]
        for i, v in zip(owner, verdicts):
            out[i].append(v)
        return out

    def check(self, context: list[str], claim: str, conversation_id: str = "cli", turn_id: str = "1") -> Verdict:
        return self.check_many([CheckItem(conversation_id, turn_id, context, claim)])[0]

    def retrieve_many(self, items: list[CheckItem]) -> list[ClaimState]:
        """IR protocol: each state carries `ir_surface`, `retrieval` (bm25, dense) and `problems`."""
        return self.with_options(protocol="ir").run(items) if self.protocol != "ir" else self.run(items)

    # ---- verdict ------------------------------------------------------------------------------
    def _verdict(self, st: ClaimState) -> Verdict:
        if st.label is not None:  # the verify stage's decider (or the check-worthiness stage)
            label, best, probs = st.label, st.best, st.label_probs
        else:  # no decider ran (an outage before or in verification): nothing was read or decided
            label, best, probs = "NOT ENOUGH INFO", None, dict(NO_EVIDENCE)
        evidence = []
        for d in shown_windows(best, st.decisions):
            p = st.passages[d.window.passage_index]
            evidence.append(Evidence(p.id, p.title, p.text, d.window.text, float(p.score) if p.score else None,
                                     round(d.window.prescore, 4), float(d.probs[ENTAILMENT]),
                                     float(d.probs[NEUTRAL]), float(d.probs[CONTRADICTION])))
        if st.problems:
            state = "error" if any(s == "error" for s, _ in st.problems) else "degraded"
            status = Status(state, "; ".join(r for _, r in st.problems))
        elif st.skip_reason:
            status = Status("ok", st.skip_reason)
        elif self.protocol == "e2e" and not st.passages:
            status = Status("ok", "no passage retrieved")
        elif self.protocol == "e2e" and best is not None and best.window.prescore < WEAK_EVIDENCE_PRESCORE:
            status = Status("ok", f"weak evidence: the best window shares little with the claim "
                                  f"(pre-score {best.window.prescore:.2f} < {WEAK_EVIDENCE_PRESCORE})")
        else:
            status = Status("ok")
        assert label in LABELS
        return self.scrub.verdict(Verdict(rationale=self._rationale(st, label, best, probs),
            conversation_id=st.item.conversation_id, turn_id=st.item.turn_id,
            claim_id=claim_id(st.item.conversation_id, st.item.turn_id, st.item.claim), claim=st.item.claim,
            surface=st.fv_surface or Surface("r0", st.item.claim), label=label, probabilities=probs,
            evidence=evidence, model_versions=self.model_versions(), timings_ms=st.timings, status=status))

    def _rationale(self, st: ClaimState, label: str, best, probs: dict[str, float]) -> dict:
        """Which rule or layer decided, on which numbers, reading which window (verdict.schema.json)."""
        if any(s == "error" for s, _ in st.problems):
            rule = "error"
        elif st.skip_reason:
            rule = "not-check-worthy"
        elif not st.decisions:
            rule = "no-evidence"
        else:
            rule = self.decision_rule()
        numbers: dict = {}
        window = None
        if best is not None:
            e, n, c = (round(float(best.probs[i]), 4) for i in (ENTAILMENT, NEUTRAL, CONTRADICTION))
            numbers.update(entail=e, neutral=n, contradict=c, prescore=round(best.window.prescore, 4))
            if rule == "threshold":
                v = self.settings.verify
                numbers.update(threshold=v.entail_threshold, win_gap=v.win_gap)
            p = st.passages[best.window.passage_index]
            window = {"passage_id": p.id, "title": p.title, "text": best.window.text}
        if rule.startswith("layer"):
            numbers.update({f"p_{k.lower().replace(' ', '_')}": round(float(x), 4) for k, x in probs.items()})
        numbers["windows_read"] = len(st.decisions)
        what = {"error": "a backend failed, so nothing was decided", "no-evidence": "no evidence window was read",
                "not-check-worthy": "the turn states no checkable fact"}.get(rule)
        summary = (f"{label}: {what}." if what else
                   f"{label} by {rule} over {len(st.decisions)} window(s); deciding window from '{window['title']}' "
                   f"(entail {numbers['entail']:.2f}, contradict {numbers['contradict']:.2f}).")
        return {"rule": rule, "numbers": numbers, "window": window, "summary": summary}

    def decision_rule(self) -> str:
        d = self.decider
        if d is None:
            return "none"
        return f"layer:{d.layer.method}" if d.layer is not None else d.decision

    def model_versions(self) -> dict[str, str]:
        v = {"nli": getattr(self.nli, "version", "?"), "encoder": getattr(self.encoder, "version", "?"),
             "protocol": self.protocol, "surface_mode": self.surface}
        if self.searcher is not None:
            v["search"] = getattr(self.searcher, "name", "?")
        d = self.decider
        if d is not None:
            v["decision"] = f"{d.layer.method}@{Path(d.path).name}" if d.layer is not None else d.decision
        return v


def shown_windows(best, decisions: list, n: int = 3) -> list:
    """The windows a verdict lists as evidence: the deciding window first, then the most decided
    (highest entail or contradict) others, each window text once."""
    ranked = sorted(decisions, key=lambda d: -max(d.probs[ENTAILMENT], d.probs[CONTRADICTION]))
    first_by_text: dict = {}
    for d in ([best] if best else []) + ranked:
        first_by_text.setdefault(d.window.text, d)
    return list(first_by_text.values())[:n]


def load_searcher(settings: Settings, encoder: Encoder | None = None) -> Searcher:
    if settings.retrieval.backend == "opensearch":
        from .retrieval.opensearch import OpenSearchSearcher

        return OpenSearchSearcher(settings.retrieval.opensearch_url, settings.retrieval.opensearch_index)
    from .retrieval.build import ensure_index

    return ensure_index(settings, encoder)
