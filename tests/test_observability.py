"""/metrics, /healthz and /readyz scraped from a real worker process on the embedded Tansu broker.

The worker runs the model-free stand-in Checker (tests/stream_standin.py, through the worker's
hidden `--pipeline` flag) with a real cached BM25 search (tests/test_speed_cache_metrics.py): what is
under test is the worker's own accounting and endpoints, not the NLP. The broker is stopped at the end so /healthz must turn 503 (it really asks the broker).
JSON logs are switched on for this worker, so its dead-letter warning must be a JSON line.
"""
from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from schemas import Reason
from schemas.settings import load_settings
from streams.broker import EmbeddedBroker
from streams.observability import METRICS_MARKER
from streams.replay import TurnProducer, load_records, record_turns, replay
from streams.topics import ensure_topics
from streams.worker import WorkerProcess

pytestmark = pytest.mark.broker

PIPELINE = "tests.test_speed_cache_metrics:create"  # the stand-in plus real caches
N_RECORDS = 4


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _samples(base: str) -> dict[tuple[str, tuple], float]:
    code, body = _get(base + "/metrics")
    assert code == 200
    out = {}
    for fam in text_string_to_metric_families(body.decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _total(samples: dict, name: str, **labels) -> float:
    return sum(v for (n, ls), v in samples.items() if n == name and all((k, v2) in ls for k, v2 in labels.items()))


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("obs")
    broker = EmbeddedBroker(log_path=str(tmp / "tansu.log")).start()
    settings = load_settings(kafka={"bootstrap": broker.bootstrap},
                             stream={"status_interval_s": 1.0, "feedback_store": str(tmp / "feedback.sqlite3")})
    ensure_topics(settings)
    worker = WorkerProcess(settings, tmp / "worker.log", extra_args=["--pipeline", PIPELINE],
                           env={"DIALCHECK_LOG_FORMAT": "json"}).start()
    try:
        worker.wait_ready(timeout_s=180)
        line = worker.wait_for(METRICS_MARKER, timeout_s=30)
        base = line.split(METRICS_MARKER, 1)[1].strip().rsplit("/metrics", 1)[0]
        yield {"broker": broker, "settings": settings, "worker": worker, "base": base}
    finally:
        # the last test stops the broker first: a worker without its broker never finishes a graceful
        # shutdown, so it is given 5 s instead of 30 before it is killed (nothing reads it any more)
        worker.stop(timeout_s=5.0)
        broker.stop()


def test_metrics_count_what_the_worker_did(stack):
    settings, base = stack["settings"], stack["base"]
    records = load_records(settings.data.dialfact_sample, N_RECORDS)
    n_turns = sum(len(record_turns(r)) for r in records)
    before = _samples(base)
    replay(settings, records)
    with TurnProducer(settings) as p:
        p.send_raw(b"conv-bad", b"{not json")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        s = _samples(base)
        if (_total(s, "dialcheck_verdicts_total") >= N_RECORDS and _total(s, "dialcheck_dead_letters_total") >= 1
                and _total(s, "dialcheck_turns_in_total") >= n_turns):
            break
        time.sleep(0.5)
    s = _samples(base)
    assert _total(s, "dialcheck_turns_in_total") == n_turns
    assert _total(s, "dialcheck_turns_checked_total") == N_RECORDS
    assert _total(s, "dialcheck_verdicts_total") == N_RECORDS
    assert _total(s, "dialcheck_verdicts_total", status="ok") == N_RECORDS
    assert _total(s, "dialcheck_dead_letters_total", reason="malformed_json") == 1
    assert _total(s, "dialcheck_batch_size_sum") == N_RECORDS
    assert _total(s, "dialcheck_stage_latency_seconds_count", stage="context_turns") == N_RECORDS
    lags = {dict(ls)["partition"]: v for (n, ls), v in s.items() if n == "dialcheck_consumer_lag"}
    assert set(lags) == {str(p) for p in range(settings.kafka.topic_partitions)}
    assert all(v >= 0 for v in lags.values())
    assert _total(s, "dialcheck_context_conversations") == N_RECORDS
    assert _total(s, "dialcheck_context_turns") == n_turns
    assert _total(s, "dialcheck_ready") == 1
    assert _total(s, "dialcheck_worker_events_total", counter="deadlettered") == 1  # the status line's counters
    # produce→verdict: one observation per published verdict (each carries latency_ms from the worker)
    lat = "dialcheck_verdict_latency_seconds"
    assert _total(s, lat + "_count") - _total(before, lat + "_count") == N_RECORDS
    assert _total(s, lat + "_bucket", le="+Inf") == _total(s, lat + "_count")
    assert 0 < _total(s, lat + "_sum") - _total(before, lat + "_sum") < 600 * N_RECORDS
    # the checker's caches: every claim searched its context turns and itself once
    hits, misses = _total(s, "dialcheck_cache_hits_total", cache="bm25"), _total(s, "dialcheck_cache_misses_total", cache="bm25")
    assert misses >= 1 and hits + misses == n_turns  # each claim's context turns and the claim: n_turns searches
    assert _total(s, "dialcheck_cache_entries", cache="bm25") == min(misses, 64)
    assert _total(s, "dialcheck_cache_capacity", cache="bm25") == 64
    assert _total(s, "dialcheck_cache_capacity", cache="windows") == 4096
    assert _total(s, "dialcheck_cache_hits_total", cache="windows") + _total(s, "dialcheck_cache_misses_total",
                                                                            cache="windows") >= 1


def test_readyz_and_healthz_while_up(stack):
    code, body = _get(stack["base"] + "/readyz")
    assert code == 200 and json.loads(body) == {"table_recovered": True, "models_loaded": True}
    code, body = _get(stack["base"] + "/healthz")
    assert code == 200 and json.loads(body)["broker_reachable"] is True
    assert _get(stack["base"] + "/nope")[0] == 404


def test_json_log_lines(stack):
    lines = [ln for ln in stack["worker"].log_text().splitlines() if "dead-letter" in ln]
    assert lines, "the dead-letter warning was not logged"
    rec = json.loads(lines[0])
    assert rec["level"] == "WARNING" and rec["logger"] == "dialcheck.stream"


def test_healthz_fails_when_the_broker_is_gone(stack):
    stack["broker"].stop()
    code, body = _get(stack["base"] + "/healthz")
    assert code == 503
    assert json.loads(body)["broker_reachable"] is False


def test_dead_letter_metric_is_labelled_by_code_not_by_text():
    """The label is the InvalidEvent's code: a reason text that quotes another class's words
    (the old regexes read the text) still counts under its own code."""
    from streams.observability import Observability

    obs = Observability(load_settings())
    obs.dead_letter(Reason.INVALID_FIELD)  # e.g. "speaker 'malformed JSON poison' is not a plain role"
    obs.dead_letter(Reason.POISON)
    obs.dead_letter(Reason.POISON)
    got = {s.labels["reason"]: s.value for fam in obs.registry.collect() if fam.name == "dialcheck_dead_letters"
           for s in fam.samples if s.name.endswith("_total")}
    assert got == {"invalid_field": 1.0, "poison": 2.0}
    with pytest.raises(ValueError):
        obs.dead_letter("other")  # not a code: a new reason must be declared in schemas.Reason first


def test_readme_lists_every_dead_letter_code():
    """docs/operations.md's metrics table (moved from README.md) names the label values; they are the Reason codes that dead-letter
    (deadline gives error verdicts, not dead letters)."""
    readme = (Path(__file__).resolve().parent.parent / "docs" / "operations.md").read_text()
    row = next(ln for ln in readme.splitlines() if ln.startswith("| `dialcheck_dead_letters_total`"))
    listed = set(re.findall(r"`([a-z_0-9]+)`", row.split("|")[3].split("(", 1)[1]))  # the values in (...)
    assert listed == {r.value for r in Reason} - {Reason.DEADLINE.value}


def test_verdict_latency_histogram_reads_latency_ms():
    """One observation per verdict with a latency_ms (seconds, in buckets spanning 0.1–60 s); a
    verdict without one (made outside the stream worker) is not counted."""
    from streams.observability import VERDICT_LATENCY_BUCKETS, Observability
    from test_ui_store import good_verdict
    from schemas import Verdict

    obs = Observability(load_settings())
    verdicts = []
    for ms in (300.0, 2400.0, None, 75_000.0):
        v = Verdict.from_dict(good_verdict("c", f"t{ms}", f"claim {ms}"))
        v.latency_ms = ms
        verdicts.append(v)
    obs.checked([object()] * 4, verdicts)
    got = {(s.name, s.labels.get("le")): s.value for fam in obs.registry.collect()
           if fam.name == "dialcheck_verdict_latency_seconds" for s in fam.samples}
    assert got[("dialcheck_verdict_latency_seconds_count", None)] == 3
    assert got[("dialcheck_verdict_latency_seconds_sum", None)] == pytest.approx(77.7)
    assert got[("dialcheck_verdict_latency_seconds_bucket", "0.25")] == 0
    assert got[("dialcheck_verdict_latency_seconds_bucket", "0.5")] == 1
    assert got[("dialcheck_verdict_latency_seconds_bucket", "3.0")] == 2
    assert got[("dialcheck_verdict_latency_seconds_bucket", "60.0")] == 2  # 75 s is beyond the last bucket
    assert got[("dialcheck_verdict_latency_seconds_bucket", "+Inf")] == 3
    assert VERDICT_LATENCY_BUCKETS[0] == 0.1 and VERDICT_LATENCY_BUCKETS[-1] == 60.0


def test_stage_latency_skips_timing_keys_that_are_no_stage():
    """timings_ms carries a count (`batch_items`, schema 2.1) and a flag (`dense_client_side`)
    beside the stage times; only the stages become `stage` labels of the histogram."""
    from streams.observability import Observability
    from test_ui_store import good_verdict
    from schemas import TIMING_META_KEYS, Verdict

    obs = Observability(load_settings())
    v = Verdict.from_dict(good_verdict("c", "t1", "claim"))
    v.timings_ms = {"surfaces": 16.56, "retrieve": 32.07, "verify": 34.32, "batch_items": 2, "dense_client_side": 1.0}
    obs.checked([object()], [v])
    counts = {s.labels["stage"]: s.value for fam in obs.registry.collect()
              if fam.name == "dialcheck_stage_latency_seconds" for s in fam.samples if s.name.endswith("_count")}
    assert counts == {"surfaces": 1, "retrieve": 1, "verify": 1}
    assert {"batch_items", "dense_client_side"} <= TIMING_META_KEYS


def test_live_precision_gauges_read_the_feedback_store(tmp_path, monkeypatch):
    """Live precision from feedback: per badge bucket the shown precision, its Clopper-Pearson ends, n, coverage and the
    drift alarm, read from a real store at scrape time; nothing judged yet: no precision sample (not
    a made-up 0), n 0 and no alarm."""
    from prometheus_client import generate_latest

    from schemas.feedback import feedback_from_dict
    from streams.feedback_store import FeedbackStore
    from streams.observability import Observability, _PrecisionCollector
    from streams.precision import clopper_pearson

    def samples(obs) -> dict:
        return {(x.name, tuple(sorted(x.labels.items()))): x.value
                for fam in text_string_to_metric_families(generate_latest(obs.registry).decode()) for x in fam.samples}

    store = FeedbackStore(tmp_path / "fb.sqlite3")
    obs = Observability(load_settings())
    assert not any(n.startswith("dialcheck_shown") for n, _ in samples(obs))  # no store attached: no gauges
    obs.attach_feedback(store, 0.85, 0.9)
    s = samples(obs)
    lab = lambda b: (("label", b), ("nli_version", "all"))  # noqa: E731  # pooled over every model version
    assert ("dialcheck_shown_precision", lab("SUPPORTS")) not in s
    assert s[("dialcheck_shown_judged", lab("SUPPORTS"))] == 0
    assert s[("dialcheck_precision_alarm", lab("REFUTES"))] == 0
    verdicts = [{"conversation_id": "c", "turn_id": f"t{i}", "claim_id": f"k{i}", "label": "SUPPORTS" if i < 12 else "REFUTES",
                 "display": {"show": i < 16, "tone": "supported", "confidence": "high" if i < 4 else "medium"}}
                for i in range(20)]
    store.add_verdicts(verdicts)
    store.add_feedback([feedback_from_dict({"conversation_id": "c", "turn_id": f"t{i}", "claim_id": f"k{i}",
                                            "label_shown": v["label"], "source": "moderator", "ts": 1.0,
                                            "judgement": ("right" if i < 11 else "wrong") if i < 12 else "wrong"})
                        for i, v in enumerate(verdicts[:16])])
    monkeypatch.setattr(_PrecisionCollector, "CACHE_S", 0.0)
    s = samples(obs)
    lo, hi = clopper_pearson(11, 12, 0.9)
    assert s[("dialcheck_shown_precision", lab("SUPPORTS"))] == pytest.approx(11 / 12)
    assert (s[("dialcheck_shown_precision_lower", lab("SUPPORTS"))], s[("dialcheck_shown_precision_upper", lab("SUPPORTS"))]) \
        == pytest.approx((lo, hi))
    assert s[("dialcheck_shown_judged", lab("REFUTES"))] == 4 and s[("dialcheck_precision_alarm", lab("REFUTES"))] == 1
    assert s[("dialcheck_precision_alarm", lab("SUPPORTS"))] == 0 and s[("dialcheck_shown_precision", lab("high"))] == 1.0
    assert s[("dialcheck_shown_coverage", lab("SUPPORTS"))] == pytest.approx(12 / 20)
    assert s[("dialcheck_shown_coverage", lab("high"))] == pytest.approx(4 / 20)
    assert s[("dialcheck_feedback_total", (("judgement", "wrong"),))] == 5
    store.close()
