"""Whether Kafka answers, asked as a client asks, and the client library's log flood summarised.

Why not a TCP connect: a frozen broker (stopped process, full disk, a hung JVM) still accepts
connections in the kernel's backlog, so /healthz said 200 for the whole of a 38-second freeze. A
metadata request with a short timeout is what every client needs first; no answer within
`timeout_s` is an outage.

Why a flood filter: with the broker stopped, aiokafka logs an ERROR line per reconnect attempt and
per failed fetch or heartbeat, about 55 lines a second (4,800 in 55 s), while the worker said nothing
of its own. `BrokerWatch` asks the broker every `interval_s` in a thread of its own and logs one
dialcheck line when it goes away and one when it is back; `ClientLogFlood`, a filter on the log
handlers, holds back the client libraries' warnings and errors while the broker is away (counted,
the count said in the "back" line and on /metrics) and lets each message template through at most
once a minute otherwise; kafka-python's own lines (only the health question uses it in a worker) are
never shown.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from schemas.settings import Settings

from .checking import Scrubber, bound

log = logging.getLogger("dialcheck.stream")

CLIENT_LOGGERS = ("aiokafka", "kafka")  # the Kafka clients' loggers (and their children)
# kafka-python's loggers: in a running worker only the health question uses that client (the worker's own
# is aiokafka), so its lines are that question's, whose failure is the answer: never shown
PROBE_LOGGERS = ("kafka.",)
ASK_THREAD = "broker-ask"  # the thread that asks the broker
TEMPLATE_EVERY_S = 60.0  # while the broker answers: each client log template at most once a minute


@dataclass(frozen=True)
class Answer:
    """What one question to the broker gave: `why` None when it answered; `ends` the input topic's end
    offset per partition (None: not asked or not answered; {} : the topic is gone)."""
    why: str | None
    ends: dict[int, int] | None = None


def ask_broker(settings: Settings, timeout_s: float = 2.0, topic: str | None = None) -> Answer:
    """A metadata request (describe cluster) within `timeout_s`, and `topic`'s end offsets when named.
    Scrub `why` before showing it: it may quote the bootstrap address."""
    from kafka import KafkaAdminClient, OffsetSpec, TopicPartition

    from .kafka_config import kafka_python_kwargs

    def said(e: Exception) -> str:  # kafka-python's errors already start with their class name
        text = str(e)
        return text if text.startswith(type(e).__name__) else f"{type(e).__name__}: {text}"

    ms = max(100, int(timeout_s * 1000))
    try:
        admin = KafkaAdminClient(**kafka_python_kwargs(settings), request_timeout_ms=ms, bootstrap_timeout_ms=ms,
                                 retry_backoff_ms=100, reconnect_backoff_max_ms=500, client_id="dialcheck-health")
    except Exception as e:  # noqa: BLE001 - any failure to bootstrap is the answer
        return Answer(said(e))
    try:
        admin.describe_cluster()
        if topic is None:
            return Answer(None)
        if topic not in admin.list_topics():
            return Answer(None, {})
        parts = admin.describe_topics([topic])[0].get("partitions") or []
        specs = {TopicPartition(topic, p["partition_index"]): OffsetSpec.LATEST for p in parts}
        ends = admin.list_partition_offsets(specs, timeout_ms=ms) if specs else {}
        return Answer(None, {tp.partition: int(o.offset) for tp, o in ends.items()})
    except Exception as e:  # noqa: BLE001
        return Answer(said(e))
    finally:
        try:
            admin.close()
        except Exception:  # noqa: BLE001 - closing a half-open client must not hide the answer
            pass


def lost_data(before: dict[int, int], now: dict[int, int]) -> str | None:
    """How the input topic shows that the broker lost data, or None: an end offset never goes back in
    Kafka (retention moves the start, not the end), so a partition that ends earlier than it did, or a
    topic gone, means the broker lost records (a cluster rebuilt, a topic recreated, memory storage)."""
    if not before or not any(before.values()):
        return None
    if not now:
        return "the topic is gone"
    back = [(p, now.get(p, 0), e) for p, e in sorted(before.items()) if now.get(p, 0) < e]
    if not back:
        return None
    p, end, was = back[0]
    return f"partition {p} ends at {end}, was {was}" + (f" (and {len(back) - 1} more)" if len(back) > 1 else "")


@dataclass
class BrokerState:
    up: bool = True
    since: float = 0.0            # when the current state began (time.time())
    reason: str | None = None     # why it is down (scrubbed, short)
    outages: int = 0              # times it went away since the worker started
    held_back: int = 0            # client-library log lines held back in all


class BrokerWatch:
    """Asks the broker every `interval_s` (a daemon thread) and says each change in one line. `state()`
    is read by /healthz, /metrics and the log filter; `ask()` asks now (bounded by `timeout_s`)."""

    def __init__(self, settings: Settings, *, interval_s: float = 5.0, timeout_s: float = 2.0,
                 scrub: Scrubber | None = None, on_data_lost=None):
        self.settings, self.interval_s, self.timeout_s = settings, interval_s, timeout_s
        # what happens when the input topic shows the broker lost data (streams/recovery.py `data_lost`);
        # None: only said (tests and tools that watch without a worker)
        self.on_data_lost = on_data_lost
        self._ends: dict[int, int] = {}  # the input topic's highest end offsets seen
        self.scrub = scrub or Scrubber.from_settings(settings)
        self._state = BrokerState(since=time.time())
        self._lock = threading.Lock()
        self._held_since_down = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        from concurrent.futures import Future, ThreadPoolExecutor

        self._asker = ThreadPoolExecutor(max_workers=1, thread_name_prefix=ASK_THREAD)
        self._asking: Future | None = None

    def state(self) -> BrokerState:
        with self._lock:
            return BrokerState(**vars(self._state))

    def ask(self) -> str | None:
        """Ask now (one question in flight at a time: callers meanwhile share its answer); the answer also
        updates the state (and may log a change). The question runs in the `broker-ask` thread, whose
        own client-library lines are never logged: its failure is the answer."""
        with self._lock:
            fut = self._asking
            if fut is None or fut.done():
                fut = self._asking = self._asker.submit(ask_broker, self.settings, self.timeout_s,
                                                        self.settings.kafka.topic_turns)
        answer = fut.result()
        self._update(answer.why)
        if answer.ends is not None:
            self._check_ends(answer.ends)
        return answer.why

    def _check_ends(self, ends: dict[int, int]) -> None:
        with self._lock:
            lost = lost_data(self._ends, ends)
            self._ends = ends if lost else {p: max(e, self._ends.get(p, 0)) for p, e in ends.items()}
        if lost:
            line = f"{self.settings.kafka.topic_turns}: {lost}"
            if self.on_data_lost is not None:
                self.on_data_lost(line)
            else:
                log.critical("the broker lost data: %s", line)

    def held_back(self) -> None:
        """One client-library log line held back (the filter calls this)."""
        with self._lock:
            self._state.held_back += 1
            self._held_since_down += 1

    def _update(self, why: str | None) -> None:
        now = time.time()
        with self._lock:
            st = self._state
            if why is None and not st.up:
                line = (f"broker back after {now - st.since:.0f} s; {self._held_since_down} client-library log "
                        f"lines held back meanwhile")
                st.up, st.since, st.reason = True, now, None
            elif why is not None and st.up:
                st.up, st.since, st.reason = False, now, bound(self.scrub(why), 200)
                st.outages += 1
                self._held_since_down = 0
                line = (f"broker not answering ({st.reason}); the Kafka client's own errors are held back and "
                        f"counted until it is back (/healthz 503, dialcheck_broker_up 0)")
            else:
                if why is not None:
                    st.reason = bound(self.scrub(why), 200)
                return
        (log.warning if why is None else log.error)(line)  # the worker logs WARNING and up by default

    def start(self) -> "BrokerWatch":
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="broker-watch", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.ask()
            except Exception as e:  # noqa: BLE001 - the watch must never die; say it once per kind
                log.warning("broker watch: %s", bound(self.scrub(repr(e)), 200))

    def stop(self) -> None:
        self._stop.set()
        self._asker.shutdown(wait=False)


class ClientLogFlood(logging.Filter):
    """A handler filter: the Kafka clients' WARNING and ERROR lines are held back while `watch` says the
    broker is away (counted), and otherwise each message template passes at most once per
    `every_s` (a storm of one kind while the watch has not yet noticed costs one line)."""

    def __init__(self, watch: BrokerWatch, every_s: float = TEMPLATE_EVERY_S):
        super().__init__()
        self.watch, self.every_s = watch, every_s
        self._last: dict[tuple[str, str], float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(CLIENT_LOGGERS):
            return True
        if record.name.startswith(PROBE_LOGGERS) or record.threadName.startswith(ASK_THREAD):
            return False
        if record.levelno < logging.WARNING:
            return True
        held = getattr(record, "_dialcheck_held", None)  # one filter on several handlers: decided once
        if held is None:
            held = self._hold(record)
            record._dialcheck_held = held
        return not held

    def _hold(self, record: logging.LogRecord) -> bool:
        key, now = (record.name, str(record.msg)), time.monotonic()
        if self.watch.state().up and now - self._last.get(key, -1e9) >= self.every_s:
            self._last[key] = now
            return False
        self.watch.held_back()
        return True


def install_flood_filter(watch: BrokerWatch, logger: logging.Logger | None = None) -> None:
    """Add (or refresh) the filter on every handler of `logger` (default: root), as the scrubber is
    installed: Faust configures logging when the worker starts, so this runs after that."""
    flood = ClientLogFlood(watch)
    for h in (logger or logging.getLogger()).handlers:
        for f in [f for f in h.filters if isinstance(f, ClientLogFlood)]:
            h.removeFilter(f)
        h.addFilter(flood)
