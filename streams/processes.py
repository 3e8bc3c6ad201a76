"""Stopping a child process politely, then firmly: one rule for the broker, workers and test servers."""
from __future__ import annotations

import subprocess


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
