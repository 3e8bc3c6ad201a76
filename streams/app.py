"""The Faust app: chat.turns → validate → context table → batched pipeline call → chat.verdicts;
chat.feedback → validate → the feedback store (streams/feedback.py).

Only the wiring lives here (app settings, topics, tables, agents, task, timer, the SIGHUP handler of
streams/reload.py); what happens to a batch of turns is streams/turn_worker.py's `TurnWorker`, to a
batch of feedback streams/feedback.py's `FeedbackWorker`, and how both deliver their outputs and
acknowledge their input (every delivery guarantee) is the one outbox's (streams/outbox.py).

Why these settings (docs/local-stack.md "Kafka"):
- at_least_once only; outputs are idempotent instead (stable claim ids, downstream dedups).
- the group's session timeout and the producer's batching depend on the broker: Tansu's workarounds
  (one record per batch, 6 s) only against Tansu, Kafka's batching and timeouts against Kafka
  (streams/kafka_config.py `faust_client_kwargs`, the `broker_kind` setting).
- the tables use the key partitioner (`use_partitioner=True`): a batch from `take_events` mixes
  partitions, so "the current event's partition" is not the key's partition; the raw key bytes
  hash exactly like the producer's key on chat.turns, so table partition == input partition.
"""
from __future__ import annotations

import asyncio

import faust
from mode.utils.objects import cached_property

from schemas.protocols import Checker
from schemas.settings import Settings

from . import reload, transport
from .broker import broker_kind
from .checking import Scrubber
from .feedback import FeedbackWorker
from .feedback_store import FeedbackStore
from .kafka_config import faust_broker_kwargs, faust_client_kwargs
from .observability import Observability
from .outbox import Outage, Outbox, StoreWriter
from .processes import free_port
from .take import take_steps
from .turn_worker import AttemptsTable, TurnWorker

READY_MARKER = "dialcheck worker ready"
TABLE_NAME = "context"
ATTEMPTS_TABLE = "attempts"


class DialcheckApp(faust.App):
    """Faust's App whose flow control never drops queued input turns on resume, and whose consumer
    never hands out one input offset twice per assignment (streams/transport.py)."""

    def __init__(self, *args, keep_topics=(), **kwargs):
        self.keep_topics = frozenset(keep_topics)  # read by streams/transport.py's flow control and Consumer
        super().__init__(*args, **kwargs)

    @cached_property
    def flow_control(self) -> transport.KeepInputFlowControl:
        return transport.KeepInputFlowControl(self.keep_topics, loop=self.loop)


def feedback_enabled(settings: Settings) -> bool:
    """DIALCHECK_FEEDBACK_STORE=off: no chat.feedback agent and no verdicts kept."""
    return settings.stream.feedback_store.strip().lower() != "off"


def create_app(settings: Settings, checker: Checker, store: FeedbackStore | None = None) -> faust.App:
    """Build the worker app around `checker` (its `check_turns`); `store` keeps the published
    verdicts and the chat.feedback judgements (opened from the settings when not given)."""
    st = settings.stream
    feedback = feedback_enabled(settings)
    if feedback and store is None:
        store = FeedbackStore(st.feedback_store)
    broker = faust_broker_kwargs(settings)
    kind = broker_kind(settings)
    app = DialcheckApp(
        st.app_id,
        keep_topics={settings.kafka.topic_turns, *([settings.kafka.topic_feedback] if feedback else [])},
        **broker,
        # the consumer's fetch wait is a setting (Faust hard-codes 1.5 s): streams/transport.py
        broker_consumer=broker["broker"].replace("kafka://", f"{transport.SCHEME}://"),
        processing_guarantee="at_least_once",
        **faust_client_kwargs(settings, kind),
        consumer_auto_offset_reset="earliest",
        store="memory://",
        datadir=str(st.state_path),  # Faust's default is ./<app id>-data in the current directory
        topic_partitions=settings.kafka.topic_partitions,
        topic_replication_factor=settings.kafka.topic_replication,
        topic_allow_declare=True,
        web_enabled=False,
        web_bind="127.0.0.1",
        web_port=free_port(),
        key_serializer="raw",
        value_serializer="raw",
    )
    app.dialcheck_fetch_wait_ms = st.fetch_wait_ms
    parts = settings.kafka.topic_partitions
    turns_topic = app.topic(settings.kafka.topic_turns, key_type=bytes, value_type=bytes,
                            key_serializer="raw", value_serializer="raw", partitions=parts)
    verdicts_topic = app.topic(settings.kafka.topic_verdicts, key_serializer="raw", value_serializer="raw",
                               partitions=parts)
    dead_topic = app.topic(settings.kafka.topic_deadletter, key_serializer="raw", value_serializer="raw",
                           partitions=parts)
    table = app.Table(TABLE_NAME, default=None, use_partitioner=True, partitions=parts,
                      key_type=bytes)  # bytes keys → raw serializer: hashes like the input key; values JSON
    attempts = AttemptsTable(app.Table(ATTEMPTS_TABLE, default=None, use_partitioner=True, partitions=parts,
                                       key_type=bytes), parts)
    obs = Observability(settings)  # /metrics, /healthz, /readyz (served by run_worker)
    outbox = Outbox(app, settings, dead_topic=dead_topic, obs=obs, scrub=Scrubber.from_settings(settings))
    obs.outage = Outage()  # what is down now: /readyz and dialcheck_degraded
    writer = (StoreWriter(store, backoff_s=st.send_backoff_s, scrub=outbox.scrub, outage=obs.outage,
                          counters=outbox.counters) if feedback else None)
    worker = TurnWorker(app, settings, checker, table=table, attempts=attempts, verdicts_topic=verdicts_topic,
                        dead_topic=dead_topic, obs=obs, store_writer=writer, outbox=outbox)

    def steps(stream, **by_weight):  # both agents cut their input the same way (streams/take.py)
        return take_steps(stream, max_events=st.take_events, within=st.batch_within_s,
                          idle_s=st.batch_idle_ms / 1000, **by_weight)

    @app.agent(turns_topic, name="check-turns")
    async def check_turns(stream):
        async for events in steps(stream, weigh=worker.weigh, max_weight=st.take_checked):
            await worker.handle(events)

    if feedback:
        feedback_topic = app.topic(settings.kafka.topic_feedback, key_type=bytes, value_type=bytes,
                                   key_serializer="raw", value_serializer="raw", partitions=parts)
        judgements = FeedbackWorker(outbox, writer)

        @app.agent(feedback_topic, name="store-feedback")
        async def store_feedback(stream):
            async for events in steps(stream):
                await judgements.handle(events)

        app.dialcheck_feedback_store = store

    @app.task
    async def announce_ready():
        worker.install_scrubber()
        reload.install(asyncio.get_running_loop(), checker, worker.scrub)  # SIGHUP: re-read the display file
        await app.tables.recovery.completed.wait()
        worker.install_scrubber()
        print(f"{READY_MARKER}: app={st.app_id} broker={worker.scrub(settings.kafka.bootstrap)} "
              f"broker_kind={kind} conversations={len(table)}", flush=True)

    @app.timer(st.status_interval_s)
    async def sweep_and_report():
        """Evict idle and least recently active conversations (owned partitions only, not while
        rebalancing), then print the status line."""
        owned = worker.owned_partitions()
        if not app.rebalancing:
            worker.sweep(owned)
        print(worker.status_line(owned), flush=True)

    app.dialcheck_table = table  # for tests and introspection
    app.dialcheck_worker = worker
    app.dialcheck_broker_kind = kind
    obs.attach(app, table, worker.counters, checker=checker)  # its cache hit rates on /metrics
    if feedback:
        obs.attach_feedback(store, st.precision_target, st.precision_confidence)
    app.dialcheck_obs = obs
    return app
