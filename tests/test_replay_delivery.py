"""A turn the broker never acknowledged is reported, not counted as sent (streams/replay.py).

Why: `dialcheck replay` and the stream tests judge "nothing lost" from what they sent; a send that
failed after the producer's retries used to vanish (kafka-python reports it only on the future),
so a lost input looked like a worker bug or, worse, like a complete replay."""
from __future__ import annotations

import pytest

from schemas import ChatTurn
from schemas.settings import load_settings
from streams.replay import TurnProducer, UndeliveredTurns
from streams.topics import ensure_topics

pytestmark = pytest.mark.broker

FAST_FAIL = {"retries": 0, "request_timeout_ms": 1500, "delivery_timeout_ms": 3000, "max_block_ms": 3000,
             "reconnect_backoff_max_ms": 200}


def test_a_send_the_broker_never_acknowledged_raises_on_flush(fresh_broker):
    s = load_settings(kafka={"bootstrap": fresh_broker.bootstrap})
    ensure_topics(s)
    producer = TurnProducer(s, **FAST_FAIL)
    try:
        producer.send_turn(ChatTurn("c1", "t1", "user", "delivered"))
        producer.flush()  # acknowledged: no error
        assert sum(producer.sent_end.values()) == 1
        fresh_broker.stop()
        producer.send_turn(ChatTurn("c1", "t2", "user", "never acknowledged"))
        with pytest.raises(UndeliveredTurns, match="1 turn"):
            producer.flush()
        assert sum(producer.sent_end.values()) == 1  # the failed turn is not counted as sent
    finally:
        producer.producer.close(timeout=1)
