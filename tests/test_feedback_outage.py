"""The feedback store on a real PostgreSQL server under a real worker: the server stopped and started
again while judgements stream in, and a worker started with a wrong password.

Why: in production the store is a server of its own, and it goes away (a restart, a failover, a
network cut). The worker must then hold the judgements unacknowledged, retry with backoff, say so
on /readyz and /metrics, and store every judgement exactly once when the server is back; a wrong
password must stop it at start with one line, never the password. The session's PostgreSQL server
(tests/pg.py) is stopped with `pg_ctl stop -m fast` (clients disconnected, as in a restart) and
started again on the same port; the model-free stand-in Checker (tests/stream_standin.py)."""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from urllib.parse import quote

import orjson
import pytest

from streams.feedback_store import FeedbackStore
from streams.observability import METRICS_MARKER
from streams.worker import WorkerProcess
from tests.test_feedback_stream import STANDIN, judgement, publish_turns, send_feedback, stream_settings
from tests.waiting import wait_until

pytestmark = [pytest.mark.broker, pytest.mark.postgres]


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def alive(w) -> bool:
    """True while the worker runs; a worker that exited fails the test with its log's tail."""
    if not w.alive():
        pytest.fail(f"the worker exited ({w.proc.returncode}); log tail:\n{w.log_text()[-3000:]}")
    return True


def degraded_gauge(base: str) -> float | None:
    """dialcheck_degraded{part="feedback_store"} on /metrics (None: not exported)."""
    from prometheus_client.parser import text_string_to_metric_families

    code, body = get(base + "/metrics")
    assert code == 200, body[:300]
    return next((x.value for fam in text_string_to_metric_families(body) for x in fam.samples
                 if x.name == "dialcheck_degraded" and x.labels.get("part") == "feedback_store"), None)


def committed(s) -> int:
    """The worker group's committed offset on the (one-partition) feedback topic, read without joining."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=s.kafka.bootstrap, group_id=s.stream.app_id, enable_auto_commit=False)
    try:
        return c.committed(TopicPartition(s.kafka.topic_feedback, 0)) or 0
    finally:
        c.close()


def secrets_of(server) -> list[str]:
    """The password as written, percent-encoded, and the part after its '@' (a half-masking leak)."""
    pw = server.password
    return [pw, quote(pw, safe=""), pw.split("@")[-1]]


def stored_keys(url: str) -> list[tuple]:
    with FeedbackStore(url) as st:
        return [(j.source, j.conversation_id, j.turn_id, j.claim_id, j.ts) for j in st.judged(joined_only=False)]


@pytest.mark.timeout(600)
def test_postgres_stopped_under_the_worker_loses_no_judgement(broker, tmp_path, postgres_server, postgres_url):
    s = stream_settings(broker.bootstrap, tmp_path, "fbo", partitions=1, store=postgres_url)
    log = tmp_path / "worker.log"
    before, during = 20, 40
    with WorkerProcess(s, log, extra_args=STANDIN) as w:
        w.wait_ready(180)
        base = w.wait_for(METRICS_MARKER, 30).split(METRICS_MARKER, 1)[1].strip().rsplit("/", 1)[0]
        verdicts = publish_turns(s, 20, "fbo", w)
        records = [(v.conversation_id.encode(), orjson.dumps(judgement(v, "right" if i % 3 else "wrong", i)))
                   for i, v in ((i, verdicts[i % len(verdicts)]) for i in range(before + during))]
        send_feedback(s, records[:before])
        wait_until(lambda: len(stored_keys(postgres_url)) >= before, 120, "feedback not stored before the outage")
        assert get(base + "/readyz")[0] == 200

        postgres_server.stop()  # fast: the worker's connection is cut, as in a server restart
        try:
            send_feedback(s, records[before:])
            wait_until(lambda: alive(w) and "feedback_store" in get(base + "/readyz")[1], 60,
                       "/readyz never said the store is down")
            code, body = get(base + "/readyz")
            gauge_down = degraded_gauge(base)
            metrics = get(base + "/metrics")[1]
            time.sleep(3)  # retries go on (backoff): the worker stays up, holding the batch unacknowledged
            alive(w)
            held_at = committed(s)
        finally:
            postgres_server.start()
        print(f"/readyz while the store was down: {code} {body}")
        ready = json.loads(body)
        assert code == 200 and ready["state"] == "degraded" and "feedback_store" in ready["degraded"], body
        assert gauge_down == 1.0, "dialcheck_degraded{part=feedback_store} is not 1 while the store is down"
        assert held_at <= before, f"offset {held_at} committed while the store was down: judgements acked unstored"

        wait_until(lambda: alive(w) and len(stored_keys(postgres_url)) >= before + during, 120,
                   "judgements produced during the outage were not stored once the server was back")
        wait_until(lambda: "feedback_store" not in get(base + "/readyz")[1], 60, "/readyz still says the store is down")
        assert degraded_gauge(base) in (0.0, None)
        wait_until(lambda: committed(s) == before + during, 60, "the held judgements were never acknowledged")
        time.sleep(2)  # anything redelivered lands now
        alive(w)
        text = w.log_text()
    keys = stored_keys(postgres_url)
    assert len(keys) == before + during and len(set(keys)) == len(keys)  # none lost, none twice
    assert {k[4] for k in keys} == {1_000_000.0 + i for i in range(before + during)}
    assert "unavailable" in text or "unreachable" in text, "the outage left no line in the log"
    assert not [x for x in secrets_of(postgres_server) if x in text + body + metrics]


@pytest.mark.timeout(300)
def test_a_worker_with_a_wrong_password_stops_with_one_line(broker, tmp_path, postgres_server, postgres_url):
    wrong = "Wr0ng-p@ss:word%"
    url = postgres_url.replace(quote(postgres_server.password, safe=""), quote(wrong, safe=""))
    assert url != postgres_url
    s = stream_settings(broker.bootstrap, tmp_path, "fbw", store=url)
    with WorkerProcess(s, tmp_path / "worker.log", extra_args=STANDIN) as w:
        assert w.proc.wait(timeout=120) == 2
        text = w.log_text()
    lines = [ln for ln in text.splitlines() if ln.startswith("dialcheck: ")]
    assert len(lines) == 1 and "DIALCHECK_FEEDBACK_STORE" in lines[0], text[-2000:]
    assert "password authentication failed" in lines[0] and "Traceback" not in text
    assert not [x for x in [wrong, quote(wrong, safe=""), wrong.split("@")[-1], *secrets_of(postgres_server)] if x in text]
