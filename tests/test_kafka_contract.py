"""The contract between streams/kafka/internals.py and the pinned faust-streaming and aiokafka: every
private name it relies on (`RELIED_ON`) still exists, and the upstream behaviour each fix works around
is still there. Why: a Faust or aiokafka upgrade that moves one of them must fail here, in a second,
rather than as a lost turn in a broker test (or not at all)."""
from __future__ import annotations

import inspect
import re
from importlib.metadata import version

import pytest

from schemas.settings import REPO_ROOT
from streams.kafka import internals

pytestmark = pytest.mark.unit


def _pinned(dist: str) -> str:
    text = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    return re.search(rf'"{re.escape(dist)}(?:\[[^\]]*\])?==([^"]+)"', text).group(1)


@pytest.mark.parametrize("dist", ["faust-streaming", "aiokafka", "mode-streaming"])
def test_the_installed_versions_are_the_pinned_ones(dist):
    if dist == "mode-streaming":  # pulled in by faust-streaming, not pinned by us: read its source below
        assert version(dist)
        return
    assert version(dist) == _pinned(dist), f"{dist} changed: re-read streams/kafka/internals.py, then this pin"


@pytest.mark.parametrize("owner,name", internals.RELIED_ON,
                         ids=[f"{getattr(o, '__name__', o)}.{n}" for o, n in internals.RELIED_ON])
def test_every_private_name_relied_on_is_still_there(owner, name):
    if hasattr(owner, name):
        return
    source = "".join(inspect.getsource(inspect.getmodule(c)) for c in inspect.getmro(owner)
                     if c.__module__ not in ("builtins", "typing"))
    assert re.search(rf"self\.{re.escape(name)}\b\s*(?::[^=\n]+)?=", source), f"{owner}.{name} is gone"


def test_fausts_consumer_still_hard_codes_the_fetch_wait():
    """Point 1: when Faust makes the fetch wait configurable, use its setting instead."""
    from faust.transport.drivers import aiokafka as faust_aiokafka

    assert "fetch_max_wait_ms=1500" in inspect.getsource(faust_aiokafka.AIOKafkaConsumerThread._create_worker_consumer)


def test_aiokafkas_partition_records_take_the_arguments_the_guard_passes():
    """Point 5: GuardedPartitionRecords is built by aiokafka's Fetcher with these arguments."""
    from aiokafka.consumer import fetcher

    base = internals.GuardedPartitionRecords.__bases__[0]  # aiokafka's, whatever guard_fetcher replaced
    ours = inspect.signature(internals.GuardedPartitionRecords.__init__).parameters
    theirs = inspect.signature(base.__init__).parameters
    assert len(ours) == len(theirs) and all(p.kind == p.POSITIONAL_OR_KEYWORD for p in theirs.values())
    assert "PartitionRecords(" in inspect.getsource(fetcher.Fetcher)


def test_aiokafkas_seek_to_committed_still_skips_partitions_never_committed():
    """Point 6: aiokafka seeks only where an offset above 0 was committed; when it seeks every
    partition with a committed offset (or to the reset policy otherwise), the override can go."""
    from aiokafka import AIOKafkaConsumer

    assert "if offset and offset > 0:" in inspect.getsource(AIOKafkaConsumer.seek_to_committed)


def test_take_steps_is_still_modelled_on_fausts_take_events():
    """Point 7: the loop is take_events' own; these are the calls it copies."""
    import faust

    src = inspect.getsource(faust.Stream.take_events)
    for call in ("_enable_passive(", "add_processor(", "_processors.remove(", "enable_acks = False", "self.ack(event)"):
        assert call in src, call
    assert "_active_agens" in inspect.getsource(faust.Stream)
