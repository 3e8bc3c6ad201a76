"""`dialcheck` console command. Each subcommand lives in dialcheck/commands/<name>.py and exposes
`register(subparsers)`; this module only assembles them."""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from importlib.metadata import PackageNotFoundError, version

from dialcheck.errors import one_line, preflight


def _version() -> str:
    try:
        return version("dialcheck")
    except PackageNotFoundError:
        return "unknown"

COMMAND_MODULES = ("check", "eval", "index", "nli", "stream", "serve", "config", "tune",
                   "score",
                   "ui", "figures", "data")


class _Parser(argparse.ArgumentParser):
    """argparse with the CLI's one error style: `dialcheck: <command>: <what>` on one line, exit 2
    (argparse's own prints the usage block first). Subparsers inherit the class."""

    def error(self, message: str):
        where = self.prog.removeprefix("dialcheck").strip()
        self.exit(2, f"dialcheck: {where + ': ' if where else ''}{message} (--help for usage)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dialcheck", description="Streaming fact-checker for live chat.")
    parser.add_argument("--version", action="version", version=f"dialcheck {_version()}")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
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
    scrub = _install_scrubber(getattr(args, "broker", None) or "")
    try:
        preflight(args)
        return int(args.func(args) or 0)
    except Exception as e:  # an everyday mistake (dialcheck/errors.py) is one line; a bug keeps its traceback
        known = one_line(e, args)
        if known is None or args.debug:
            raise
        print(f"dialcheck: {scrub(known[1])}", file=sys.stderr)
        return known[0]
    except KeyboardInterrupt:  # Ctrl-C is an answer, not a crash: no traceback
        if args.debug:
            raise
        print("dialcheck: interrupted", file=sys.stderr)
        return 130
    finally:
        if argv is None:  # the process ends next: skip the 2-3 s full GC of the torch/faust heap at exit
            import gc

            gc.freeze()


def run() -> None:
    """The console script: main(), then a quick exit. The interpreter's own teardown of the loaded
    torch/faust modules took 2-4 s after a demo's Ctrl-C on 2 busy cores; atexit handlers (which
    stop any child process still running) and the stdio flush still run first."""
    import atexit
    import logging

    try:
        code = main()
    except BrokenPipeError:  # `dialcheck verdicts --json | head`: the reader left, which is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    except SystemExit as e:  # argparse's exit (usage, --help, --version)
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int) and e.code is not None:
            print(e.code, file=sys.stderr)
    atexit._run_exitfuncs()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _install_scrubber(broker: str = ""):
    """The one scrubber (schemas/secrets.py) over this process's log records, its error line and an
    uncaught traceback: URL userinfo and the configured secret values never reach the terminal."""
    import traceback

    from schemas.secrets import Scrubber, install_record_scrubber, url_passwords
    from schemas.settings import SettingsInvalid, load_settings

    try:
        scrub = Scrubber.from_settings(load_settings())
    except SettingsInvalid:  # reported by the command itself; its line is masked already
        scrub = Scrubber()
    if broker:  # --broker kafka://user:pass@host: its password is a secret too (it is not in the environment)
        scrub = Scrubber([*scrub.secrets, *url_passwords(broker)])
    install_record_scrubber(scrub)
    sys.excepthook = lambda tp, value, tb: sys.stderr.write(scrub("".join(traceback.format_exception(tp, value, tb))))
    return scrub


if __name__ == "__main__":
    run()
