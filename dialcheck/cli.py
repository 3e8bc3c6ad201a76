"""`dialcheck` console command. Each subcommand lives in dialcheck/commands/<name>.py and exposes
`register(subparsers)`; this module only assembles them."""
from __future__ import annotations

import argparse
import importlib
import os
import sys

COMMAND_MODULES = ("check", "evaluate", "index", "nli", "stream", "serve")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dialcheck", description="Streaming fact-checker for live chat.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(f"dialcheck.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"dialcheck.commands.{name}":
                continue
            raise
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
