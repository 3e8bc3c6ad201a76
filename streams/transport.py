"""Faust's aiokafka transport with the consumer's fetch wait as a setting (`stream.fetch_wait_ms`).

Why: faust-streaming 0.15.3 hard-codes `fetch_max_wait_ms=1500` for the worker's consumer. A broker
that honours long polling answers as soon as a record arrives, but one that holds every fetch for
the full wait (Tansu does, measured) puts a 1.5 s floor under produce → verdict latency. The
broker URL scheme `dialcheck://` selects this transport; everything else is Faust's own."""
from __future__ import annotations

from faust.transport.drivers import TRANSPORTS
from faust.transport.drivers import aiokafka as faust_aiokafka

SCHEME = "dialcheck"


class ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport):
        consumer = super()._create_worker_consumer(transport)
        wait_ms = getattr(self.app, "dialcheck_fetch_wait_ms", None)
        if wait_ms is not None:
            # aiokafka keeps the constructor argument here and hands it to its Fetcher at start()
            consumer._fetch_max_wait_ms = int(wait_ms)
        return consumer


class Consumer(faust_aiokafka.Consumer):
    def _new_consumer_thread(self) -> ConsumerThread:
        return ConsumerThread(self, loop=self.loop, beacon=self.beacon)


class Transport(faust_aiokafka.Transport):
    Consumer = Consumer


TRANSPORTS.aliases[SCHEME] = "streams.transport:Transport"
