"""`dialcheck serve-models`: run the bundled tritonserver on triton_models/ until interrupted.

Prints the DIALCHECK_MODELS URL to point workers at. Production runs the NGC container instead
(docker-compose.yml); this is the local/CI equivalent on CPU.
"""
from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("serve-models", help="Serve the NLI and encoder models with the bundled Triton server.")
    p.add_argument("--model-repository", default=None, help="Model repository (default: triton_models/).")
    p.add_argument("--models", default="", help="Comma list to load only these (explicit model control).")
    p.add_argument("--host", default="127.0.0.1", help="Bind address (default 127.0.0.1).")
    p.add_argument("--http-port", type=int, default=0, help="HTTP port (0: a free one).")
    p.add_argument("--grpc-port", type=int, default=0, help="gRPC port (0: a free one).")
    p.add_argument("--log", default=None, help="Server log file (default: a temp file).")
    p.add_argument("--startup-timeout", type=float, default=300.0, help="Seconds to wait for readiness.")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dialcheck.errors import check_port_free

    check_port_free(args.host, args.http_port, "--http-port")  # a taken port: one line, before tritonserver starts
    check_port_free(args.host, args.grpc_port, "--grpc-port")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # infra/ lives at the repo root
    from infra.triton_server import DEFAULT_REPOSITORY, TritonServer

    server = TritonServer(args.model_repository or DEFAULT_REPOSITORY,
                          models=[m for m in args.models.split(",") if m] or None, host=args.host,
                          http_port=args.http_port or None, grpc_port=args.grpc_port or None, log_path=args.log)
    stop = {"now": False}

    def on_signal(signum: int, frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start(args.startup_timeout)  # TritonStartError: one line, exit 2 (dialcheck/errors.py)
    print(f"Triton ready (log: {server.log_path})\n  DIALCHECK_MODELS={server.grpc_url}\n  or DIALCHECK_MODELS={server.http_url}",
          flush=True)
    try:
        while not stop["now"] and server.running:
            time.sleep(0.5)
    finally:
        crashed = not server.running
        server.stop()
    if crashed:
        print(f"serve-models: tritonserver exited:\n{server.log_tail()}", file=sys.stderr)
        return 1
    return 0
