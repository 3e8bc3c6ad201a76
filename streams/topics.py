"""Create the stream topics up front, with the same partition count everywhere.

Why: the context table's changelog must have as many partitions as `chat.turns` (the table is
partitioned by conversation id, like the input), and so must chat.knowledge (its table is keyed like
the context, its partitions assigned with the turns' of the same number), and a producer that writes
before any worker ran must not make the broker auto-create a topic with some other partition count.
"""
from __future__ import annotations

import time

from schemas.settings import Settings

from .kafka_config import kafka_python_kwargs


def stream_topics(settings: Settings) -> list[str]:
    k = settings.kafka
    return [k.topic_turns, k.topic_verdicts, k.topic_deadletter, k.topic_knowledge, k.topic_feedback]


def ensure_topics(settings: Settings, topics: list[str] | None = None, timeout_s: float = 30.0) -> None:
    """Create missing topics (idempotent; existing topics are left as they are)."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import KafkaError, TopicAlreadyExistsError

    topics = topics or stream_topics(settings)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            admin = KafkaAdminClient(client_id="dialcheck-admin", **kafka_python_kwargs(settings))
            break
        except KafkaError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    try:
        existing = set(admin.list_topics())
        new = [NewTopic(t, settings.kafka.topic_partitions, settings.kafka.topic_replication) for t in topics if t not in existing]
        for t in new:  # one at a time: an "already exists" from a racing creator must not hide the others
            try:
                admin.create_topics([t])
            except TopicAlreadyExistsError:
                pass
    finally:
        admin.close()


def knowledge_mismatch(settings: Settings, turn_partitions: int) -> str | None:
    """Why chat.knowledge cannot serve chat.turns (None: it can): its partitions must be as many as
    the turns' (a conversation's knowledge and turns are assigned to one worker by partition number)."""
    topic = settings.kafka.topic_knowledge
    n = partition_count(settings, topic)
    if n is None or n == turn_partitions:
        return None
    return (f"{topic} has {n} partitions but {settings.kafka.topic_turns} has {turn_partitions}: a conversation's "
            f"knowledge would sit with another worker than its turns; recreate {topic} with {turn_partitions} "
            "partitions (or name another topic: DIALCHECK_TOPIC_KNOWLEDGE)")


def partition_count(settings: Settings, topic: str) -> int | None:
    """Partitions the broker reports for `topic` (None if it does not exist)."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(**kafka_python_kwargs(settings))
    try:
        for _ in range(3):  # the first metadata answer can come back before the topic is known
            parts = consumer.partitions_for_topic(topic)
            if parts:
                return len(parts)
            time.sleep(0.3)
        return None
    finally:
        consumer.close()
