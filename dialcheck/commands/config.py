"""`dialcheck config`: the effective settings (defaults ← DIALCHECK_* environment), secrets masked."""
from __future__ import annotations

import json


def register(sub) -> None:
    p = sub.add_parser("config", help="print the effective settings (secrets masked)")
    p.add_argument("--json", action="store_true", help="one JSON object: section.field → value")
    p.set_defaults(func=run)


def run(args) -> int:
    from schemas.settings import load_settings

    rows = load_settings().as_table()
    if args.json:
        print(json.dumps({key: value for key, _, value, _ in rows}, default=str, indent=1))
        return 0
    width = max(len(key) for key, *_ in rows)
    for key, env, value, doc in rows:
        print(f"{key:<{width}}  {value!s:<28}  {env}  # {doc}")
    return 0
