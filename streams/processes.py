"""Child processes: a free loopback port for them, dying with their parent, and stopping them
politely, then firmly. One rule for the broker, workers, tritonserver and test servers."""
from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
from typing import Callable

_PR_SET_PDEATHSIG = 1


def terminate(proc: subprocess.Popen, grace_s: float, kill_wait_s: float | None = 10.0) -> int | None:
    """SIGTERM, wait `grace_s`, then SIGKILL and reap (waiting `kill_wait_s`, None = as long as it
    takes). A process that already exited is only reaped. Returns its exit status."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=kill_wait_s)
    return proc.returncode


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A `preexec_fn` so the child gets `sig` when the process that started it dies, even by
    SIGKILL (Linux prctl PR_SET_PDEATHSIG). Why: a killed test run, demo or `serve-models` must not
    leave a broker or worker behind. The signal follows the *thread* that started the child, so
    start children from a long-lived thread (the main one)."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here: the child only calls it
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def pre() -> None:
        prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), sig)
    return pre
