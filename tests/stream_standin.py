"""A model-free stand-in Checker for tests that exercise only the Kafka wiring (loading the real
models costs ~20 s per worker start; tests/test_stream_kafka.py runs the real pipeline).

Selected with the worker's hidden flag: `dialcheck worker --pipeline tests.stream_standin:create`.
Its verdicts are deterministic and carry a digest of the context they were given
(`model_versions["context_sha1"]`, `timings_ms["context_turns"]`), so a test can tell whether a
restored context table gave a claim the same context as its record. A grounded item's passages
(`gold_evidence`: the turn's evidence, then its conversation's knowledge) come back as its evidence,
in order, with their id, title, url and source, and what the limits left unread (`evidence_note`) as
its status reason, so a test sees exactly what the worker handed the checker.

Claims containing a trigger word misbehave on purpose:
  STANDIN-RAISE     raises an error whose text contains the configured OpenSearch URL and SASL
                    password (as a failing client would), and logs it
  STANDIN-DEGRADED  returns a degraded verdict whose reason contains the OpenSearch URL
  STANDIN-HANG      sleeps 60 s (a hung call; the batch deadline must answer it)
  STANDIN-KILL      SIGKILLs its own process (a pipeline that crashes the worker on every delivery)
  STANDIN-HUGE      returns a verdict with 1.5 MB of evidence: larger than the producer's request
                    size, so every send of it fails
  STANDIN-BROKEN    returns a result whose verdict is not a Verdict: the worker's own handling of the
                    step raises after the pipeline call (a bug outside the checker)
"""
from __future__ import annotations

import hashlib
import logging
import os
import signal
import time

from schemas.protocols import TurnResult
from schemas import Evidence, Status, Surface, Verdict, claim_id

LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
log = logging.getLogger("dialcheck.standin")
STANDIN_DELAY_S = float(os.environ.get("DIALCHECK_STANDIN_DELAY_S", "0"))


def context_digest(context: list[str]) -> str:
    return hashlib.sha1("\x00".join(context).encode()).hexdigest()[:12]


def echoed(item) -> list[Evidence]:
    """The item's given passages as evidence, as the worker handed them over."""
    return [Evidence(p.id or f"given-{i}", p.title or "", p.text, url=p.url, source=p.source)
            for i, p in enumerate(item.gold_evidence or [])]


class StandIn:
    def __init__(self, settings):
        self.settings = settings

    def _secret_text(self) -> str:
        return (f"ConnectionError(url={self.settings.retrieval.opensearch_url}, "
                f"sasl={self.settings.kafka.sasl_password.get_secret_value()})")

    def check_turns(self, items):
        """A TurnResult per item (schemas/protocols.py), one verdict each."""
        time.sleep(STANDIN_DELAY_S * len(items))  # a model's cost per claim, for timing-sensitive tests
        out = []
        for it in items:
            if "STANDIN-KILL" in it.claim:
                os.kill(os.getpid(), signal.SIGKILL)
            if "STANDIN-HANG" in it.claim:
                time.sleep(60)
            if "STANDIN-RAISE" in it.claim:
                log.error("search backend failed: %s", self._secret_text())
                raise RuntimeError(f"search backend failed: {self._secret_text()}")
            status = Status("ok")
            if "STANDIN-DEGRADED" in it.claim:
                status = Status("degraded", f"search unavailable: {self._secret_text()}")
            if it.evidence_note:
                status = Status(status.state, it.evidence_note)
            label = LABELS[int(hashlib.sha1(it.claim.encode()).hexdigest(), 16) % 3]
            out.append(Verdict(
                conversation_id=it.conversation_id, turn_id=it.turn_id,
                claim_id=claim_id(it.conversation_id, it.turn_id, it.claim), claim=it.claim,
                surface=Surface(name="r0", text=it.claim), label=label,
                probabilities={k: (1.0 if k == label else 0.0) for k in LABELS},
                evidence=[Evidence("huge", "Huge", "x" * 1_500_000)] if "STANDIN-HUGE" in it.claim else echoed(it),
                model_versions={"standin": "1", "context_sha1": context_digest(it.context)},
                timings_ms={"context_turns": float(len(it.context))}, status=status))
        return [TurnResult(it, [None if "STANDIN-BROKEN" in it.claim else v]) for it, v in zip(items, out)]


def create(settings, protocol: str = "e2e", surface: str = "r4g") -> StandIn:
    return StandIn(settings)
