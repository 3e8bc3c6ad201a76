#!/usr/bin/env python3
"""dialcheck as a Python library: check claims in a script or a notebook, no Kafka, no HTTP.

    python examples/python_api.py          # the default index (built on first use), DIALCHECK_* settings

Prints one JSON line per result: a checked claim with its context, a batch, the verifier's
p(SUPPORTS) for evidence/claim pairs (to compare with other verifiers), and the one-line error
for a claim dialcheck refuses. docs/integration.md ("Python") explains each call.
"""
from __future__ import annotations

import json

from dialcheck import Checker, InvalidInput


def shown(v) -> dict:
    """The fields a chat UI shows (docs/integration.md, "What to show users")."""
    best = v.evidence[0] if v.evidence else None
    return {"claim": v.claim, "label": v.label, "confidence": round(v.probabilities[v.label], 3),
            "status": v.status.state, "show": v.display.show if v.display else None,
            "evidence_title": best and best.title}


def main() -> int:
    checker = Checker.load()  # models and the passage index, once; protocol "e2e" retrieves the evidence
    print(json.dumps({"loaded": checker.load_report}))

    # one claim, with the turns before it (they resolve "he")
    v = checker.check("Yes, he was born in Tupelo, Mississippi.", context=["Where was Elvis Presley born?"])
    print(json.dumps({"check": shown(v)}))

    # many claims in one pipeline call, as the stream checks a batch
    for v in checker.check_many(["The Eiffel Tower is in Paris.",
                                 {"claim": "He was born in Memphis.", "context": ["Tell me about Elvis Presley."]}]):
        print(json.dumps({"check_many": shown(v)}))

    # the verifier's p(SUPPORTS) per (evidence, claim) pair
    evidence = "Elvis Presley was born on January 8, 1935, in Tupelo, Mississippi."
    claims = ["Elvis Presley was born in Tupelo.", "Elvis Presley was born in Memphis."]
    print(json.dumps({"score": dict(zip(claims, (round(p, 4) for p in checker.score(evidence, claims))))}))

    # input is held to a chat turn's rules: a claim with nothing visible in it is refused
    try:
        checker.check("\u200b ")
    except InvalidInput as e:  # a ValueError; e.code is the dead-letter reason code a turn would get
        print(json.dumps({"refused": str(e), "code": e.code}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
