"""Metrics, health and readiness of the stream worker, plus JSON log lines.

Why a small HTTP server of our own (a thread, standard library + prometheus_client) instead of
Faust's web server: Faust's web binds 0.0.0.0 and starts late (after the consumer), while
/healthz must answer as soon as the process is up and /readyz must say "not yet" during table
recovery. The server runs in its own thread, so a scrape never waits on the event loop.

- /metrics  Prometheus text format (names listed in README.md, section Metrics)
- /healthz  200 when the process is up and the broker answers a metadata request within 2 s
            (streams/broker_watch.py: a frozen broker still accepts TCP connects), else 503
- /readyz   200 when table recovery is done and the models are loaded, else 503
"""
from __future__ import annotations

import json
import logging
import math
import socket
import threading
import time
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Mapping

from schemas import TIMING_META_KEYS, Reason
from schemas.errors import DialcheckError
from schemas.protocols import CacheStats, ModelVersions, ReplyStats
from schemas.settings import Settings, redact

from .precision import ALL_VERSIONS

log = logging.getLogger("dialcheck.observability")

METRICS_MARKER = "dialcheck metrics at"
# verdict.timings_ms keys are pipeline stages (but schemas.TIMING_META_KEYS); one histogram with a `stage` label (seconds)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# produce→verdict (verdict.latency_ms): ~0.6 s warm on a quiet machine, ~12 s for a cold first turn,
# tens of seconds behind a backlog; a finer grid from 0.1 s to 60 s (+Inf catches the rest)
VERDICT_LATENCY_BUCKETS = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0)

def _host_port(address: str, default_port: int = 9092) -> tuple[str, int]:
    address = address.strip()
    if "://" in address:
        address = address.split("://", 1)[1]
    address = address.rsplit("@", 1)[-1].strip("/")
    host, _, port = address.rpartition(":")
    if not host:
        return address, default_port
    return host.strip("[]"), int(port) if port.isdigit() else default_port


def broker_reachable(bootstrap: str, timeout_s: float = 2.0) -> bool:
    """True when any bootstrap server accepts a TCP connection within `timeout_s`."""
    for part in bootstrap.replace(";", ",").split(","):
        if not part.strip():
            continue
        try:
            with socket.create_connection(_host_port(part), timeout=timeout_s):
                return True
        except (OSError, ValueError):
            continue
    return False


def wait_for_broker(bootstrap: str, wait_s: float) -> bool:
    """Retry `broker_reachable` until `wait_s` has passed (a broker that is still starting is fine)."""
    deadline = time.monotonic() + wait_s
    while True:
        if broker_reachable(bootstrap, timeout_s=min(2.0, max(0.1, wait_s))):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)


class MetricsBindError(DialcheckError, RuntimeError):
    """The metrics address is taken or not ours: a configuration mistake, shown as one line."""


class JsonFormatter(logging.Formatter):
    """One JSON object a line (time, level, logger, message, exception); secrets in URLs masked."""

    def format(self, record: logging.LogRecord) -> str:
        out = {"ts": round(record.created, 3), "level": record.levelname, "logger": record.name,
               "message": redact(record.getMessage())}
        if record.exc_info:
            out["exc"] = redact(self.formatException(record.exc_info))
        return json.dumps(out, ensure_ascii=False)


def logging_config(settings: Settings, loglevel: str = "info") -> dict | None:
    """A dictConfig for Faust's worker when JSON logs are asked for; None keeps Faust's own format."""
    if settings.stream.log_format != "json":
        return None
    return {"version": 1, "disable_existing_loggers": False,
            "formatters": {"json": {"()": f"{__name__}.JsonFormatter"}},
            "handlers": {"out": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stdout"}},
            "root": {"level": loglevel.upper(), "handlers": ["out"]}}


class Observability:
    """The worker's metrics (own registry: several apps in one test process do not collide) and
    the state /healthz and /readyz report. Hooks are one call each from streams/app.py."""

    def __init__(self, settings: Settings):
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.settings = settings
        self.registry = CollectorRegistry()
        r = self.registry
        self.turns_in = Counter("dialcheck_turns_in", "Valid chat turns read from the turns topic.", registry=r)
        self.turns_checked = Counter("dialcheck_turns_checked", "Turns sent to the checker.", registry=r)
        self.verdicts = Counter("dialcheck_verdicts", "Verdicts published, by label and status.",
                                ["label", "status"], registry=r)
        self.dead_letters = Counter("dialcheck_dead_letters", "Records sent to the dead-letter topic, by reason code.",
                                    ["reason"], registry=r)
        self.undecodable_batches = Counter(
            "dialcheck_undecodable_batches", "Record batches the consumer could not decode (unknown codec, bad CRC): "
            "their offsets were dead-lettered (reason undecodable) and skipped.", registry=r)
        self.undecodable_count, self.last_undecodable = 0, None  # how many and where/why the last was, for /readyz
        self.outage = None  # a streams.outbox.Outage: parts down now (/readyz "degraded", dialcheck_degraded)
        self.batch_size = Histogram("dialcheck_batch_size", "Turns per checker call.", buckets=BATCH_BUCKETS, registry=r)
        self.stage_latency = Histogram("dialcheck_stage_latency_seconds",
                                       "Per-stage pipeline latency per verdict (verdict.timings_ms).",
                                       ["stage"], buckets=LATENCY_BUCKETS, registry=r)
        self.verdict_latency = Histogram("dialcheck_verdict_latency_seconds",
                                         "Produce-to-verdict latency of published verdicts (verdict.latency_ms: the "
                                         "turn's ts, else its record timestamp, to publishing).",
                                         buckets=VERDICT_LATENCY_BUCKETS, registry=r)
        self.models_loaded = False
        from functools import partial

        from .broker_watch import BrokerWatch
        from .recovery import data_lost

        # asked every few seconds once the worker runs (`watch_broker`), and by every /healthz
        self.broker = BrokerWatch(settings, interval_s=min(5.0, settings.stream.status_interval_s),
                                  on_data_lost=partial(data_lost, settings))
        self.app = None
        self.table = None
        self.counters = None  # the worker's Counters (a dataclass), exported as dialcheck_worker_events
        self.feedback = None  # (FeedbackStore, target, confidence) once attach_feedback ran
        self.caches: CacheStats | None = None  # the checker, when it reports its caches
        self.replies: ReplyStats | None = None  # the checker, when its LLM steps count their replies
        self.models: ModelVersions | None = None  # the checker, when it names the models it serves
        self._server: ThreadingHTTPServer | None = None
        self.port: int | None = None
        r.register(_StateCollector(self))
        r.register(_PrecisionCollector(self))
        r.register(_CacheCollector(self))
        r.register(_ModelCollector(self))
        r.register(_ReplyCollector(self))

    # hooks (called on the event loop by streams/app.py)
    def attach(self, app, table, counters=None, checker=None) -> None:
        """The Faust app, context table and worker counters the gauges and /readyz read, and the
        checker (already loaded) whose cache hit rates /metrics exports if it reports them."""
        self.app, self.table, self.counters = app, table, counters
        self.caches = checker if isinstance(checker, CacheStats) else None
        self.replies = checker if isinstance(checker, ReplyStats) else None
        self.models = checker if isinstance(checker, ModelVersions) else None
        self.models_loaded = True

    def attach_feedback(self, store, target: float, confidence: float) -> None:
        """The feedback store whose judgements the live-precision gauges read at scrape time."""
        from .precision import preload

        preload()  # before the worker says ready: a first scrape must not wait on scipy's import
        self.feedback = (store, target, confidence)

    def turn_in(self) -> None:
        self.turns_in.inc()

    def dead_letter(self, code: Reason) -> None:
        """One dead letter, labelled by its code (schemas.Reason), never by its free-text reason."""
        self.dead_letters.labels(Reason(code).value).inc()

    def undecodable(self, where: str) -> None:
        """One record batch that did not decode (`where`: topic/partition@offsets and why); /readyz shows
        the count and the last one (the worker stays ready: it went on past it)."""
        self.undecodable_batches.inc()
        self.undecodable_count += 1
        self.last_undecodable = redact(where)[:300]

    def checked(self, items: list, verdicts: Iterable) -> None:
        """One pipeline call: its turns and its verdicts as published (stamped with latency_ms)."""
        self.turns_checked.inc(len(items))
        self.batch_size.observe(len(items))
        for v in verdicts:
            self.verdicts.labels(v.label, v.status.state).inc()
            for stage, ms in (v.timings_ms or {}).items():
                if stage not in TIMING_META_KEYS and isinstance(ms, (int, float)) and ms >= 0:  # a count is no stage
                    self.stage_latency.labels(stage).observe(ms / 1000.0)
            ms = getattr(v, "latency_ms", None)
            # negative when the producer's clock is ahead of ours: counted in the lowest bucket, as measured
            if isinstance(ms, (int, float)) and not isinstance(ms, bool) and math.isfinite(ms):
                self.verdict_latency.observe(ms / 1000.0)

    # state read by the HTTP thread
    def recovered(self) -> bool:
        from .kafka.internals import recovered  # not at import: dialcheck's preflight imports this module

        try:
            return bool(self.app is not None and recovered(self.app))
        except AttributeError:
            return False

    def watch_broker(self) -> None:
        """Start asking the broker in the background (one line when it goes away, one when it is back)
        and hold back the Kafka clients' log flood meanwhile (called once logging is configured)."""
        from .broker_watch import install_flood_filter

        install_flood_filter(self.broker.start())

    def health(self) -> tuple[bool, dict[str, Any]]:
        """Asks the broker now (a metadata request, at most 2 s): a frozen broker is not healthy."""
        broker = self.settings.kafka.bootstrap
        why = self.broker.ask() if broker else "no broker configured"
        body = {"process": "up", "broker": redact(broker), "broker_reachable": why is None}
        if why is not None:
            st = self.broker.state()
            body.update(broker_error=st.reason or why[:200], broker_down_since=round(st.since, 3))
        return why is None, body

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        rec, models = self.recovered(), self.models_loaded
        body: dict[str, Any] = {"table_recovered": rec, "models_loaded": models}
        if self.undecodable_count:
            body.update(undecodable_batches=self.undecodable_count, last_undecodable=self.last_undecodable)
        down = self.outage.current() if self.outage is not None else {}
        if down:  # still ready (turns are checked); what is down is held and retried, and said here
            body.update(state="degraded", degraded=down)
        return rec and models, body

    def serve(self, host: str | None = None, port: int | None = None) -> int:
        """Start the HTTP thread; returns the bound port and prints `dialcheck metrics at URL`."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        obs = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, generate_latest(obs.registry), CONTENT_TYPE_LATEST)
                elif path in ("/healthz", "/readyz"):
                    ok, body = obs.health() if path == "/healthz" else obs.readiness()
                    self._send(200 if ok else 503, json.dumps(body).encode(), "application/json")
                else:
                    self._send(404, b"not found: /metrics, /healthz, /readyz\n", "text/plain")

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:  # scrapes every few seconds: keep them out of the log
                pass

        host = host or self.settings.stream.metrics_host
        port = self.settings.stream.metrics_port if port is None else port
        try:
            self._server = ThreadingHTTPServer((host, port), Handler)
        except OSError as e:
            raise MetricsBindError(f"cannot serve /metrics on {host}:{port}: {e.strerror or e} "
                                   "(set DIALCHECK_METRICS_HOST / DIALCHECK_METRICS_PORT)") from None
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="metrics", daemon=True).start()
        print(f"{METRICS_MARKER} http://{host}:{self.port}/metrics", flush=True)
        return self.port

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class _ScrapeCollector:
    """A collector read at scrape time from what `obs` holds. `describe` is empty so registering it
    never runs `collect` (which reads live state: the app, the store, the checker)."""

    CACHE_S = 2.0  # a store-backed collector reads the store at most this often (scrapes can be frequent)

    def __init__(self, obs: Observability):
        self.obs = obs
        self._cached: tuple[float, Any] | None = None

    def describe(self):
        return []

    def _every(self, read: Callable[[], Any]) -> Any:
        """`read()`, or what it returned less than CACHE_S ago."""
        now = time.monotonic()
        if self._cached is None or now - self._cached[0] > self.CACHE_S:
            self._cached = (now, read())
        return self._cached[1]


class _StateCollector(_ScrapeCollector):
    """Gauges computed at scrape time: consumer lag per partition and context-table size."""

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        lag = GaugeMetricFamily("dialcheck_consumer_lag", "Highwater minus read offset, per assigned partition.",
                                labels=["topic", "partition"])
        conversations = GaugeMetricFamily("dialcheck_context_conversations", "Conversations in the context table.")
        turns = GaugeMetricFamily("dialcheck_context_turns", "Turns held in the context table.")
        ready = GaugeMetricFamily("dialcheck_ready", "1 when table recovery is done and models are loaded.")
        app, table = self.obs.app, self.obs.table
        worker = CounterMetricFamily("dialcheck_worker_events", "The worker's own counters (status line), by name: "
                                     "evicted, evicted_lru, deadline_expired, poison, send_retries, isolated_batches, ...",
                                     labels=["counter"])
        for name, value in _safe(lambda: asdict(self.obs.counters) if self.obs.counters else {}, {}).items():
            if isinstance(value, (int, float)):
                worker.add_metric([name], value)
        from .kafka.internals import consumer_lags  # Faust's private offsets: the adapter's to read

        for tp, value in _safe(lambda: consumer_lags(app), []):
            lag.add_metric([tp.topic, str(tp.partition)], value)
        if table is not None:
            values = _safe(lambda: list(table.values()), [])
            conversations.add_metric([], len(values))
            turns.add_metric([], sum(len(v.get("turns", [])) for v in values if isinstance(v, dict)))
        ready.add_metric([], 1.0 if self.obs.readiness()[0] else 0.0)
        degraded = GaugeMetricFamily("dialcheck_degraded", "1 while a part the worker writes to is down (its "
                                     "input held unacknowledged and retried), by part: feedback_store.", labels=["part"])
        outage = self.obs.outage
        for part, down in _safe(lambda: outage.states() if outage is not None else {}, {}).items():
            degraded.add_metric([part], 1.0 if down else 0.0)
        broker = self.obs.broker.state()
        up = GaugeMetricFamily("dialcheck_broker_up", "1 while the broker answers metadata requests (asked every "
                               "few seconds and by /healthz), 0 while it does not.")
        up.add_metric([], 1.0 if broker.up else 0.0)
        outages = CounterMetricFamily("dialcheck_broker_outages", "Times the broker stopped answering since start.")
        outages.add_metric([], broker.outages)
        held = CounterMetricFamily("dialcheck_kafka_client_log_held_back", "Kafka client-library warning and error "
                                   "lines held back (while the broker was away, or repeats within a minute).")
        held.add_metric([], broker.held_back)
        yield from (lag, conversations, turns, ready, worker, degraded, up, outages, held)


class _PrecisionCollector(_ScrapeCollector):
    """Live shown-badge precision from the feedback store, per badge bucket (SUPPORTS, REFUTES, high)
    and NLI model version of the judged verdicts (`nli_version`; "all" pools every version): precision
    and its Clopper–Pearson interval (streams/precision.py), judgements n, coverage, the drift alarm
    (1 when the interval's upper end is below the target), and judgements by kind. Per version so a
    rollout is judged before and after. Read at scrape time, at most every CACHE_S."""

    def _read(self):
        def read():
            store, target, confidence = self.obs.feedback
            return store.precision_by_version(target, confidence), store.counts()
        return self._every(read)

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        if self.obs.feedback is None:
            return
        by_version, counts = _safe(self._read, ({}, {}))
        g = {name: GaugeMetricFamily(f"dialcheck_{name}", doc, labels=["label", "nli_version"]) for name, doc in (
            ("shown_precision", "Share of judged shown badges judged right (feedback so far; unsure left out)."),
            ("shown_precision_lower", "Lower end of the shown-badge precision's Clopper-Pearson interval."),
            ("shown_precision_upper", "Upper end of the shown-badge precision's Clopper-Pearson interval."),
            ("shown_judged", "Judgements (right + wrong) of shown badges: the n of the precision."),
            ("shown_coverage", "Shown badges / verdicts kept in the feedback store."),
            ("precision_alarm", "1 when the precision interval's upper end is below the target (drift alarm)."))}
        target = GaugeMetricFamily("dialcheck_precision_target", "The precision target the alarm compares with "
                                   "(DIALCHECK_PRECISION_TARGET).", labels=["label"])
        # each version's rows, then the pooled ones ("all"): the same buckets, one more label
        for version, rows in sorted(by_version.items(), key=lambda kv: kv[0] == ALL_VERSIONS):
            for r in rows:
                labels = [r.label, version]
                if r.precision is not None:
                    g["shown_precision"].add_metric(labels, r.precision)
                    g["shown_precision_lower"].add_metric(labels, r.lower)
                    g["shown_precision_upper"].add_metric(labels, r.upper)
                if r.coverage is not None:
                    g["shown_coverage"].add_metric(labels, r.coverage)
                g["shown_judged"].add_metric(labels, r.n)
                g["precision_alarm"].add_metric(labels, 1.0 if r.alarm else 0.0)
                if version == ALL_VERSIONS:
                    target.add_metric([r.label], r.target)
        total = CounterMetricFamily("dialcheck_feedback", "Judgements in the feedback store, by judgement "
                                    "(redeliveries counted once).", labels=["judgement"])
        for j, n in (counts.get("judgement") or {}).items():
            total.add_metric([j], n)
        yield from (*g.values(), target, total)


class _CacheCollector(_ScrapeCollector):
    """The checker's caches at scrape time (BM25 hits, windows, E5 vectors, surfaces, parses): hits and
    misses as counters, entries held and the bound as gauges, labelled by `cache`. The hit rate is
    rate(dialcheck_cache_hits_total) / (rate(hits) + rate(misses)); nothing when the checker has none."""

    FIELDS = (("hits", "counter", "Lookups a cache answered, by cache."),
              ("misses", "counter", "Lookups a cache did not hold (computed, then kept), by cache."),
              ("entries", "gauge", "Entries a cache holds now, by cache."),
              ("capacity", "gauge", "The most entries a cache keeps (least recently used go first), by cache."))

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        if self.obs.caches is None:
            return
        stats = _safe(lambda: dict(self.obs.caches.cache_stats()), {})
        for field, kind, doc in self.FIELDS:
            family = (CounterMetricFamily if kind == "counter" else GaugeMetricFamily)(
                f"dialcheck_cache_{field}", doc, labels=["cache"])
            for name, values in sorted(stats.items()):
                value = values.get(field) if isinstance(values, Mapping) else None
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    family.add_metric([name], value)
            yield family


class _ReplyCollector(_ScrapeCollector):
    """What the LLM steps' model replied, at scrape time: `dialcheck_llm_replies_total{step, kind}`
    (workers/llm/replies.py KINDS and `unavailable`); every kind but `ok` is a fallback the step took."""

    def collect(self):
        from prometheus_client.core import CounterMetricFamily

        if self.obs.replies is None:
            return
        counts = _safe(lambda: dict(self.obs.replies.llm_replies()), {})
        family = CounterMetricFamily("dialcheck_llm_replies", "Replies of the LLM steps by step and kind "
                                     "(ok, or the fallback's reason: echo, empty, truncated, explanation, "
                                     "wrong-format, drift, unavailable).", labels=["step", "kind"])
        for step, kinds in sorted(counts.items()):
            for kind, n in sorted((kinds if isinstance(kinds, Mapping) else {}).items()):
                family.add_metric([step, kind], n)
        yield family


class _ModelCollector(_ScrapeCollector):
    """The model in use and the adaptation loop's steps, at scrape time:

    - `dialcheck_model_info{nli_version}` 1: the NLI model version the checker serves now (a SIGHUP
      reload changes it);
    - `dialcheck_model_events_total{event}`: the loop's events in the feedback store (built, not_built,
      scored, promoted, refused, rolled_back; streams/feedback_store.py MODEL_EVENTS), every kind
      exported, 0 until one happens, so `increase(...{event="rolled_back"}[1h]) > 0` alerts from the start;
    - `dialcheck_model_event_timestamp_seconds{event}`: when the last event of each kind was recorded.

    Why from the store and not from the loop's process: the loop runs beside the worker (its own
    process, its own lifetime), the store is what both share, and an append-only table counted at
    scrape time is a counter that survives either process restarting. Read at most every CACHE_S."""

    def _read(self):
        def read():
            store = self.obs.feedback[0]
            return store.event_counts(), {e.event: e.ts for e in store.events(last=200)}
        return self._every(read)

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        info = GaugeMetricFamily("dialcheck_model_info", "1 for the NLI model version the worker serves now "
                                 "(changes on a SIGHUP reload).", labels=["nli_version"])
        models = self.obs.models  # read once: a reload swaps the chain meanwhile
        version = _safe(lambda: dict(models.model_versions()).get("nli"), None) if models is not None else None
        if version:
            info.add_metric([str(version)], 1.0)
        yield info
        if self.obs.feedback is None:
            return
        counts, last = _safe(self._read, ({}, {}))  # the store down: the degraded gauge says so
        if not counts:
            return
        total = CounterMetricFamily("dialcheck_model_events", "The adaptation loop's steps recorded in the feedback "
                                    "store, by event: built, not_built, scored, promoted, refused, rolled_back.",
                                    labels=["event"])
        when = GaugeMetricFamily("dialcheck_model_event_timestamp_seconds", "Unix time of the last event of each kind.",
                                 labels=["event"])
        for event, n in counts.items():
            total.add_metric([event], n)
            if event in last:
                when.add_metric([event], last[event])
        yield total
        yield when


def _safe(fn: Callable[[], Any], default: Any) -> Any:
    """The event loop mutates these while a scrape reads them; a scrape must never fail."""
    try:
        return fn()
    except Exception:  # noqa: BLE001 (metrics are best effort; the log says why)
        log.debug("metrics collection failed", exc_info=True)
        return default
