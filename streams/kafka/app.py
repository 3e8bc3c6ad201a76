"""The worker's Faust app, extended through Faust's own seams and given its collaborators.

- `KafkaSettings` (the App's `Settings` class): the settings Faust lacks, `consumer_fetch_max_wait_ms`
  and `keep_input_topics`, read by the transport (streams/kafka/internals.py points 1, 3, 4, 6).
- the `Stream` setting: `StepStream`, whose `take_steps` cuts the agents' input into steps.
- the transports registry: the consumer's URL scheme `dialcheck://` selects the fixed transport.
- collaborators through the constructor: the dialcheck settings and the observability; the app
  builds its one ack rule (`acks`) and its one outbox (`outbox`) from them, and the transport, the
  take loop and the agents all reach them here, by name, statically.
"""
from __future__ import annotations

import faust
from faust.types.settings import params, sections
from mode.utils.objects import cached_property

from schemas.settings import Settings

from ..checking import Scrubber
from ..observability import Observability
from ..outbox import Outbox
from .acks import Acks
from .internals import SCHEME, KeepInputFlowControl, StepStream


class KafkaSettings(faust.Settings):
    """Faust's settings and two more (Faust's own `Settings` subclass seam)."""

    @sections.Consumer.setting(params.UnsignedInt, version_introduced="dialcheck", default=1500)
    def consumer_fetch_max_wait_ms(self) -> int:
        """Longest a fetch of the worker's consumer waits for records (faust-streaming hard-codes 1,500)."""

    @sections.Stream.setting(params.Param, version_introduced="dialcheck", default=frozenset())
    def keep_input_topics(self) -> frozenset:
        """Input topics whose queued events survive a resume of the flow and are handed out once per
        assignment (streams/kafka/internals.py points 3, 4, 6)."""


class KafkaApp(faust.App):
    """faust.App with KafkaSettings, StepStream, the fixed transport, and the worker's collaborators."""

    Settings = KafkaSettings

    def __init__(self, settings: Settings, *, obs: Observability, keep_input_topics=(), broker: str,
                 **options):
        self.settings, self.obs = settings, obs
        super().__init__(settings.stream.app_id, broker=broker,
                         broker_consumer=broker.replace("kafka://", f"{SCHEME}://"),
                         consumer_fetch_max_wait_ms=settings.stream.fetch_wait_ms,
                         keep_input_topics=frozenset(keep_input_topics), Stream=StepStream, **options)

    @cached_property
    def flow_control(self) -> KeepInputFlowControl:
        return KeepInputFlowControl(self.conf.keep_input_topics, loop=self.loop)

    @cached_property
    def acks(self) -> Acks:
        """The one ack rule of this app (streams/kafka/acks.py)."""
        return Acks(lambda: self.consumer, trace=self.settings.stream.trace_records)

    @cached_property
    def outbox(self) -> Outbox:
        """The one outbox of this app: every agent's outputs, dead letters and acks (streams/outbox.py)."""
        s = self.settings
        dead = self.topic(s.kafka.topic_deadletter, key_serializer="raw", value_serializer="raw",
                          partitions=s.kafka.topic_partitions)
        return Outbox(self, s, dead_topic=dead, obs=self.obs, acks=self.acks, scrub=Scrubber.from_settings(s))
