"""`dialcheck` console command. Each subcommand lives in dialcheck/commands/<name>.py and exposes
`register(subparsers)`; this module only assembles them."""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from importlib.metadata import PackageNotFoundError, version

from dialcheck.errors import one_line, preflight


def _version() -> str:
    try:
        return version("dialcheck")
    except PackageNotFoundError:
        return "unknown"

COMMAND_MODULES = ("check", "serve_api", "eval", "index", "nli", "stream", "serve", "config", "tune",
                   "score", "calibrate", "feedback", "adapt", "adapt_loop",
                   "ui", "figures", "data",
                   "llm")


class _Parser(argparse.ArgumentParser):
    """argparse with the CLI's one error style: `dialcheck: <command>: <what>` on one line, exit 2
    (argparse's own prints the usage block first). Subparsers inherit the class."""

    def error(self, message: str):
        command = _unknown_command(self, _ARGV)
        if command:
            self.exit(2, f"dialcheck: {command}\n")
        prog, unknown = _unknown_option(self, _ARGV)
        where, message = prog.removeprefix("dialcheck").strip(), unknown or message
        self.exit(2, f"dialcheck: {where + ': ' if where else ''}{message} (--help for usage)\n")


_ARGV: list[str] = []  # the arguments being parsed, for _unknown_option


def _unknown_option(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[str, str | None]:
    """(the command's prog, 'unknown option --claimm (did you mean --claim?)') for the first option the
    (sub)command in argv does not know; (prog, None) when it knows them all. Why: argparse reports a later symptom instead (`check --claimm "x"` hands "x" to the
    positional and says "invalid choice"), which never names the mistyped flag. Python 3.11's
    argparse has no suggest_on_error."""
    import difflib

    parser = _deepest(parser, argv)
    known = set(parser._option_string_actions)
    for token in argv:
        if token == "--":
            break
        if not token.startswith("-") or token == "-" or token[1:2].isdigit():
            continue
        flag = token.split("=", 1)[0]
        if flag in known or flag in _ROOT_OPTIONS:
            continue
        if not flag.startswith("--") and len(flag) > 2 and flag[:2] in known:  # -vv, -xVALUE
            continue
        close = difflib.get_close_matches(flag, sorted(o for o in known if o.startswith("--")), n=1, cutoff=0.8)
        return parser.prog, f"unknown option {flag}" + (f" (did you mean {close[0]}?)" if close else "")
    return parser.prog, None


_ROOT_OPTIONS = ("--version", "--debug", "-h", "--help")


def _unknown_command(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """"unknown command 'chek' (did you mean 'check'?)" (after its parent, "tune: unknown command
    'fitt' ...") for the first word in argv that stands where a (sub)command of `parser` (the one
    argparse reports from) belongs and is none; None when every one is known. Why: a misspelt
    command fails on its first option instead (`chek --claim x` said "unknown option --claim"),
    blaming what is right."""
    import difflib

    where = parser.prog.split()[1:]  # "dialcheck tune" → the words argv already went through
    for word in where:
        argv = argv[argv.index(word) + 1:] if word in argv else argv
    while True:
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        word = next((t for t in argv if not t.startswith("-")), None)
        if sub is None or word is None:
            return None
        if word not in sub.choices:
            close = difflib.get_close_matches(word, sorted(sub.choices), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else " (--help lists them)"
            return f"{' '.join(where) + ': ' if where else ''}unknown command '{word}'{hint}"
        where.append(word)
        parser, argv = sub.choices[word], argv[argv.index(word) + 1:]


def _deepest(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.ArgumentParser:
    """The (sub)command parser argv ends up in: argparse reports a subcommand's leftover arguments
    from the top-level parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for token in argv:
                if token in action.choices:
                    return _deepest(action.choices[token], argv[argv.index(token) + 1:])
    return parser


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
    _ARGV[:] = sys.argv[1:] if argv is None else list(argv)
    quiet_libraries()
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


class _LibraryNoise(logging.Filter):
    """Notes meant for a library's developers, not for a dialcheck user."""

    NOTES = (("root", "Please consider"),  # onnxruntime's quantizer, when the E5 export runs
             ("kafka.coordinator.consumer", "group_id is None"))  # a reader without a group (feedback, verdicts)

    def filter(self, record: logging.LogRecord) -> bool:
        return not any(record.name == name and str(record.msg).startswith(text) for name, text in self.NOTES)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time (tests and the scrubber replace it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value):
        pass


def quiet_libraries() -> None:
    """One stderr handler at WARNING for this process: without it a library's first module-level
    `logging.warning()` installs Python's default handler at level NOTSET, after which bm25s (which
    sets its own logger to DEBUG) prints `DEBUG:bm25s:...` lines. The worker's Faust logging is set
    by its own --loglevel."""
    root = logging.getLogger()
    if not any(getattr(h, "_dialcheck", False) for h in root.handlers):
        handler = _StderrHandler()
        handler.setLevel(logging.WARNING)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        handler.addFilter(_LibraryNoise())
        handler._dialcheck = True
        root.addHandler(handler)
    root.setLevel(min(root.level or logging.WARNING, logging.WARNING))
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    # kafka-python's event-loop timing note ("Task ... ran for 0.126s (>0.100s threshold)") on a busy machine
    logging.getLogger("kafka.net.selector").setLevel(logging.ERROR)


def run() -> None:
    """The console script: main(), then a quick exit. The interpreter's own teardown of the loaded
    torch/faust modules took 2-4 s after a demo's Ctrl-C on 2 busy cores; atexit handlers (which
    stop any child process still running) and the stdio flush still run first."""
    import atexit

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
