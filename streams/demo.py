"""`dialcheck demo`: the whole streaming path on one machine, start to finish, then a summary.

Embedded broker (unless one is configured) → `dialcheck worker` child process → replay of N
DialFact records (protocol "fv": each reply carrying its record's evidence) plus a few deliberately
bad events → verdicts collected and deduplicated, dead letters counted → metrics against the
records' gold labels. Everything it started, it stops: the broker and the worker on every exit path
(and, if this process is killed, they get a signal from the kernel: streams.broker.die_with_parent),
and its temp dir is removed.
"""
from __future__ import annotations

import collections
import contextlib
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from schemas.settings import Settings

from .broker import kafka_for
from .replay import TurnProducer, iter_claim_ids, load_records, replay
from .topics import ensure_topics
from .verdicts import VerdictLog, collect_verdicts, end_offsets, read_dead_letters
from .worker import WorkerProcess

# (key, value) pairs that must each land in the dead-letter topic
DEMO_BAD_EVENTS: list[tuple[bytes | None, bytes]] = [
    (b"demo-bad-1", b'{"conversation_id": "demo-bad-1", "turn_id": "t1", "speaker": "assistant", "text": '),
    (b"demo-bad-2", b'{"conversation_id": "demo-bad-2", "turn_id": "t1", "speaker": "assistant", "text": "   "}'),
]
DEADLETTER_NOTE = ("intentional: the demo also sends a truncated JSON turn and a blank turn, to show that bad "
                   "input goes to chat.deadletter with a reason instead of stopping the stream")
READY_TIMEOUT_S = 600.0  # model loading on a busy 2-core machine


def latency_summary(sent_at: dict[str, float], received_at: dict[str, float]) -> dict:
    """produce→verdict latency (the demo's consumer clock, seconds) and claims/s over the run."""
    import statistics

    pairs = [(sent_at[c], received_at[c]) for c in received_at if c in sent_at]
    if not pairs:
        return {}
    lat = sorted(r - s for s, r in pairs)
    span = max(r for _, r in pairs) - min(s for s, _ in pairs)
    q = statistics.quantiles(lat, n=20, method="inclusive") if len(lat) > 1 else [lat[0]] * 19
    return {"latency_p50_s": round(statistics.median(lat), 2), "latency_p95_s": round(q[18], 2),
            "latency_max_s": round(lat[-1], 2), "claims_per_second": round(len(pairs) / span, 2) if span > 0 else None}


def run_demo(settings: Settings, data: str, n_records: int, pipeline: str | None = None,
             bad_events: bool = True, progress: bool = False, work_dir: str | None = None,
             timeout_s: float | None = None, score: Callable[[dict, list], dict] | None = None,
             ui_port: int | None = None, protocol: str = "e2e") -> dict:
    """`score(verdicts by claim id, records)` gives the summary's metrics (the CLI passes the
    evaluator's scoring; streams/ does not import it). `ui_port` (0: any free port) also serves
    `dialcheck ui` on the demo's broker from before the replay, and keeps everything running
    after the verdicts are in until Ctrl-C, so the page can be looked at. `protocol` "fv" replays
    grounded turns (streams/replay.py) to the same default worker: `score` then gives what `dialcheck
    eval --protocol fv` gives on the same records."""
    records = load_records(data, n_records)
    expected = set(iter_claim_ids(records))
    bad = DEMO_BAD_EVENTS if bad_events else []
    own_dir = work_dir is None  # a temp dir of ours is removed whatever happens; a given one is kept
    work = Path(work_dir or tempfile.mkdtemp(prefix="dialcheck-demo-"))
    t0 = time.monotonic()
    say = (lambda msg: print(f"demo: {msg}", file=sys.stderr, flush=True)) if progress else (lambda msg: None)
    try:
        with kafka_for(settings, log_path=str(work / "broker.log")) as s, contextlib.ExitStack() as stack:
            say(f"broker at {s.kafka.bootstrap}" + (" (embedded, memory storage; gone when the demo ends)"
                                                    if not settings.kafka.bootstrap else ""))
            ensure_topics(s)
            ui = _start_ui(stack, s, ui_port) if ui_port is not None else None
            v_start, d_start = end_offsets(s, s.kafka.topic_verdicts), end_offsets(s, s.kafka.topic_deadletter)
            worker = WorkerProcess(s, work / "worker.log", extra_args=["--pipeline", pipeline] if pipeline else [])
            # Ctrl-C (or any error) stops the worker at once: nothing of the demo outlives it, and a
            # SIGKILL costs at most repeated verdicts (nothing undelivered was acknowledged)
            stack.callback(worker.stop, 0.2)
            worker.start()
            say("worker loading models (the first run of the day takes longest) ...")
            t_ready = time.monotonic()
            _wait_ready(worker, READY_TIMEOUT_S)
            ready_s = round(time.monotonic() - t_ready, 1)
            say(f"worker ready in {ready_s} s; replaying {len(records)} records"
                + (f" and {len(bad)} deliberately bad turns" if bad else ""))
            with TurnProducer(s) as producer:
                stats = replay(s, records, rate=0, progress=False, producer=producer, protocol=protocol)
                for key, value in bad:
                    producer.send_raw(key, value)
            vlog = VerdictLog()
            bar = _verdict_bar(len(expected)) if progress else None
            try:
                vlog = collect_verdicts(s, expected, timeout_s or 180 + 10 * len(records), start=v_start, log=vlog,
                                        alive=lambda: _tick(bar, vlog, expected) and worker.alive())
            finally:
                if bar is not None:
                    _tick(bar, vlog, expected)
                    bar.close()
            dead = read_dead_letters(s, d_start)
            deadline = time.monotonic() + 30
            while len(dead) < len(bad) and worker.alive() and time.monotonic() < deadline:
                time.sleep(1)
                dead = read_dead_letters(s, d_start)
            worker_alive = worker.alive()
            log_tail = worker.log_text()[-2000:]
            if ui is not None:
                _hold(ui, vlog)  # until Ctrl-C: then out fast (the callback's short stop)
            elif settings.kafka.bootstrap:
                worker.stop()  # a broker that outlives us: let the worker commit its offsets
            broker = "embedded" if not settings.kafka.bootstrap else s.kafka.bootstrap
            broker_address = s.kafka.bootstrap
    finally:
        if own_dir:
            shutil.rmtree(work, ignore_errors=True)
    got = {k: v for k, v in vlog.verdicts.items() if k in expected}
    summary = {
        "records": len(records), "protocol": protocol, "claims": len(expected), "verdicts": len(got),
        "missing": len(expected - got.keys()), "duplicates_dropped": vlog.duplicates,
        "off_schema_verdicts": len(vlog.schema_errors), "unreadable_verdicts": vlog.invalid,
        "deadletter": len(dead), "deadletter_expected": len(bad),
        "deadletter_reasons": [d.reason for d in dead], "deadletter_note": DEADLETTER_NOTE if bad else None,
        "status": dict(collections.Counter(v.status.state for v in got.values())),
        "metrics": score(got, records) if score else {}, "broker": broker, "broker_address": broker_address,
        "worker_ready_s": ready_s,
        # produce→verdict as a chat app sees it: the turn's send time to its verdict's arrival here
        # (all claims are sent at once, so later claims also wait for the batches before them)
        **latency_summary(stats.sent_at, {c: t for c, t in vlog.received_at.items() if c in got}),
        "elapsed_s": round(time.monotonic() - t0, 1),
        **({"work_dir": str(work)} if not own_dir else {}),
    }
    summary["ok"] = summary["missing"] == 0 and summary["deadletter"] == len(bad)
    if not summary["ok"]:
        summary["worker_alive"] = worker_alive
        summary["worker_log_tail"] = log_tail
    return summary


def _wait_ready(worker: WorkerProcess, timeout_s: float) -> None:
    """WorkerProcess.wait_ready without its 30 s graceful stop on Ctrl-C: the demo's own exit
    stack stops the worker in 0.2 s."""
    from .app import READY_MARKER

    deadline = time.monotonic() + timeout_s
    while READY_MARKER not in worker.log_text():
        if not worker.alive():
            raise RuntimeError(f"the demo's worker exited before it was ready; log tail:\n{worker.log_text()[-3000:]}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the demo's worker was not ready within {timeout_s:g} s; log tail:\n{worker.log_text()[-3000:]}")
        time.sleep(0.2)


def _verdict_bar(total: int):
    from tqdm import tqdm

    return tqdm(total=total, desc="verdicts", unit="claim", file=sys.stderr, dynamic_ncols=True)


def _tick(bar, vlog: VerdictLog, expected: set[str]) -> bool:
    """Move the verdict bar to the claims collected so far (called between polls); always True."""
    if bar is not None:
        n = sum(1 for c in vlog.verdicts if c in expected)
        if n > bar.n:
            bar.update(n - bar.n)
    return True


def _start_ui(stack: contextlib.ExitStack, settings: Settings, port: int):
    import webbrowser

    from .ui import UIServer

    ui = stack.enter_context(UIServer(settings, settings.ui.host, port, settings.ui.max_conversations))
    print(f"dialcheck ui at {ui.url}", file=sys.stderr, flush=True)
    try:
        webbrowser.open(ui.url)
    except Exception:  # noqa: BLE001 - no browser here: the URL is printed
        pass
    return ui


def _hold(ui, vlog: VerdictLog) -> None:
    """Keep broker, worker and ui up for the person looking at the page, until Ctrl-C or SIGTERM
    (both end here, so the with-blocks still stop the worker and the broker)."""
    import signal

    def interrupt(*_):
        raise KeyboardInterrupt

    # a shell that starts us in the background ignores SIGINT for us: take it back
    old = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    print(f"demo: {len(vlog.verdicts)} verdicts in; the page stays at {ui.url} until Ctrl-C", file=sys.stderr, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
