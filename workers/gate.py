"""BiCon-Gate (docs/method.md §3): accept a rewrite Rk of the original claim R0 only if it stays
mutually entailed with, and not contradicted by, the original in its context.

    e   = min(p_ent(C+R0 ⇒ Rk), p_ent(Rk ⇒ C+R0))
    c   = max(p_ctr(C+R0 ⇒ Rk), p_ctr(Rk ⇒ C+R0))
    sim = cos(φ(R0), φ(Rk))
    s   = α·e + β·sim + γ·(1 − c);  accept iff s ≥ τ
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from schemas import GateDecision
from schemas.protocols import CONTRADICTION, ENTAILMENT, Encoder, NLIModel


@dataclass(frozen=True)
class GateInput:
    context: list[str]  # the context turns the gate reads (already cut to the configured window)
    original: str
    rewrite: str


class BiConGate:
    def __init__(self, nli: NLIModel, encoder: Encoder, weights: Sequence[float] = (0.4, 0.2, 0.4)):
        self.nli, self.encoder = nli, encoder
        self.alpha, self.beta, self.gamma = weights

    def score(self, items: Sequence[GateInput]) -> list[tuple[float, float, float, float]]:
        """(s, e, c, sim) per item; one batched NLI call (both directions) and one encoder call."""
        if not items:
            return []
        premise_fw = [" ".join([*it.context, it.original]) for it in items]
        rewrites = [it.rewrite for it in items]
        probs = self.nli.predict(premise_fw + rewrites, rewrites + premise_fw)
        fw, bw = probs[: len(items)], probs[len(items):]
        vecs = self.encoder.encode([it.original for it in items] + rewrites, is_query=True)
        sims = np.sum(vecs[: len(items)] * vecs[len(items):], axis=1)
        out = []
        for i in range(len(items)):
            e = float(min(fw[i, ENTAILMENT], bw[i, ENTAILMENT]))
            c = float(max(fw[i, CONTRADICTION], bw[i, CONTRADICTION]))
            sim = float(np.clip(sims[i], -1.0, 1.0))
            s = self.alpha * e + self.beta * sim + self.gamma * (1.0 - c)
            out.append((s, e, c, sim))
        return out


def gate_decision(scored: tuple[float, float, float, float], tau: float) -> GateDecision:
    """A scored rewrite (s, e, c, sim) against τ: the record the verdict's surface carries."""
    s, e, c, sim = scored
    return GateDecision(round(s, 6), round(e, 6), round(c, 6), round(sim, 6), tau, s >= tau)
