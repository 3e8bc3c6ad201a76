"""The contract between streams/kafka/internals.py and the pinned faust-streaming and aiokafka: every
private name it relies on (`RELIED_ON`) still exists, and the upstream behaviour each fix works around
is still there. Why: a Faust or aiokafka upgrade that moves one of them must fail here, in a second,
rather than as a lost turn in a broker test (or not at all)."""
from __future__ import annotations

import asyncio
import inspect
import re
from importlib.metadata import version
from types import SimpleNamespace

import pytest

from schemas.settings import REPO_ROOT
from streams.kafka import internals

pytestmark = pytest.mark.unit


def _pinned(dist: str) -> str:
    text = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    return re.search(rf'"{re.escape(dist)}(?:\[[^\]]*\])?==([^"]+)"', text).group(1)


@pytest.mark.parametrize("dist", ["faust-streaming", "aiokafka"])
def test_the_installed_versions_are_the_pinned_ones(dist):
    assert version(dist) == _pinned(dist), f"{dist} changed: re-read streams/kafka/internals.py, then this pin"


def test_modes_resume_still_clears_queued_events_and_ours_keeps_the_input_turns():
    """Point 3, on mode-streaming (pulled in by faust-streaming, not pinned by us): its flow control
    clears every managed queue on resume; KeepInputFlowControl keeps the input topics' events. When
    mode keeps them itself, the override can go."""
    from mode.utils.queues import FlowControlEvent, FlowControlQueue

    async def left_after_resume(flow_control) -> list[str]:
        queue = FlowControlQueue(flow_control=flow_control, clear_on_resume=True)
        for topic in ("chat.turns", "a-changelog", "chat.turns"):
            queue.put_nowait(SimpleNamespace(message=SimpleNamespace(topic=topic)))
        flow_control.resume()
        return [queue.get_nowait().message.topic for _ in range(queue.qsize())]

    assert asyncio.run(left_after_resume(FlowControlEvent())) == []
    assert asyncio.run(left_after_resume(internals.KeepInputFlowControl({"chat.turns"}))) == ["chat.turns"] * 2


def _in_an_app(check):
    """check(app) inside a running loop, on a real faust.App (in-memory transport, no broker)."""
    import faust

    async def run():
        return await check(faust.App("dialcheck-contract", broker="memory://", store="memory://"))

    return asyncio.run(run())


def test_rebalancing_holds_from_a_rebalances_start_to_its_end():
    """The worker sweeps idle conversations only when no rebalance is moving partitions."""
    async def check(app):
        seen = [internals.rebalancing(app)]
        app.on_rebalance_start()
        seen.append(internals.rebalancing(app))
        app.on_rebalance_end()
        return seen + [internals.rebalancing(app)]

    assert _in_an_app(check) == [False, True, False]


def test_owned_partitions_are_the_topics_active_ones_of_fausts_assignment():
    """The assignment as Faust's assignor receives it from the group: a standby partition is not owned."""
    from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
    from faust.assignor.client_assignment import ClientAssignment, ClientMetadata

    async def check(app):
        assignor = app.assignor
        before = internals.owned_partitions(app, "chat.turns")
        given = ClientAssignment(actives={"chat.turns": [0, 2], "other": [1]}, standbys={"chat.turns": [1]})
        meta = ClientMetadata(assignment=given, url=str(assignor._url), changelog_distribution={}, topic_groups={})
        assignor.on_assignment(ConsumerProtocolMemberAssignment(0, [("chat.turns", [0, 2]), ("other", [1])],
                                                                assignor._compress(meta.dumps())))
        return before, internals.owned_partitions(app, "chat.turns")

    assert _in_an_app(check) == (set(), {0, 2})


def test_recovered_follows_the_end_of_fausts_table_recovery():
    """/readyz and the ready line wait for the tables' recovery; `wait_recovered` returns only then."""
    async def check(app):
        waiting = asyncio.ensure_future(internals.wait_recovered(app))
        await asyncio.sleep(0.05)
        before = (internals.recovered(app), waiting.done())
        app.tables.recovery.completed.set()  # what Faust's Recovery does when every table is read
        await asyncio.wait_for(waiting, timeout=5)
        return before, internals.recovered(app)

    assert _in_an_app(check) == ((False, False), True)


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


UNDOCUMENTED = re.compile(r"\.(?:tables\.recovery|assignor\.|rebalancing\b|_consumer\b|flow_control\b)")


def test_fausts_undocumented_attributes_are_read_in_streams_kafka_only():
    """The app's state goes through streams/kafka/internals.py, so an upgrade is re-read in one place."""
    found = [f"{path.relative_to(REPO_ROOT)}:{n}" for package in ("streams", "dialcheck", "workers", "lab")
             for path in sorted((REPO_ROOT / package).rglob("*.py")) if "kafka" not in path.relative_to(REPO_ROOT).parts
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if UNDOCUMENTED.search(line)]
    assert not found, found
