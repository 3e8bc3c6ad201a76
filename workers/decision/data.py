"""Tuning data: DialFact records → claim surfaces, gate scores, evidence passages and window
probabilities (all cached under artifacts/tune), turned into `ClaimEvidence` per claim.

Mirrors what the pipeline does for one claim (surfaces → gate → passages → top_windows → NLI),
so numbers from here and from `dialcheck eval` agree for the same rule."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ..text import last_turns, with_context
from ..windows import top_windows
from .cache import DEFAULT_DIR, PairCache
from .features import ClaimEvidence


def model_fingerprint(model_dir: str | Path) -> str:
    """Content hash of the ONNX weights + calibration: the pair-cache key of a model."""
    d = Path(model_dir)
    h = hashlib.sha1()
    for name in ("model.onnx", "calibration.json", "model.safetensors"):
        p = d / name
        if p.exists():
            with open(p, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 22), b""):
                    h.update(chunk)
    return h.hexdigest()[:16]


class CachedNLI:
    """An NLIModel whose predictions go through the pair cache (used for windows and the gate)."""

    def __init__(self, nli, cache: PairCache):
        self.nli, self.cache, self.version = nli, cache, getattr(nli, "version", "?")

    def predict(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        if len(premises) == 0:
            return np.zeros((0, 3))
        return self.cache.predict(self.nli.predict, premises, hypotheses)


@dataclass
class TuneSet:
    """Records of one DialFact-format file with their model-independent pieces."""
    records: list
    surfaces: dict  # id -> {"r0".."r4", "alt"}

    @classmethod
    def load(cls, path: str | Path, cache_dir: Path = DEFAULT_DIR) -> "TuneSet":
        from schemas.items import load_dialfact
        from ..surfaces import build_surfaces

        records = load_dialfact(path)
        cpath = cache_dir / f"surfaces-{hashlib.sha1(Path(path).read_bytes()).hexdigest()[:12]}.json"
        surf = json.loads(cpath.read_text()) if cpath.exists() else {}
        if any(r.id not in surf for r in records):
            for r in records:
                if r.id not in surf:
                    s = build_surfaces(r.context, r.response)
                    alts = [a for a in dict.fromkeys(s.r4_alternatives[:1] or [s.r4]) if a != r.response]
                    surf[r.id] = {"r0": s.r0, "r1": s.r1, "r2": s.r2, "r3": s.r3, "r4": s.r4,
                                  "alt": alts[0] if alts else None}
            cpath.parent.mkdir(parents=True, exist_ok=True)
            cpath.write_text(json.dumps(surf))
        return cls(records, surf)

    @property
    def labels(self) -> list[str]:
        return [r.label for r in self.records]

    @property
    def groups(self) -> list[str]:
        return [r.context_id for r in self.records]


def gate_scores(ts: TuneSet, nli: CachedNLI, encoder, cache: PairCache, gate_context_turns: int = 2) -> dict:
    """id → (s, e, c, sim) of the R4 candidate (None when R4 changes nothing)."""
    from ..gate import BiConGate, GateInput

    def make():
        todo = [r for r in ts.records if ts.surfaces[r.id]["alt"]]
        scored = BiConGate(nli, encoder).score(
            [GateInput(last_turns(r.context, gate_context_turns), r.response, ts.surfaces[r.id]["alt"]) for r in todo])
        return {r.id: list(s) for r, s in zip(todo, scored)}

    return cache.blob(f"gate:{gate_context_turns}:{len(ts.records)}:" + ",".join(r.id for r in ts.records[:5]), make)


def surface_text(ts: TuneSet, rec, surface: str, gates: dict | None, tau: float) -> tuple[str, bool | None]:
    """The surface text a pipeline with `surface` would verify, and the gate outcome (r4g)."""
    s = ts.surfaces[rec.id]
    if surface != "r4g":
        return s[surface], None
    g = (gates or {}).get(rec.id)
    if g is None:
        return rec.response, None
    return (s["alt"], True) if g[0] >= tau else (rec.response, False)


def evidence(ts: TuneSet, nli: CachedNLI, surface: str = "r0", hyp_turns: int = 0, passages: dict | None = None,
             gates: dict | None = None, tau: float = 0.70, max_windows: int = 24,
             window_fn=top_windows) -> list[ClaimEvidence]:
    """ClaimEvidence per record. `passages`: id → [(text, score)] (E2E); None = gold evidence (FV)."""
    plan = []
    for r in ts.records:
        text, gate = surface_text(ts, r, surface, gates, tau)
        if passages is None:
            ptexts, pscores = [t for _, t in r.evidence], [None] * len(r.evidence)
        else:
            ptexts, pscores = [t for t, _ in passages.get(r.id, [])], [s for _, s in passages.get(r.id, [])]
        wins = window_fn(ptexts, text, max_windows)
        plan.append((r, text, gate, wins, pscores, with_context(r.context, text, hyp_turns)))
    prem = [w.text for p in plan for w in p[3]]
    hyps = [p[5] for p in plan for _ in p[3]]
    probs = nli.predict(prem, hyps)
    out, k = [], 0
    for r, text, gate, wins, pscores, _ in plan:
        n = len(wins)
        out.append(ClaimEvidence(text, probs[k:k + n].reshape(n, 3), np.array([w.prescore for w in wins]),
                                 np.array([w.passage_index for w in wins], dtype=int), pscores, gate))
        k += n
    return out


def retrieved_passages(ts: TuneSet, searcher, encoder, cache: PairCache, surface_of, settings, tag: str) -> dict:
    """id → top `verify_top_passages` (text, score) after BM25 ∪ context → dense re-scoring, as the
    pipeline's retrieve stage (cached per query text under `tag`)."""
    from ..retrieval.dense import context_union, dense_rescore

    def make():
        out = {}
        for r in ts.records:
            q = with_context(r.context, surface_of(r), settings.retrieval.query_context_turns)
            bm25 = context_union(searcher, q, r.context, settings.retrieval.bm25_top_k)
            dense, _ = dense_rescore(encoder, searcher, q, bm25, settings.retrieval.dense_top_k)
            out[r.id] = [(p.text, float(p.score)) for p in dense[: settings.retrieval.verify_top_passages]]
        return out

    return cache.blob(f"passages:{tag}", make)
