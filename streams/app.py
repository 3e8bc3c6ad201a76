"""The Faust app: chat.turns → validate → context table → batched pipeline call → chat.verdicts;
chat.knowledge → validate → the knowledge table (streams/knowledge.py), read by the turns;
chat.feedback → validate → the feedback store (streams/feedback.py).

Only the wiring lives here (app settings, topics, tables, agents, task, timer, the SIGHUP handler of
streams/reload.py); the Faust app itself, its fixes and the one ack rule are streams/kafka/'s; what
happens to a batch of turns is streams/turn_worker.py's `TurnWorker`, to a
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

from schemas.protocols import Checker
from schemas.settings import Settings
from schemas.settings.stream import feedback_off

from . import reload
from .broker import broker_kind
from .drift_watch import DriftWatch
from .feedback import FeedbackWorker
from .feedback_store import FeedbackStore
from .knowledge import KNOWLEDGE_TABLE, KnowledgeGauges, KnowledgeWorker
from .kafka.app import KafkaApp
from .kafka.internals import rebalancing, wait_recovered
from .kafka_config import faust_broker_kwargs, faust_client_kwargs
from .observability import Observability
from .outbox import Outage, StoreWriter
from .processes import free_port
from .recovery import recovery_stuck
from .turn_worker import AttemptsTable, TurnWorker

READY_MARKER = "dialcheck worker ready"
TABLE_NAME = "context"
ATTEMPTS_TABLE = "attempts"
WORKER_TABLES = (TABLE_NAME, ATTEMPTS_TABLE, KNOWLEDGE_TABLE)  # each restored from <app id>-<name>-changelog


def feedback_enabled(settings: Settings) -> bool:
    """DIALCHECK_FEEDBACK_STORE=off: no chat.feedback agent and no verdicts kept."""
    return not feedback_off(settings.stream.feedback_store)


def create_app(settings: Settings, checker: Checker, store: FeedbackStore | None = None,
               obs: Observability | None = None) -> KafkaApp:
    """Build the worker app around `checker` (its `check_turns`); `store` keeps the published
    verdicts and the chat.feedback judgements (opened from the settings when not given); `obs` serves
    /metrics, /healthz, /readyz (`app.obs.serve()`; a fresh one when not given)."""
    st = settings.stream
    feedback = feedback_enabled(settings)
    if feedback and store is None:
        store = FeedbackStore(st.feedback_store, busy_timeout_s=st.feedback_busy_timeout_s)
    obs = obs or Observability(settings)
    obs.outage = Outage()  # what is down now: /readyz and dialcheck_degraded
    kind = broker_kind(settings)
    app = KafkaApp(
        settings,
        obs=obs,
        keep_input_topics={settings.kafka.topic_turns, settings.kafka.topic_knowledge,
                           *([settings.kafka.topic_feedback] if feedback else [])},
        **faust_broker_kwargs(settings),
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
    parts = settings.kafka.topic_partitions
    turns_topic = app.topic(settings.kafka.topic_turns, key_type=bytes, value_type=bytes,
                            key_serializer="raw", value_serializer="raw", partitions=parts)
    verdicts_topic = app.topic(settings.kafka.topic_verdicts, key_serializer="raw", value_serializer="raw",
                               partitions=parts)
    table = app.Table(TABLE_NAME, default=None, use_partitioner=True, partitions=parts,
                      key_type=bytes)  # bytes keys → raw serializer: hashes like the input key; values JSON
    attempts = AttemptsTable(app.Table(ATTEMPTS_TABLE, default=None, use_partitioner=True, partitions=parts,
                                       key_type=bytes), parts)
    knowledge = KnowledgeWorker(app, settings, outbox=app.outbox,  # keyed and partitioned like the context
                                table=app.Table(KNOWLEDGE_TABLE, default=None, use_partitioner=True, partitions=parts,
                                                key_type=bytes))
    outbox = app.outbox
    writer = (StoreWriter(store, backoff_s=st.send_backoff_s, scrub=outbox.scrub, outage=obs.outage,
                          counters=outbox.counters) if feedback else None)
    worker = TurnWorker(app, settings, checker, outbox=outbox, table=table, attempts=attempts,
                        verdicts_topic=verdicts_topic, obs=obs, store_writer=writer, knowledge=knowledge)

    def steps(stream, **by_weight):  # both agents cut their input the same way (StepStream.take_steps)
        return stream.take_steps(max_events=st.take_events, within=st.batch_within_s,
                                 idle_s=st.batch_idle_ms / 1000, **by_weight)

    @app.agent(turns_topic, name="check-turns")
    async def check_turns(stream):
        async for events in steps(stream, weigh=worker.weigh, max_weight=st.take_checked):
            await worker.handle(events)

    knowledge_topic = app.topic(settings.kafka.topic_knowledge, key_type=bytes, value_type=bytes,
                                key_serializer="raw", value_serializer="raw", partitions=parts)

    @app.agent(knowledge_topic, name="keep-knowledge")
    async def keep_knowledge(stream):
        async for events in steps(stream):
            await knowledge.handle(events)

    if feedback:
        feedback_topic = app.topic(settings.kafka.topic_feedback, key_type=bytes, value_type=bytes,
                                   key_serializer="raw", value_serializer="raw", partitions=parts)
        judgements = FeedbackWorker(outbox, writer)

        @app.agent(feedback_topic, name="store-feedback")
        async def store_feedback(stream):
            async for events in steps(stream):
                await judgements.handle(events)

    @app.task
    async def announce_ready():
        worker.install_scrubber()
        obs.watch_broker()  # after Faust configured logging: its handlers get the flood filter
        if reload.install(asyncio.get_running_loop(), checker, worker.scrub):  # SIGHUP: re-read model and display
            reload.write_pid_file(st.pid_file)
        try:  # a broker that lost its data leaves recovery waiting forever: say so, exit 3 (streams/recovery.py)
            await asyncio.wait_for(wait_recovered(app), timeout=st.recovery_timeout_s)
        except asyncio.TimeoutError:
            recovery_stuck(settings)
        worker.install_scrubber()
        print(f"{READY_MARKER}: app={st.app_id} broker={worker.scrub(settings.kafka.bootstrap)} "
              f"broker_kind={kind} conversations={len(table)}", flush=True)

    drift = DriftWatch(store, st.precision_target, st.precision_confidence) if feedback else None

    @app.timer(st.status_interval_s)
    async def sweep_and_report():
        """Evict idle and least recently active conversations (owned partitions only, not while
        rebalancing), then print the status line if it changed."""
        owned = worker.owned_partitions()
        if not rebalancing(app):
            worker.sweep(owned)
        if (line := worker.new_status(owned)) is not None:
            print(line, flush=True)
        if drift is not None and (line := await asyncio.to_thread(drift.line)) is not None:
            print(line, flush=True)

    obs.attach(app, table, worker.counters, checker=checker)  # its caches, LLM replies, model versions
    obs.registry.register(KnowledgeGauges(knowledge))  # the knowledge table's memory on /metrics
    if feedback:
        obs.attach_feedback(store, st.precision_target, st.precision_confidence)
    return app
