"""The outage rehearsal of docs/operations.md, run for real: a worker process beside its own Tansu
broker, through a worker kill -9, a broker freeze, a broker stop and a broker that comes back
without its data.

What must hold (operations issue, "Broker outages said plainly"):
- kill -9 and freeze (the broker keeps its data): no input is lost, and the worker is ready (or
  checking again) within a bound;
- frozen: /healthz is not 200 within its timeout (it asks Kafka, not the port);
- stopped: the worker writes a few lines of its own, not the client library's flood, and says when
  the broker is away;
- back without its data (Tansu's memory storage restarted): one line saying so, exit 3; a restart
  without the reset never hangs (it recovers, or says why past `recovery_timeout_s` and exits 3);
  `dialcheck worker --reset-state` and a fresh start are ready again within a bound.

The stand-in checker (tests/stream_standin.py): only the Kafka wiring is under test.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from schemas import ChatTurn, claim_id
from schemas.settings import load_settings
from streams.broker import EmbeddedBroker
from streams.observability import METRICS_MARKER
from streams.recovery import EXIT_RECOVERY
from streams.replay import TurnProducer
from streams.topics import ensure_topics
from streams.verdicts import collect_verdicts, end_offsets
from streams.worker import WorkerProcess, settings_env
from tests.waiting import wait_until

pytestmark = pytest.mark.broker

STANDIN = ["--pipeline", "tests.stream_standin:create"]
READY_BOUND_S = 120  # a restarted worker is ready (or a thawed one checking) within this


def _health(base: str) -> int:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def _metric(base: str, name: str) -> float:
    with urllib.request.urlopen(f"{base}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{}"):
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not on /metrics")


def _turns(tag: str, n: int = 3) -> tuple[list[ChatTurn], set[str]]:
    turns = [ChatTurn(f"{tag}-{i}", f"{tag}-{i}#r", "assistant", f"{tag} claim {i}.", check=True) for i in range(n)]
    return turns, {claim_id(t.conversation_id, t.turn_id, t.text) for t in turns}


def _send(settings, turns) -> None:
    with TurnProducer(settings) as producer:
        for t in turns:
            producer.send_turn(t)
        producer.flush()


def _start(settings, log) -> tuple[WorkerProcess, str]:
    w = WorkerProcess(settings, log, extra_args=STANDIN).start()
    w.wait_ready(READY_BOUND_S)
    line = w.wait_for(METRICS_MARKER, timeout_s=30)
    return w, line.split(METRICS_MARKER, 1)[1].strip().rsplit("/metrics", 1)[0]


@pytest.mark.timeout(900)
def test_outage_rehearsal_kill_freeze_stop_and_data_loss(tmp_path):
    broker = EmbeddedBroker(log_path=str(tmp_path / "tansu.log")).start()
    s = load_settings(kafka={"bootstrap": broker.bootstrap, "topic_partitions": 2},
                      stream={"app_id": "rehearsal", "status_interval_s": 1.0, "metrics_port": 0,
                              "state_dir": str(tmp_path / "state")})
    ensure_topics(s)
    log = tmp_path / "worker.log"
    w = None
    try:
        w, base = _start(s, log)

        # 1. kill -9: the turns sent while it is dead are checked by the next worker
        w.kill9()
        turns, want = _turns("kill")
        start = end_offsets(s, s.kafka.topic_verdicts)
        _send(s, turns)
        w, base = _start(s, log)
        assert want <= collect_verdicts(s, want, READY_BOUND_S, start=start, alive=w.alive).verdicts.keys()

        # 2. freeze: /healthz says 503 within its 2 s question; nothing sent before it is lost
        turns, want = _turns("freeze")
        start = end_offsets(s, s.kafka.topic_verdicts)
        _send(s, turns)
        os.kill(broker.proc.pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            assert _health(base) == 503 and time.monotonic() - t0 < 8
            time.sleep(8)
        finally:
            os.kill(broker.proc.pid, signal.SIGCONT)
        assert want <= collect_verdicts(s, want, READY_BOUND_S, start=start, alive=w.alive).verdicts.keys()
        wait_until(lambda: _health(base) == 200, 30, "/healthz not 200 after the thaw")

        # 3. stop: a few lines of the worker's own, no flood from the client library
        before = len(w.log_text().splitlines())
        broker.stop()
        time.sleep(15)  # the client library alone logs ~55 lines a second with the broker gone
        during = w.log_text().splitlines()[before:]
        assert w.alive() and _health(base) == 503 and _metric(base, "dialcheck_broker_up") == 0
        assert sum("broker not answering" in ln for ln in during) == 1, during
        assert len(during) <= 12, f"{len(during)} lines in 15 s with the broker stopped:\n" + "\n".join(during[-20:])
        assert _metric(base, "dialcheck_kafka_client_log_held_back_total") > 0

        # 4. back without its data (memory storage): one line, exit 3; reset; ready again
        broker = EmbeddedBroker(port=broker.port, log_path=str(tmp_path / "tansu2.log")).start()
        wait_until(lambda: not w.alive(), 60, "the worker did not notice the broker lost its data")
        assert w.proc.returncode == EXIT_RECOVERY
        said = [ln for ln in w.log_text().splitlines() if "came back without the data" in ln]
        assert len(said) == 1 and "--reset-state" in said[0]
        ensure_topics(s)
        # restarted without the reset, it never hangs: it recovers, or says why within its bound and exits 3
        bounded = s.updated(stream={"recovery_timeout_s": 20})
        w = WorkerProcess(bounded, log, extra_args=STANDIN).start()
        wait_until(lambda: not w.alive() or "dialcheck worker ready" in w.log_text(),
                   READY_BOUND_S, "a restart on changelogs the broker lost neither recovered nor gave up")
        if not w.alive():
            assert w.proc.returncode == EXIT_RECOVERY
            assert "table recovery did not finish within 20 s" in w.log_text() and "--reset-state" in w.log_text()
        w.stop()
        reset = subprocess.run([sys.executable, "-m", "dialcheck.cli", "worker", "--reset-state"], capture_output=True,
                               text=True, timeout=120, env={**os.environ, **settings_env(s)})
        assert reset.returncode == 0, reset.stderr
        assert "deleted changelog topics" in reset.stdout and "rehearsal-context-changelog" in reset.stdout
        turns, want = _turns("after")
        start = end_offsets(s, s.kafka.topic_verdicts)
        w, base = _start(s, log)
        _send(s, turns)
        assert want <= collect_verdicts(s, want, READY_BOUND_S, start=start, alive=w.alive).verdicts.keys()
    finally:
        if w is not None:
            w.stop()
        broker.stop()
