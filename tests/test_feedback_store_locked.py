"""The feedback store going away under a running worker (a real worker, a real embedded broker, a
real SQLite store made unavailable by another connection holding its write lock): the judgements in
flight are not acknowledged, the store is retried with backoff, `/readyz` and `dialcheck_degraded`
say so, turns go on being checked, and when the lock is released every judgement is stored once.

Why a lock and not a stopped server: SQLite has no server to stop; a held write lock is what a
stuck writer or a backup does to it, and the worker sees it as its real error ("database is locked",
after the store's busy timeout: 30 s by default, 2 s here, DIALCHECK_FEEDBACK_BUSY_TIMEOUT_S). A
PostgreSQL server stopped and started under the worker is tests/test_feedback_outage.py's (the same
behaviour, the other backend)."""
from __future__ import annotations

import json
import sqlite3
import urllib.error
import urllib.request

import orjson
import pytest

from streams.observability import METRICS_MARKER
from streams.worker import WorkerProcess
from tests.test_feedback_stream import STANDIN, judgement, publish_turns, send_feedback, stored, stream_settings
from tests.waiting import wait_until

pytestmark = pytest.mark.broker


def _get(url: str):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _degraded_gauge(metrics_url: str) -> float | None:
    from prometheus_client.parser import text_string_to_metric_families

    _, body = _get(metrics_url)
    return next((x.value for fam in text_string_to_metric_families(body) for x in fam.samples
                 if x.name == "dialcheck_degraded" and x.labels.get("part") == "feedback_store"), None)


@pytest.mark.timeout(420)
def test_a_locked_store_holds_feedback_says_degraded_and_loses_nothing(fresh_broker, tmp_path):
    s = stream_settings(fresh_broker.bootstrap, tmp_path, "fbo", partitions=1).updated(
        stream={"feedback_busy_timeout_s": 2.0})  # the same "database is locked", 28 s sooner
    log = tmp_path / "worker.log"
    with WorkerProcess(s, log, extra_args=STANDIN) as w:
        w.wait_ready(180)
        metrics = w.wait_for(METRICS_MARKER, 30).split(METRICS_MARKER, 1)[1].strip()
        readyz = metrics.replace("/metrics", "/readyz")
        verdicts = publish_turns(s, 6, "fbo", w)
        code, body = _get(readyz)
        assert code == 200 and "degraded" not in json.loads(body) and _degraded_gauge(metrics) == 0
        records = [(v.conversation_id.encode(), orjson.dumps(judgement(v, "right", i))) for i, v in enumerate(verdicts)]

        lock = sqlite3.connect(s.stream.feedback_store, isolation_level=None, timeout=60)
        lock.execute("BEGIN IMMEDIATE")  # the write lock: every other writer waits, then gets "database is locked"
        try:
            send_feedback(s, records)
            wait_until(lambda: json.loads(_get(readyz)[1]).get("state") == "degraded", 120,
                       "the store's outage never showed on /readyz")
            code, body = _get(readyz)
            ready = json.loads(body)
            assert code == 200 and "feedback_store" in ready["degraded"]  # turns are still checked: ready
            assert "locked" in ready["degraded"]["feedback_store"]["reason"]
            assert _degraded_gauge(metrics) == 1
            more = publish_turns(s, 2, "fbo-during", w)  # the turns go on while the store is down
            assert len(more) == 2 and w.alive()
        finally:
            lock.rollback()
            lock.close()
        wait_until(lambda: stored(s) >= len(records), 120, "judgements lost after the store came back")
        wait_until(lambda: "degraded" not in json.loads(_get(readyz)[1]), 60, "still degraded after the store came back")
        assert _degraded_gauge(metrics) == 0 and w.alive()
        text = w.log_text()
    assert stored(s) == len(records)
    assert "feedback store unavailable" in text and "feedback store available again" in text
    assert "stopping without commit" not in text
