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

from .app import READY_MARKER, STATUS_MARKER, create_app
from .topics import ensure_topics, partition_count


def run_worker(settings: Settings, checker: Checker, loglevel: str = "info") -> int:
    """Blocks until SIGTERM/SIGINT; the topics are created first so their partition counts match."""
    import faust

    ensure_topics(settings)
    # an existing chat.turns may have another partition count: the changelog must match it
    n = partition_count(settings, settings.kafka.topic_turns)
    if n and n != settings.kafka.topic_partitions:
        settings = settings.updated(kafka={"topic_partitions": n})
    app = create_app(settings, checker)
    worker = faust.Worker(app, loglevel=loglevel, quiet=True, redirect_stdouts=False)
    try:
        worker.execute_from_commandline()
    except SystemExit as e:
        return int(e.code or 0)
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
        env = {**os.environ, **settings_env(self.settings), **self.env}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-u", "-m", "dialcheck.cli", "worker", *self.extra_args],
                                         cwd=str(REPO_ROOT), env=env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        return self

    def log_text(self) -> str:
        """This run's part of the log."""
        with open(self.log_path, "rb") as f:
            f.seek(self._log_start)
            return f.read().decode("utf-8", "replace")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_for(self, marker: str, timeout_s: float) -> str:
        """Wait until `marker` appears in this run's log; return the line. Raises if the worker died."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for line in self.log_text().splitlines():
                if marker in line:
                    return line
            if not self.alive():
                raise RuntimeError(f"worker exited ({self.proc.returncode}) before {marker!r}; log tail:\n"
                                   + self.log_text()[-3000:])
            time.sleep(0.2)
        raise TimeoutError(f"no {marker!r} in the worker log within {timeout_s}s; tail:\n{self.log_text()[-3000:]}")

    def wait_ready(self, timeout_s: float = 180.0) -> str:
        return self.wait_for(READY_MARKER, timeout_s)

    def last_status(self) -> dict[str, int] | None:
        lines = [ln for ln in self.log_text().splitlines() if STATUS_MARKER in ln]
        if not lines:
            return None
        return {k: int(v) for k, v in (kv.split("=", 1) for kv in lines[-1].split(":", 1)[1].split())}

    def kill9(self) -> None:
        """A crash: no shutdown, no final commit, no flush."""
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self, timeout_s: float = 30.0) -> int | None:
        if self.proc is None:
            return None
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return self.proc.returncode

    def __enter__(self) -> "WorkerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
