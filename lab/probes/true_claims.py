"""True-claim probe: 30 true everyday claims, 12 with a relation of many fillers ("Lyon is a city in
France", "Paris is in Europe") and 16 with a one-filler relation ("Paris is the capital of France",
"Hamlet was written by William Shakespeare"), each checked end to end as the everyday probe checks
its claims (lab/probes/everyday.py, the same index, surface and decisions). What it counts: true
claims that are not SUPPORTS, and above all any REFUTES (`true_refutes`): a rule that looks for a
rival filler must not find one for a claim that is true. Written before that rule, so its numbers
before it are the baseline (docs/stress.md).

    python -m lab.probes.true_claims [--json] [--index DIR]
    DIALCHECK_DECISION_PARAMS=FILE python -m lab.probes.true_claims   # another decision (e.g. checks_on)"""
from __future__ import annotations

import sys
from pathlib import Path

from lab.probes import everyday

PROBE = Path(__file__).with_name("true_claims.jsonl")


def main(argv: list[str] | None = None) -> int:
    return everyday.main(["--probe", str(PROBE), *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
