"""The broker watch's rules without a broker: when the input topic says data was lost, and what the
client-library log filter lets through (tests/test_broker_outages.py runs them against a real one)."""
from __future__ import annotations

import logging

import pytest

from schemas.settings import load_settings
from streams.broker_watch import ASK_THREAD, BrokerWatch, ClientLogFlood, lost_data

pytestmark = pytest.mark.unit


def test_an_end_offset_that_goes_back_or_a_topic_gone_is_data_lost():
    assert lost_data({0: 3, 1: 0}, {0: 0, 1: 0}) == "partition 0 ends at 0, was 3"
    assert lost_data({0: 3, 1: 4}, {0: 1, 1: 2}) == "partition 0 ends at 1, was 3 (and 1 more)"
    assert lost_data({0: 3}, {}) == "the topic is gone"
    # growth, an empty topic seen before, and a first look are not losses
    assert lost_data({0: 3}, {0: 7}) is None
    assert lost_data({0: 0}, {}) is None
    assert lost_data({}, {0: 0}) is None


def _record(name: str, level: int = logging.ERROR, msg: str = "Unable connect to node %s", thread: str = "MainThread"):
    r = logging.LogRecord(name, level, __file__, 1, msg, ("111",), None)
    r.threadName = thread
    return r


def _watch() -> BrokerWatch:
    return BrokerWatch(load_settings(kafka={"bootstrap": "127.0.0.1:9"}))


def test_while_the_broker_is_away_the_client_lines_are_held_back_and_counted():
    watch = _watch()
    flood = ClientLogFlood(watch)
    watch._update("KafkaTimeoutError: Unable to bootstrap")  # the broker went away
    assert not watch.state().up
    shown = [flood.filter(_record("aiokafka.conn")) for _ in range(100)]
    assert not any(shown) and watch.state().held_back == 100
    assert flood.filter(_record("dialcheck.stream"))  # our own lines always pass
    assert flood.filter(_record("faust.transport", logging.WARNING))
    watch._update(None)  # back
    assert watch.state().up and watch.state().outages == 1


def test_while_up_each_client_template_passes_once_a_minute_and_the_probe_is_silent():
    watch = _watch()
    flood = ClientLogFlood(watch)
    assert flood.filter(_record("aiokafka.consumer.fetcher"))
    assert not flood.filter(_record("aiokafka.consumer.fetcher"))  # the same template again
    assert flood.filter(_record("aiokafka.consumer.fetcher", msg="Another message %s"))
    assert flood.filter(_record("aiokafka", logging.INFO))  # below WARNING: untouched
    assert not flood.filter(_record("kafka.conn", logging.INFO, thread=f"{ASK_THREAD}_0"))  # the health question's own
    assert not flood.filter(_record("kafka.client", logging.ERROR))  # kafka-python: only the health question uses it
    # one record seen by two handlers is decided once, counted once
    r = _record("aiokafka.cluster", msg="Third %s")
    assert flood.filter(r) and flood.filter(r)
    held = watch.state().held_back
    r2 = _record("aiokafka.cluster", msg="Third %s")
    assert not flood.filter(r2) and not flood.filter(r2) and watch.state().held_back == held + 1
