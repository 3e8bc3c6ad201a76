"""/metrics for the model in use and the adaptation loop's steps, read at scrape time:

- `dialcheck_model_info{nli_version}` 1: the NLI model version the worker's checker serves now
  (its `model_versions()["nli"]`, which a SIGHUP reload changes), when the checker reports them;
- `dialcheck_model_events_total{event}`: the loop's events in the feedback store (built, not_built,
  scored, promoted, refused, rolled_back; streams/feedback_store.py MODEL_EVENTS), every kind
  exported, 0 until one happens, so `increase(...{event="rolled_back"}[1h]) > 0` alerts from the start;
- `dialcheck_model_event_timestamp_seconds{event}`: when the last event of each kind was recorded.

Why from the store and not from the loop's process: the loop runs beside the worker (its own
process, its own lifetime), the store is what both share, and an append-only table counted at
scrape time is a counter that survives either process restarting."""
from __future__ import annotations

import logging
import time

log = logging.getLogger("dialcheck.observability")


class ModelCollector:
    """A prometheus_client collector: the live model version (from `checker`) and the loop's events
    (from `store`, None when feedback is off). Events are read at most every CACHE_S."""

    CACHE_S = 2.0

    def __init__(self, store=None, checker=None):
        self.store, self.checker = store, checker
        self._cached: tuple[float, dict, dict] | None = None

    def describe(self):
        return []

    def _events(self) -> tuple[dict, dict]:
        now = time.monotonic()
        if self._cached is None or now - self._cached[0] > self.CACHE_S:
            counts = self.store.event_counts()
            last = {}
            for e in self.store.events(last=200):
                last[e.event] = e.ts
            self._cached = (now, counts, last)
        return self._cached[1], self._cached[2]

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        info = GaugeMetricFamily("dialcheck_model_info", "1 for the NLI model version the worker serves now "
                                 "(changes on a SIGHUP reload).", labels=["nli_version"])
        try:
            versions = getattr(self.checker, "model_versions", None)
            version = ((versions() if callable(versions) else versions) or {}).get("nli")
        except Exception:  # noqa: BLE001 - a scrape never fails; the chain is swapped by a reload meanwhile
            version = None
        if version:
            info.add_metric([str(version)], 1.0)
        yield info
        if self.store is None:
            return
        try:
            counts, last = self._events()
        except Exception:  # noqa: BLE001 - the store down: the degraded gauge says so; no event rows this scrape
            log.debug("model events not read", exc_info=True)
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
