"""`dialcheck config`: the effective settings (defaults ← DIALCHECK_* environment), secrets masked.

Every value goes through the one scrubber (schemas/secrets.py): the whole userinfo of any URL-like
setting (DIALCHECK_OPENSEARCH_URL, DIALCHECK_KAFKA_BOOTSTRAP, DIALCHECK_MODELS, ...) and the literal
value of every configured secret, wherever it appears."""
from __future__ import annotations

import json


def register(sub) -> None:
    p = sub.add_parser("config", help="print the effective settings (secrets masked)")
    p.add_argument("--json", action="store_true", help="one JSON object: section.field → value")
    p.set_defaults(func=run)


def run(args) -> int:
    from schemas.secrets import Scrubber
    from schemas.settings import load_settings

    settings = load_settings()
    scrub = Scrubber.from_settings(settings)
    rows = [(key, env, scrub(value) if isinstance(value, str) else value, doc)
            for key, env, value, doc in settings.as_table()]
    if args.json:
        print(json.dumps({key: value for key, _, value, _ in rows}, default=str, indent=1))
        return 0
    width = max(len(key) for key, *_ in rows)
    for key, env, value, doc in rows:
        print(f"{key:<{width}}  {value!s:<28}  {env}  # {doc}")
    return 0
