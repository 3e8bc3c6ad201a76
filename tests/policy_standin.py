"""A model-free stand-in Checker whose badges come from the real display runtime, for the feedback
loop's stream test (tests/test_feedback_loop.py). A stand-in because the real NLI pipeline is too
slow for that test (model loading and retrieval per worker start, twice); what is under test is the
loop: verdicts → feedback → store → `dialcheck calibrate` → the worker's display.

What is real: the display policy is loaded at create time with `workers.display.load_display`
from `decision.display_params` (DIALCHECK_DISPLAY_PARAMS), as the Pipeline loads it, and re-read by
`reload_display` (the worker's SIGHUP) through the same loader, refused like the Pipeline's; every
verdict's display is `workers.display.display_of` over a real `Decision` and `ClaimEvidence`. What is
stood in: the NLI numbers. A claim ending in a tag `[SUPPORTS 0.62]` or `[REFUTES 0.62]` gets that
label with p(label) = the number, on 20 windows read, the first deciding (entail / contradict = p,
coverage 0.5, nothing uncovered, strong evidence); any other claim is NOT ENOUGH INFO on nothing read.

The rationale quotes the deciding window's numbers the way workers/verdict.py does, so the badge
facts the store keeps (`BadgeFacts.of_verdict`, what `dialcheck calibrate --from-feedback` scores)
are exactly those the runtime scored; `check_turns` raises if they ever differ.
`--pipeline tests.policy_standin:create`."""
from __future__ import annotations

import re

import numpy as np

from schemas import Evidence, Status, Surface, Verdict, claim_id
from schemas.protocols import CONTRADICTION, ENTAILMENT, NEUTRAL, ReloadRefused, TurnResult
from workers.decision.features import ClaimEvidence
from workers.decision.methods import Decision
from workers.display import BadgeFacts, display_of, load_display

TAG = re.compile(r"\[(SUPPORTS|REFUTES) (0\.\d{1,4})\]\s*$")
WINDOWS = 20  # windows "read" per claim: enough that the shipped badge scorer spreads the scores
ON_TOPIC = 0.5  # the deciding window's coverage of the claim's key terms
OTHER = 0.05  # p of the opposite label


def numbers_of(claim: str) -> tuple[str, float] | None:
    m = TAG.search(claim)
    return (m.group(1), float(m.group(2))) if m else None


class PolicyStandIn:
    def __init__(self, settings, protocol: str = "e2e"):
        self.settings, self.protocol = settings, protocol
        self.display = load_display(settings.decision, None, protocol)  # None: the constant rule, as the Pipeline
        self.display_file = settings.decision.display_params

    def reload_display(self) -> str:
        """The display file re-read in place (workers/pipeline.py `Pipeline.reload_display`'s contract)."""
        try:
            display = load_display(self.settings.decision, None, self.protocol, required=True)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise ReloadRefused(f"{self.display_file} is missing or broken ({type(e).__name__}); "
                                f"the old policy kept") from e
        self.display = display  # one assignment; check_turns reads it once per batch
        return f"{self.display_file} (policy@{display.meta.get('date', 'fitted') if display else 'constant'})"

    def _claim(self, it) -> tuple[Decision | None, ClaimEvidence | None, Status, list[Evidence], dict]:
        tagged = numbers_of(it.claim)
        if tagged is None:
            return None, None, Status("ok", "no passage retrieved", "none"), [], {"windows_read": 0}
        label, p = tagged
        other = OTHER
        e, c = (p, other) if label == "SUPPORTS" else (other, p)
        n = round(1.0 - p - other, 4)
        probs = np.tile([0.1, 0.8, 0.1], (WINDOWS, 1))
        probs[0] = [e, n, c]
        ev = ClaimEvidence(it.claim, probs, np.linspace(0.9, 0.2, WINDOWS), np.arange(WINDOWS),
                           in_dialogue=bool(it.context))
        probabilities = {"SUPPORTS": e, "REFUTES": c, "NOT ENOUGH INFO": n}
        numbers = {"coverage": ON_TOPIC, "reply": bool(it.context)}
        d = Decision(label, probabilities, 0, numbers, ON_TOPIC, "strong", rule="standin:policy")
        window = f"Stand-in window for: {it.claim}"
        evidence = [Evidence("standin-0", "Stand-in passage", window, window, None, 0.9, e, n, c)]
        quoted = {"entail": round(float(probs[0][ENTAILMENT]), 4), "neutral": round(float(probs[0][NEUTRAL]), 4),
                  "contradict": round(float(probs[0][CONTRADICTION]), 4), "prescore": 0.9, **numbers,
                  "windows_read": WINDOWS}
        return d, ev, Status("ok", None, "strong"), evidence, quoted

    def check_turns(self, items):
        out, display = [], self.display
        for it in items:
            d, ev, status, evidence, numbers = self._claim(it)
            v = Verdict(conversation_id=it.conversation_id, turn_id=it.turn_id,
                        claim_id=claim_id(it.conversation_id, it.turn_id, it.claim), claim=it.claim,
                        surface=Surface(name="r0", text=it.claim), label=d.label if d else "NOT ENOUGH INFO",
                        probabilities=d.probabilities if d else {"SUPPORTS": 0.0, "REFUTES": 0.0, "NOT ENOUGH INFO": 1.0},
                        evidence=evidence, model_versions={"standin": "policy"}, timings_ms={}, status=status,
                        display=display_of(d, ev, status, display),
                        rationale={"rule": "standin:policy", "numbers": numbers, "window": None,
                                   "summary": "stand-in numbers, real display policy"})
            if d is not None and BadgeFacts.of_verdict(v) != BadgeFacts.of(d, ev):
                raise AssertionError(f"the verdict's badge facts {BadgeFacts.of_verdict(v)} are not those scored "
                                     f"{BadgeFacts.of(d, ev)}")
            out.append(TurnResult(it, [v]))
        return out


def create(settings, protocol: str = "e2e", surface: str = "r0") -> PolicyStandIn:
    return PolicyStandIn(settings, protocol)
