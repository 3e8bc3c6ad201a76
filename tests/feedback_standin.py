"""tests/stream_standin.py's model-free Checker, with a display hint on every verdict (shown for
SUPPORTS / REFUTES, "high" for claims that say so): the feedback tests need badges that were shown,
with a confidence, to count the live precision per badge. `--pipeline tests.feedback_standin:create`."""
from __future__ import annotations

from dataclasses import replace

from schemas import Display
from schemas.protocols import TurnResult

from tests.stream_standin import StandIn

TONES = {"SUPPORTS": "supported", "REFUTES": "disputed", "NOT ENOUGH INFO": "unverified"}


class DisplayStandIn(StandIn):
    def check_turns(self, items):
        out = []
        for res in super().check_turns(items):
            vs = [replace(v, display=Display(show=v.label != "NOT ENOUGH INFO", tone=TONES[v.label],
                                             confidence="high" if "high" in v.claim else "medium"))
                  for v in res.verdicts]
            out.append(TurnResult(res.item, vs))
        return out


def create(settings, protocol: str = "e2e", surface: str = "r4g") -> DisplayStandIn:
    return DisplayStandIn(settings)
