"""The group and producer settings follow the broker: Tansu's workarounds (one record per produce
batch, a 6 s session timeout) only against Tansu; against Kafka the producer batches and the session
timeout is Kafka's usual. Checked on the Faust app the worker builds (its effective `conf`), and the
kind's detection against the real embedded broker. No Kafka cluster runs here, so "kafka" is only
ever chosen by the setting in these tests."""
from __future__ import annotations

import pytest

from schemas.settings import load_settings
from streams.app import create_app
from streams.kafka_config import faust_client_kwargs


class _NoChecker:
    def check_turns(self, items):
        raise AssertionError("not called: no stream runs here")


def _conf(**kafka):
    s = load_settings(kafka={"bootstrap": "127.0.0.1:9", **kafka}, stream={"feedback_store": "off"})
    return create_app(s, _NoChecker()).conf


@pytest.mark.unit
def test_tansu_gets_its_workarounds_and_kafka_batches():
    tansu, kafka = _conf(broker_kind="tansu"), _conf(broker_kind="kafka", linger_ms=7.0, batch_bytes=65536)
    assert (tansu.producer_max_batch_size, tansu.producer_linger, tansu.broker_session_timeout,
            tansu.broker_heartbeat_interval) == (1, 0.0, 6.0, 1.0)
    assert (kafka.producer_max_batch_size, kafka.producer_linger, kafka.broker_session_timeout,
            kafka.broker_heartbeat_interval) == (65536, 0.007, 45.0, 3.0)


@pytest.mark.unit
def test_kafka_defaults_batch_and_an_unresolved_kind_is_refused():
    kw = faust_client_kwargs(load_settings(), "kafka")
    assert kw["producer_max_batch_size"] >= 16384 and kw["producer_linger"] > 0
    with pytest.raises(ValueError, match="broker kind"):
        faust_client_kwargs(load_settings(), "auto")  # resolved first (streams/broker.py broker_kind)


def test_auto_detects_the_embedded_broker_as_tansu(broker):
    from streams.broker import broker_kind, kafka_for

    s = load_settings(kafka={"bootstrap": broker.bootstrap})
    assert s.kafka.broker_kind == "auto" and broker_kind(s) == "tansu"
    assert broker_kind(s.updated(kafka={"broker_kind": "kafka"})) == "kafka"  # the setting wins
    with kafka_for(load_settings(kafka={"bootstrap": ""})) as started:  # one we start says so itself
        assert started.kafka.broker_kind == "tansu"
