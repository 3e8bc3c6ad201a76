"""`dialcheck demo`: the whole streaming path on one machine, start to finish, then a summary.

Embedded broker (unless one is configured) → `dialcheck worker` child process → replay of N
DialFact records plus a few deliberately bad events → verdicts collected and deduplicated, dead
letters counted → metrics against the records' gold labels. Everything it started, it stops: the
broker and the worker on every exit path (and, if this process is killed, they get a signal from
the kernel: streams.broker.die_with_parent), and its temp dir is removed.
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


def run_demo(settings: Settings, data: str, n_records: int, pipeline: str | None = None,
             bad_events: bool = True, progress: bool = False, work_dir: str | None = None,
             timeout_s: float | None = None, score: Callable[[dict, list], dict] | None = None,
             ui_port: int | None = None) -> dict:
    """`score(verdicts by claim id, records)` gives the summary's metrics (the CLI passes the
    evaluator's scoring; streams/ does not import it). `ui_port` (0: any free port) also serves
    `dialcheck ui` on the demo's broker from before the replay, and keeps everything running
    after the verdicts are in until Ctrl-C, so the page can be looked at."""
    records = load_records(data, n_records)
    expected = set(iter_claim_ids(records))
    bad = DEMO_BAD_EVENTS if bad_events else []
    own_dir = work_dir is None  # a temp dir of ours is removed whatever happens; a given one is kept
    work = Path(work_dir or tempfile.mkdtemp(prefix="dialcheck-demo-"))
    t0 = time.monotonic()
    try:
        with kafka_for(settings, log_path=str(work / "broker.log")) as s, contextlib.ExitStack() as stack:
            ensure_topics(s)
            ui = _start_ui(stack, s, ui_port) if ui_port is not None else None
            v_start, d_start = end_offsets(s, s.kafka.topic_verdicts), end_offsets(s, s.kafka.topic_deadletter)
            with WorkerProcess(s, work / "worker.log", extra_args=["--pipeline", pipeline] if pipeline else []) as worker:
                with TurnProducer(s) as producer:
                    replay(s, records, rate=0, progress=progress, producer=producer)
                    for key, value in bad:
                        producer.send_raw(key, value)
                vlog = collect_verdicts(s, expected, timeout_s or 180 + 10 * len(records), start=v_start,
                                        alive=worker.alive)
                dead = read_dead_letters(s, d_start)
                deadline = time.monotonic() + 30
                while len(dead) < len(bad) and worker.alive() and time.monotonic() < deadline:
                    time.sleep(1)
                    dead = read_dead_letters(s, d_start)
                worker_alive = worker.alive()
                log_tail = worker.log_text()[-2000:]
                if ui is not None:
                    _hold(ui, vlog)
            broker = "embedded" if not settings.kafka.bootstrap else s.kafka.bootstrap
    finally:
        if own_dir:
            shutil.rmtree(work, ignore_errors=True)
    got = {k: v for k, v in vlog.verdicts.items() if k in expected}
    summary = {
        "records": len(records), "claims": len(expected), "verdicts": len(got),
        "missing": len(expected - got.keys()), "duplicates_dropped": vlog.duplicates,
        "off_schema_verdicts": len(vlog.schema_errors), "unreadable_verdicts": vlog.invalid,
        "deadletter": len(dead), "deadletter_expected": len(bad),
        "deadletter_reasons": [d.reason for d in dead],
        "status": dict(collections.Counter(v.status.state for v in got.values())),
        "metrics": score(got, records) if score else {}, "broker": broker, "elapsed_s": round(time.monotonic() - t0, 1),
        **({"work_dir": str(work)} if not own_dir else {}),
    }
    summary["ok"] = summary["missing"] == 0 and summary["deadletter"] == len(bad)
    if not summary["ok"]:
        summary["worker_alive"] = worker_alive
        summary["worker_log_tail"] = log_tail
    return summary


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
