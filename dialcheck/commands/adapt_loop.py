"""`dialcheck adapt-loop`: adapt, try, promote and roll back the verifier on a schedule (dialcheck/adapt_loop.py).

    dialcheck adapt-loop --model-dir /srv/dialcheck/nli --pid-file /run/dialcheck-worker.pid
    dialcheck adapt-loop --model-dir /srv/dialcheck/nli --promote /srv/dialcheck/nli-new   # by hand, recorded
    dialcheck adapt-loop --model-dir /srv/dialcheck/nli --rollback                          # by hand, recorded

Runs beside the worker (its own process), reads the feedback store (DIALCHECK_FEEDBACK_STORE or
--store) and renames directories beside --model-dir; docs/operations.md "The adaptation loop"."""
from __future__ import annotations

from pathlib import Path

from dialcheck.errors import UsageError


def register(sub) -> None:
    p = sub.add_parser("adapt-loop", help="adapt on a schedule; promote a challenger by rule; roll back on the drift alarm")
    p.add_argument("--model-dir", default=None,
                   help="the live NLI model directory the worker reads (default: DIALCHECK_NLI_MODEL_DIR); "
                        "candidates, previous and retired versions are kept beside it")
    p.add_argument("--store", default=None, help="the feedback store's path or database URL (default: the settings')")
    p.add_argument("--worker-pid", type=int, action="append", default=[], help="a worker to SIGHUP after a rename "
                   "(repeat for several)")
    p.add_argument("--pid-file", action="append", default=[], help="a file holding a worker's pid, read at each "
                   "signal (repeat for several)")
    p.add_argument("--every", default="6h", help="at most one build per this long (90s, 30m, 6h; default 6h)")
    p.add_argument("--check-every", default="60s", help="how often rollback and the waiting challenger are looked "
                   "at (default 60s)")
    p.add_argument("--min-new", type=int, default=50, help="new judged conversations before a build, and before a "
                   "challenger is scored on the judgements that came after it (default 50)")
    p.add_argument("--sources", default="moderator,annotator",
                   help="whose judgements count (default moderator,annotator; user clicks can be wrong or hostile)")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="confidence of the challenger's paired test (one-sided; default 0.95)")
    p.add_argument("--target", type=float, default=None, help="precision the live model's shown badges are held to "
                   "when it certifies none (default DIALCHECK_PRECISION_TARGET)")
    p.add_argument("--adapt", default="", help="more options for `dialcheck adapt`, one string "
                   "(e.g. \"--folds 2 --target 0.8\")")
    p.add_argument("--once", action="store_true", help="one tick (rollback check, challenger, build), then exit")
    p.add_argument("--promote", default=None, metavar="DIR",
                   help="promote DIR by hand (beside --model-dir), recorded like the loop's own, then exit")
    p.add_argument("--rollback", action="store_true",
                   help="put the previous version back by hand, recorded like the loop's own, then exit")
    p.add_argument("--metrics-url", action="append", default=[],
                   help="a worker's /metrics (e.g. http://127.0.0.1:9464/metrics; repeat for several): after a "
                        "switch it must report the new version, else the switch is undone and the loop exits 2")
    p.add_argument("--confirm-within", default="60s", help="how long a worker has to report the new version "
                   "(default 60s)")
    p.add_argument("--protocol", default="e2e", help="the worker's --protocol: whose decision file a candidate is "
                   "checked with (default e2e)")
    p.set_defaults(func=run)


def _pids(args):
    """The workers' pids, read at each switch; a pid file without a pid, or naming a process that is
    not running, is an error (UsageError) before anything moves: a switch no worker hears is not done."""
    import os

    def alive(pid: int, where: str) -> int:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            raise UsageError(f"{where} names pid {pid}, which is not running: start the worker or fix {where}") from None
        except PermissionError:
            pass  # running, as another user
        return pid

    def read() -> list[int]:
        out = [alive(pid, f"--worker-pid {pid}") for pid in args.worker_pid]
        for f in args.pid_file:
            try:
                pid = int(Path(f).read_text().split()[0])
            except (OSError, ValueError, IndexError):
                raise UsageError(f"--pid-file {f}: no pid in it (the worker writes it once it is ready)") from None
            out.append(alive(pid, f"--pid-file {f}"))
        return out
    return read


def stop_on_sigterm() -> None:
    """SIGTERM (systemd, a supervisor, `kill`) stops the loop as Ctrl-C does: the tick in progress is
    abandoned (a build's `adapt` child is killed, its dot folder never picked up), the lock released,
    exit 0. SIGINT alone is not enough: a process started in the background inherits it ignored."""
    import signal

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


def by_hand(loop, args) -> int:
    """`--promote DIR` or `--rollback`: after the running loop's tick, an interrupted switch finished
    first, the same checked, recorded switch as the loop's."""
    with loop.locked(), loop.open_store() as st:
        loop.resume(st)
        if args.rollback:
            version = loop.rollback(st, reason="by hand (adapt-loop --rollback)")
            print(f"rolled back {version}: {loop.layout.live} is {loop.versions.target(loop.layout.live).name} again")
        else:
            version = loop.promote(st, Path(args.promote), reason="by hand (adapt-loop --promote)")
            print(f"promoted {version}: {loop.layout.live} (the one before kept as {loop.layout.previous})")
    return 0


def run(args) -> int:
    from schemas.settings import REPO_ROOT, load_settings

    from dialcheck.adapt_loop import AdaptLoop, Layout, LoopOptions, parse_duration, split_args
    from dialcheck.commands.adapt import _sources

    settings = load_settings()
    live = Path(args.model_dir or settings.models.nli_model_dir).expanduser()
    if live.resolve().is_relative_to((REPO_ROOT / "triton_models").resolve()):
        raise UsageError(f"--model-dir {live} is the source tree's model: copy it to a directory of your own "
                         "(docs/operations.md) and point DIALCHECK_NLI_MODEL_DIR and --model-dir at it")
    if not (live / "model.onnx").is_file():
        raise UsageError(f"--model-dir {live}: no model.onnx (the live NLI model directory)")
    try:
        every, check = parse_duration(args.every), parse_duration(args.check_every)
    except ValueError as e:
        raise UsageError(f"--every / --check-every: {e}") from None
    try:
        confirm = parse_duration(args.confirm_within)
    except ValueError as e:
        raise UsageError(f"--confirm-within: {e}") from None
    if args.min_new < 1:
        raise UsageError(f"--min-new must be at least 1 (got {args.min_new})")
    for name in ("confidence", "target"):
        v = getattr(args, name)
        if v is not None and not 0.0 < v < 1.0:
            raise UsageError(f"--{name} must be between 0 and 1 (got {v})")
    try:
        adapt_args = split_args(args.adapt)
    except ValueError as e:
        raise UsageError(f"--adapt: {e}") from None
    if {"--out", "--base", "--store", "--from-feedback", "--labels", "--sources"} & {a.split("=")[0] for a in adapt_args}:
        raise UsageError("--adapt: the loop sets --from-feedback, --base, --out, --store and --sources itself")
    opts = LoopOptions(every_s=every, check_every_s=max(check, 0.1), min_new=args.min_new, sources=_sources(args.sources),
                       confidence=args.confidence, target=args.target or settings.stream.precision_target,
                       alarm_confidence=settings.stream.precision_confidence, adapt_args=adapt_args,
                       protocol=args.protocol, metrics_urls=tuple(args.metrics_url), confirm_s=confirm)
    store = args.store or settings.stream.feedback_store
    loop = AdaptLoop(Layout(live), store, opts, pids=_pids(args), log=lambda m: print(m, flush=True))
    try:
        if args.promote or args.rollback:
            return by_hand(loop, args)
        print(f"dialcheck adapt-loop on {live}: build every {args.every} after {args.min_new} new judged "
              f"conversations, look every {args.check_every}", flush=True)
        stop_on_sigterm()
        loop.run(once=args.once)
    except KeyboardInterrupt:
        return 0
    return 0
