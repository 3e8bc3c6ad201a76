"""`dialcheck check`: one dialogue (JSON file or arguments) → verdict JSON."""
from __future__ import annotations

import json
import sys


def register(sub) -> None:
    p = sub.add_parser("check", help="check one claim in its dialogue context")
    p.add_argument("--file", help='JSON file: {"context": [...], "claim": "..."} or a DialFact record')
    p.add_argument("--context", action="append", default=[], help="a context turn (repeatable, oldest first)")
    p.add_argument("--claim", help="the claim (response) to check")
    p.add_argument("--protocol", choices=["e2e", "fv"], default="e2e")
    p.add_argument("--evidence", action="append", default=[], help="gold evidence text (protocol fv)")
    p.add_argument("--surface", default="r4g")
    p.add_argument("--models", default=None)
    p.set_defaults(func=run)


def run(args) -> int:
    from schemas.settings import Settings, load_settings
    from workers.pipeline import CheckItem, Pipeline

    if args.file:
        obj = json.load(open(args.file, encoding="utf-8"))
        context = obj.get("context", [])
        claim = obj.get("claim") or obj.get("response")
        evidence = [(e[0], e[2]) for e in obj.get("evidence_list", [])] or [("evidence", e) for e in obj.get("evidence", [])]
    else:
        context, claim, evidence = args.context, args.claim, [("evidence", e) for e in args.evidence]
    if not claim:
        print("error: no claim given (--claim or --file)", file=sys.stderr)
        return 2
    pipe = Pipeline.from_settings(load_settings(models={"backend": args.models}), protocol=args.protocol, surface=args.surface)
    item = CheckItem("cli", "1", list(context), claim, evidence if args.protocol == "fv" else None)
    print(pipe.check_many([item])[0].to_json().decode())
    return 0
