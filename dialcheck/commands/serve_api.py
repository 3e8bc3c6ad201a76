"""`dialcheck serve-api`: POST /check → one verdict, the models loaded once (dialcheck/api.py)."""
from __future__ import annotations

import sys

DEFAULT_PORT = 8780


def register(sub) -> None:
    p = sub.add_parser("serve-api", help="serve POST /check: one verdict per request, models loaded once (no Kafka)",
                       description="An HTTP endpoint for one verdict: POST /check with "
                                   '{"claim": "...", "context": ["...", ...]} returns the verdict JSON '
                                   "(schemas/verdict.schema.json). Limits as for chat turns.")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: this machine only; 0.0.0.0 exposes it to the network)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free one)")
    p.add_argument("--protocol", choices=["e2e", "fv"], default="e2e",
                   help="e2e: retrieve evidence from the passage index (default), unless a request gives \"evidence\" "
                        "(a grounded turn's passages: checked as fv checks); fv: each request gives \"evidence\"")
    p.add_argument("--surface", default=None, help="the claim surface checked (default DIALCHECK_SURFACE, r0: as the stream)")
    p.add_argument("--models", default=None, help="'local' or triton://HOST:PORT (default: DIALCHECK_MODELS)")
    p.set_defaults(func=run)


def run(args) -> int:
    from dialcheck.api import serve
    from dialcheck.errors import check_port_free
    from dialcheck.wiring import check_surface, load_checker
    from schemas.settings import load_settings

    check_surface(args.surface)
    settings = load_settings(models={"backend": args.models})
    check_port_free(args.host, args.port, "--port")  # before minutes of loading
    if args.protocol != "fv" and not settings.grounding.only:  # the index is built on first use: its sources first
        from dialcheck.commands.data import require_index_sources

        require_index_sources(settings)
    pipe = load_checker(settings, protocol=args.protocol, surface=args.surface)
    if pipe.load_report():
        print(pipe.load_report(), file=sys.stderr, flush=True)
    serve(pipe, settings, args.host, args.port, args.protocol)
    return 0
