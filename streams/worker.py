"""Run the Faust worker in this process, or supervise one as a child process.

Why a child process for the demo, the tests and the benchmark: Faust owns its event loop and
signal handlers, a crash test needs something to `kill -9`, and the parent stays free to produce
and consume.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from schemas.protocols import Checker
from schemas.settings import REPO_ROOT, Settings

from .app import READY_MARKER, create_app, feedback_enabled
from .reload import remove_pid_file
from .broker import track
from .kafka.internals import QuietWorker
from .processes import die_with_parent, terminate
from .observability import logging_config
from .topics import ensure_topics, knowledge_mismatch, partition_count
from .turn_worker import STATUS_MARKER


def freeze_startup_heap() -> None:
    """Move everything alive now (models, tokenizers, spaCy, Faust, aiokafka: about half a million
    objects) out of the garbage collector's sight. Why: a full collection scans every tracked object
    while holding the GIL, and one came every ~190 claims, stopping checker and event loop for
    0.25 s (bench/bench_stream.py; docs/results.md). These objects live as long as the process."""
    import gc

    gc.collect()
    gc.freeze()


def run_worker(settings: Settings, checker: Checker, loglevel: str = "info") -> int:
    """Blocks until SIGTERM/SIGINT; the topics are created first so their partition counts match.
    The display policy is the checker's, loaded when it was built: a new display file is picked up on
    restart, or on SIGHUP by a checker that can reload it (streams/reload.py)."""
    ensure_topics(settings)
    # an existing chat.turns may have another partition count: the changelog must match it
    n = partition_count(settings, settings.kafka.topic_turns)
    if n and n != settings.kafka.topic_partitions:
        settings = settings.updated(kafka={"topic_partitions": n})
    if (why := knowledge_mismatch(settings, settings.kafka.topic_partitions)) is not None:
        print(f"dialcheck: {why}", file=sys.stderr, flush=True)
        return 2
    store = None
    if feedback_enabled(settings):  # a bad store is one line before the worker joins its group
        from schemas.settings import redact

        from .feedback_store import FeedbackStore, StoreUnavailable

        try:
            store = FeedbackStore(settings.stream.feedback_store, busy_timeout_s=settings.stream.feedback_busy_timeout_s)
        except StoreUnavailable as e:
            print(f"dialcheck: {redact(str(e))}", file=sys.stderr, flush=True)  # names the setting
            return 2
        print(f"feedback store: {store.public_url} (DIALCHECK_FEEDBACK_STORE; chat.feedback → judgements)", flush=True)
    app = create_app(settings, checker, store=store)
    app.obs.serve()  # /metrics, /healthz, /readyz from now on (streams/observability.py)
    worker = QuietWorker(app, loglevel=loglevel, quiet=True, redirect_stdouts=False,
                            logging_config=logging_config(settings, loglevel))
    freeze_startup_heap()
    try:
        worker.execute_from_commandline()
    except SystemExit as e:
        return int(e.code or 0)
    finally:
        remove_pid_file(settings.stream.pid_file)
    return 0


def settings_env(settings: Settings) -> dict[str, str]:
    """The DIALCHECK_* environment that reproduces `settings` in a child process."""
    return settings.env()


class WorkerProcess:
    """`dialcheck worker` as a child process, its output in a log file we can wait on."""

    def __init__(self, settings: Settings, log_path: str | Path, extra_args: list[str] | None = None,
                 env: dict[str, str] | None = None):
        assert settings.kafka.bootstrap, "a child worker needs an explicit broker"
        self.settings = settings
        self.log_path = Path(log_path)
        self.extra_args = extra_args or []
        self.env = env or {}
        self.proc: subprocess.Popen | None = None
        self._log_start = 0

    def start(self) -> "WorkerProcess":
        # children bind /metrics on a free port (several workers per host in tests); the log says which
        env = {**os.environ, **settings_env(self.settings), "DIALCHECK_METRICS_PORT": "0", **self.env}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            # SIGKILL if we die: a SIGTERMed worker hangs in shutdown when the broker died with us, and a
            # kill costs at most duplicates (nothing undelivered was acked)
            self.proc = subprocess.Popen([sys.executable, "-u", "-m", "dialcheck.cli", "worker", *self.extra_args],
                                         cwd=str(REPO_ROOT), env=env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, preexec_fn=die_with_parent(signal.SIGKILL))
        track(self)
        return self

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def log_text(self) -> str:
        """This run's part of the log."""
        with open(self.log_path, "rb") as f:
            f.seek(self._log_start)
            return f.read().decode("utf-8", "replace")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_for(self, marker: str, timeout_s: float) -> str:
        """Wait until `marker` appears in this run's log; return the line. Raises if the worker
        died; on a timeout (or Ctrl-C) the worker is stopped first, so a failed wait leaks nothing."""
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                for line in self.log_text().splitlines():
                    if marker in line:
                        return line
                if not self.alive():
                    raise RuntimeError(f"worker exited ({self.proc.returncode}) before {marker!r}; log tail:\n"
                                       + self.log_text()[-3000:])
                time.sleep(0.2)
            raise TimeoutError(f"no {marker!r} in the worker log within {timeout_s}s; tail:\n{self.log_text()[-3000:]}")
        except BaseException:
            self.stop()
            raise

    def wait_ready(self, timeout_s: float = 180.0) -> str:
        return self.wait_for(READY_MARKER, timeout_s)

    def last_status(self) -> dict[str, int | str] | None:
        """The last status line as {counter: int}; `partitions` stays a string ("0,2" or "-")."""
        lines = [ln for ln in self.log_text().splitlines() if STATUS_MARKER in ln]
        if not lines:
            return None
        pairs = (kv.split("=", 1) for kv in lines[-1].split(":", 1)[1].split() if "=" in kv)
        return {k: int(v) if v.lstrip("-").isdigit() else v for k, v in pairs}

    def owned_partitions(self) -> set[int] | None:
        st = self.last_status()
        if st is None:
            return None
        return {int(p) for p in str(st.get("partitions", "-")).split(",") if p.isdigit()}

    def kill9(self) -> None:
        """A crash: no shutdown, no final commit, no flush."""
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self, timeout_s: float = 30.0) -> int | None:
        if self.proc is None:
            return None
        return terminate(self.proc, grace_s=timeout_s)

    def __enter__(self) -> "WorkerProcess":
        return self.start()

    def __del__(self) -> None:  # a forgotten worker is not left running
        try:
            if self.alive():
                self.proc.kill()
        except Exception:  # noqa: BLE001
            pass

    def __exit__(self, *exc) -> None:
        self.stop()
