"""Model-free stand-in Checker for bench/bench_soak.py (selected with the worker's hidden
`--pipeline bench.soak_standin:create`).

Why a stand-in: the soak measures the stream (delivery, redelivery, takeover, memory of the
worker's state), not the NLP; with the real pipeline 2,000 claims would take most of an hour on
2 cores. Each verdict carries a digest of the context it was checked against, so the soak can
tell whether a takeover restored every conversation's context, and (grounded turns) a digest of the
passages it was given, so the soak can tell a conversation's knowledge reached it and no other's."""
from __future__ import annotations

import hashlib

from schemas import Status, Surface, Verdict, claim_id
from schemas.protocols import TurnResult

LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")


def context_digest(context: list[str]) -> str:
    return hashlib.sha1("\x00".join(context).encode()).hexdigest()[:12]


def given_digest(item) -> str | None:
    """The digest of the passages a grounded item was given (None: none, an E2E item; the verdict says "")."""
    given = item.gold_evidence
    return None if given is None else context_digest([g[1] if isinstance(g, tuple) else g.text for g in given])


class SoakStandIn:
    def check_turns(self, items):
        out = []
        for it in items:
            label = LABELS[int(hashlib.sha1(it.claim.encode()).hexdigest(), 16) % 3]
            out.append(Verdict(
                conversation_id=it.conversation_id, turn_id=it.turn_id,
                claim_id=claim_id(it.conversation_id, it.turn_id, it.claim), claim=it.claim,
                surface=Surface(name="r0", text=it.claim), label=label,
                probabilities={k: (1.0 if k == label else 0.0) for k in LABELS}, evidence=[],
                model_versions={"standin": "soak", "context_sha1": context_digest(it.context),
                                "given_sha1": given_digest(it) or ""},
                timings_ms={}, status=Status("ok")))
        return [TurnResult(it, [v]) for it, v in zip(items, out)]


def create(settings, protocol: str = "e2e", surface: str = "r4g") -> SoakStandIn:
    return SoakStandIn()
