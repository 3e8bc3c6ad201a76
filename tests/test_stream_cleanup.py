"""Nothing outlives the process that started it: brokers, workers and tritonserver are stopped on
every failure path, and temp dirs are removed.

Why: a failed `wait_ready`, a SIGKILLed `serve-models` and a timed-out demo used to leave servers
running (and holding ports and memory) after the test or command was gone. Workers here run the
model-free stand-in Checker of tests/stream_standin.py: only process handling is under test.
"""
from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from schemas.settings import REPO_ROOT, load_settings
from streams.processes import free_port
from streams.demo import run_demo
from streams.worker import WorkerProcess

STANDIN = "tests.stream_standin:create"


def children(pid: int) -> set[int]:
    """Live descendants of `pid`, from /proc."""
    parent_of = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
            parent_of[int(stat.split("/")[2])] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue
    out, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, pp in parent_of.items() if pp in frontier} - out
        out |= frontier
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except OSError:
        return False


def wait_gone(pids: set[int], timeout_s: float = 30.0) -> set[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.2)
    return {p for p in pids if alive(p)}


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k != "DIALCHECK_KAFKA_BOOTSTRAP"}
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), e.get("PYTHONPATH", "")]))
    return e


@pytest.mark.broker
def test_failed_wait_ready_stops_the_worker(tmp_path):
    s = load_settings(kafka={"bootstrap": f"127.0.0.1:{free_port()}"})  # nobody listens there
    w = WorkerProcess(s, tmp_path / "w.log", extra_args=["--pipeline", STANDIN]).start()
    pid = w.pid
    with pytest.raises(TimeoutError):
        w.wait_ready(timeout_s=1.0)
    assert not wait_gone({pid}, 10)


@pytest.mark.broker
def test_timed_out_demo_stops_broker_and_worker_and_removes_its_temp_dir():
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "dialcheck-demo-*")))
    s = load_settings(kafka={"bootstrap": ""})
    summary = run_demo(s, s.data.dialfact_sample, 3, pipeline=STANDIN, timeout_s=0.1)
    assert not summary["ok"] or summary["verdicts"] == 3  # 0.1 s: normally too short for every verdict
    assert not wait_gone(children(os.getpid()), 30), "the demo left processes behind"
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "dialcheck-demo-*"))) == before


@pytest.mark.broker
def test_sigkilled_demo_takes_its_broker_and_worker_with_it():
    proc = subprocess.Popen([sys.executable, "-m", "dialcheck.cli", "demo", "--records", "3", "--json",
                             "--pipeline", STANDIN], cwd=str(REPO_ROOT), env=env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while len(children(proc.pid)) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        kids = children(proc.pid)
        assert len(kids) >= 2, "demo did not start a broker and a worker"
    finally:
        proc.kill()
        proc.wait()
    assert not wait_gone(kids, 30), "broker or worker outlived the SIGKILLed demo"


@pytest.mark.model
def test_sigkilled_serve_models_takes_tritonserver_with_it(tmp_path):
    repo = tmp_path / "empty_repository"
    repo.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "dialcheck.cli", "serve-models", "--model-repository", str(repo),
                             "--log", str(tmp_path / "triton.log"), "--startup-timeout", "120"], cwd=str(REPO_ROOT),
                            env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert "Triton ready" in proc.stdout.readline() or "Triton ready" in (tmp_path / "triton.log").read_text()
        kids = children(proc.pid)
        assert kids, "no tritonserver child"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert not wait_gone(kids, 30), "tritonserver outlived the SIGKILLed serve-models"
