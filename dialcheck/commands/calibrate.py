"""`dialcheck calibrate`: certify the display thresholds on labelled traffic (lab/tuning/calibrate.py).

    dialcheck calibrate (--from-feedback | --run RUN.jsonl --labels DATA.jsonl) --target 0.85 \\
        --confidence 0.9 --out DISPLAY.json

The badge scorer of the current display is kept; its show / "high" thresholds are refitted so that,
with probability ≥ confidence, shown badges are right ≥ target on traffic like the labels. The
worker reads the new file on restart when the display-file setting names it
(DIALCHECK_DISPLAY_PARAMS=DISPLAY.json). Nothing certified: one line, exit 2, nothing written; the
line says per badge whether too few badges or the error bound at the first threshold tested stopped
it (n, wrong, bound), and the highest target that would certify something."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from dialcheck.errors import UsageError


def register(sub) -> None:
    p = sub.add_parser("calibrate", help="certify the display thresholds on labelled verdicts (feedback or a run file)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--from-feedback", action="store_true",
                     help="the judged verdicts in the feedback store (DIALCHECK_FEEDBACK_STORE, or --store)")
    src.add_argument("--run", default=None, help="a run file of `dialcheck eval --output` (with --labels)")
    src.add_argument("--yardstick", action="store_true", help=argparse_help_yardstick())
    p.add_argument("--labels", default=None, help="with --run: DialFact-format JSONL (`id`, `response_label`: three-way, or binary "
                   "SUPPORTS / NOT SUPPORTS; a REFUTES against 'not supported' is not counted wrong)")
    p.add_argument("--surface", default=None, help="with --run: the run file's surface to read (when it holds several)")
    p.add_argument("--store", default=None, help="with --from-feedback: the store's path or database URL")
    p.add_argument("--target", type=float, default=0.85, help="least share of shown badges that are right (default 0.85)")
    p.add_argument("--high-target", type=float, default=None, help="the same for 'high' badges (default target + 0.05)")
    p.add_argument("--confidence", type=float, default=0.9, help="probability the guarantee holds (default 0.9)")
    p.add_argument("--display", default=None, help="the display whose scorer is kept (default: the settings' display file)")
    p.add_argument("--out", default=None, help="the certified display JSON to write (the runtime's format)")
    p.add_argument("--limit-per-set", type=int, default=500, help="--yardstick: at most N claims per set (default 500)")
    p.add_argument("--json", action="store_true", help="print the certified section (or --yardstick's report) as JSON")
    p.set_defaults(func=run)


def argparse_help_yardstick() -> str:
    return ("the yardstick's report instead: the shipped display certified on the chat-response sets with each set "
            "left out, split-half transfer, the LODO table (writes --out as JSON)")


def _check_targets(args) -> None:
    """--target, --confidence, --high-target: checked by every mode before any set is read."""
    for name in ("target", "confidence"):
        v = getattr(args, name)
        if not 0.0 < v < 1.0:
            raise UsageError(f"--{name.replace('_', '-')} must be between 0 and 1 (got {v})")
    if args.high_target is not None and not args.target <= args.high_target < 1.0:
        raise UsageError(f"--high-target must be at least --target and below 1 (got {args.high_target})")


def _check(args) -> None:
    _check_targets(args)
    if args.run and not args.labels:
        raise UsageError("--run needs --labels DATA.jsonl (DialFact format: `id`, `response_label`)")
    if args.labels and not args.run:
        raise UsageError("--labels goes with --run RUN.jsonl")
    for opt in ("run", "labels", "display"):
        path = getattr(args, opt)
        if path and not Path(path).is_file():
            raise UsageError(f"--{opt} {path}: no such file")
    if not args.out:
        raise UsageError("--out is required: where to write the certified display (DISPLAY.json)")
    if Path(args.out).is_dir():
        raise UsageError(f"--out {args.out} is a directory: name the display file to write (DISPLAY.json)")


def _base_display(args):
    from schemas.settings import load_settings

    if args.display:
        return _load_display(args.display), args.display
    from workers.display import load_display

    settings = load_settings()
    try:
        policy = load_display(settings.decision)
    except (ValueError, KeyError, TypeError, AttributeError) as e:  # UnicodeDecodeError is a ValueError
        raise UsageError(f"the display file {settings.decision.display_params} (DIALCHECK_DISPLAY_PARAMS) is not a "
                         f"display JSON file ({type(e).__name__})") from None
    if policy is None or policy.scorer is None:
        raise UsageError("the settings name no fitted display with a badge scorer: pass --display PATH")
    return policy, settings.decision.display_params


def _load_display(path: str):
    """--display PATH as a DisplayPolicy, or one line saying why it is not one."""
    from workers.display import DisplayPolicy

    try:
        return DisplayPolicy.load(path)
    except UnicodeDecodeError:
        raise UsageError(f"--display {path}: not a display JSON file (not UTF-8 text)") from None
    except KeyError as e:
        raise UsageError(f"--display {path}: not a display JSON file (no {e} field)") from None
    except ValueError as e:  # not JSON, or not the display format (it says which)
        raise UsageError(f"--display {path}: not a display JSON file ({str(e).splitlines()[0]})") from None
    except (TypeError, AttributeError):
        raise UsageError(f"--display {path}: not a display JSON file (not an object of the display format)") from None


def _write(path: str, write) -> None:
    try:
        write()
    except OSError as e:
        raise UsageError(f"--out {path}: cannot write it ({e.strerror or type(e).__name__})") from None


def run(args) -> int:
    if args.yardstick:
        return run_yardstick(args)
    _check(args)
    from lab.tuning.calibrate import certify_policy, from_feedback, from_run, write_display

    policy, base = _base_display(args)
    try:
        if args.run:
            rows, data = from_run(policy, args.run, args.labels, args.surface)
        else:
            rows, data = from_feedback(policy, _store(args))
    except ValueError as e:
        raise UsageError(str(e)) from None
    data["display"] = Path(base).name
    certified_policy, certified = certify_policy(policy, rows, args.target, args.confidence, args.high_target, data)
    _write(args.out, lambda: write_display(args.out, certified_policy, certified))
    if args.json:
        print(json.dumps(certified, indent=1))
    else:
        for label, c in certified["labels"].items():
            shown = (f"shown from score {c['threshold']:.2f}: {c['n']} badges, {100 * c['precision']:.1f} % right, "
                     f"≥ {100 * c['precision_lower']:.1f} % at {args.confidence:.0%} confidence"
                     if c["threshold"] is not None else f"not certified ({c['badges']} labelled badges): never shown")
            print(f"{label}: {shown}")
        print(f"coverage {certified['coverage']} % of {certified['claims']} labelled claims; wrote {args.out} "
              f"(the worker reads it on restart with DIALCHECK_DISPLAY_PARAMS={args.out})")
    return 0


def _store(args):
    from schemas.settings import load_settings

    try:
        from streams.feedback_store import FeedbackStore
    except ModuleNotFoundError:
        raise UsageError("--from-feedback: this build has no feedback store (streams/feedback_store.py)") from None
    from schemas.settings.stream import feedback_off

    where = args.store or load_settings().stream.feedback_store  # the one default: DIALCHECK_FEEDBACK_STORE
    if feedback_off(where):
        raise UsageError("--from-feedback: the feedback store is off (DIALCHECK_FEEDBACK_STORE=off): name one with --store")
    if "://" not in str(where) and not Path(where).is_file():
        raise UsageError(f"--from-feedback: no feedback store at {where} (import labels with `dialcheck feedback import`)")
    return FeedbackStore(where)  # StoreUnavailable: one line, its URL without the password


def run_yardstick(args) -> int:
    from lab.tuning.calibrate import yardstick_report

    _check_targets(args)
    if args.display and not Path(args.display).is_file():
        raise UsageError(f"--display {args.display}: no such file")
    if args.display:
        _load_display(args.display)  # a bad file is one line before the sets are read
    if args.out and Path(args.out).is_dir():
        raise UsageError(f"--out {args.out} is a directory: name the report file to write (REPORT.json)")
    try:
        report = yardstick_report(args.limit_per_set, args.target, args.confidence, args.high_target,
                                  display=args.display)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.out:
        def write() -> None:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
        _write(args.out, write)
    print(json.dumps(report, indent=1) if args.json or not args.out else f"wrote {args.out}", file=sys.stdout)
    return 0
