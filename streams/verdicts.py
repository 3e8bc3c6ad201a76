"""Read the output topics: verdicts deduplicated by claim id, and dead letters (scoring is the CLI's: `dialcheck score`).

Why dedup here: the worker is at-least-once (a crash replays the uncommitted batch), so a consumer
keeps the first verdict per claim id; the ids are stable across redeliveries and workers.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterator

from schemas.settings import Settings
import orjson

from schemas import InvalidEvent, Verdict, parse_verdict

from .deadletter import DeadLetter
from .kafka_config import kafka_python_kwargs


class TopicReader:
    """Reads every partition of a topic without a consumer group, from the beginning or from given
    offsets (e.g. the end offsets taken just before a replay)."""

    def __init__(self, settings: Settings, topic: str, start: dict[int, int] | None = None):
        from kafka import KafkaConsumer, TopicPartition

        self.topic = topic
        # short fetch wait: a reader measures arrival times (Tansu may hold a fetch its full wait)
        self.consumer = KafkaConsumer(enable_auto_commit=False, group_id=None, fetch_max_wait_ms=50,
                                      **kafka_python_kwargs(settings))
        parts = None
        deadline = time.monotonic() + 30
        while not parts:
            parts = self.consumer.partitions_for_topic(topic)
            if not parts:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"topic {topic} has no partitions (does it exist?)")
                time.sleep(0.2)
        self.tps = [TopicPartition(topic, p) for p in sorted(parts)]
        self.consumer.assign(self.tps)
        if start is None:
            self.consumer.seek_to_beginning(*self.tps)
        else:
            for tp in self.tps:
                self.consumer.seek(tp, start.get(tp.partition, 0))

    def end_offsets(self) -> dict[int, int]:
        return {tp.partition: off for tp, off in self.consumer.end_offsets(self.tps).items()}

    def poll(self, timeout_s: float = 0.5) -> list:
        batches = self.consumer.poll(timeout_ms=int(timeout_s * 1000))
        return [rec for recs in batches.values() for rec in recs]

    def drain(self, idle_s: float = 3.0) -> Iterator:
        """Everything up to the end offsets as of now (or until nothing came for `idle_s`: Tansu
        can report an end offset past the last record of a multi-record batch)."""
        end = self.end_offsets()
        last = time.monotonic()
        while any(self.consumer.position(tp) < end[tp.partition] for tp in self.tps):
            recs = self.poll(0.5)
            if recs:
                last = time.monotonic()
                yield from recs
            elif time.monotonic() - last > idle_s:
                return

    def close(self) -> None:
        self.consumer.close()

    def __enter__(self) -> "TopicReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def end_offsets(settings: Settings, topic: str) -> dict[int, int]:
    with TopicReader(settings, topic) as r:
        return r.end_offsets()


@dataclass
class VerdictLog:
    """First verdict per claim id, plus how many duplicates were dropped and when each arrived.

    `window` bounds memory for long-running readers (`dialcheck verdicts --follow`): only the last
    `window` claim ids (and their verdicts) are kept, oldest forgotten first (counted in
    `forgotten`); a duplicate arriving after its claim id was forgotten is passed on again.
    Redeliveries follow their original within seconds to minutes, so a window of many thousands of
    claims catches them. None: unbounded (tests, scoring, the demo)."""
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    received_at: dict[str, float] = field(default_factory=dict)
    duplicates: int = 0
    invalid: int = 0
    window: int | None = None
    forgotten: int = 0

    schema_errors: list[str] = field(default_factory=list)

    def add_raw(self, raw: bytes, now: float | None = None) -> Verdict | None:
        try:
            v = parse_verdict(raw)
        except InvalidEvent as e:  # off-schema but readable: keep it (never drop a claim), say so
            self._note_schema_error(e.reason)
            try:
                v = Verdict.from_dict(orjson.loads(raw))
            except Exception:  # noqa: BLE001
                self.invalid += 1
                return None
        except Exception:  # noqa: BLE001 - a foreign or corrupt record on the topic is counted, not fatal
            self.invalid += 1
            return None
        if v.claim_id in self.verdicts:
            self.duplicates += 1
            return None
        self.verdicts[v.claim_id] = v
        self.received_at[v.claim_id] = time.time() if now is None else now
        if self.window is not None:
            while len(self.verdicts) > self.window:  # dicts keep insertion order: oldest first
                oldest = next(iter(self.verdicts))
                del self.verdicts[oldest]
                self.received_at.pop(oldest, None)
                self.forgotten += 1
        return v

    def _note_schema_error(self, reason: str) -> None:
        if self.window is None or len(self.schema_errors) < self.window:
            self.schema_errors.append(reason[:1024])


def collect_verdicts(settings: Settings, expected: set[str], timeout_s: float, start: dict[int, int] | None = None,
                     log: VerdictLog | None = None, alive=lambda: True, done=None) -> VerdictLog:
    """Consume verdicts until every expected claim id arrived (or `done(log)`), the timeout passed,
    or `alive()` turns false (the worker died)."""
    log = VerdictLog() if log is None else log
    done = done or (lambda lg: expected <= lg.verdicts.keys())
    deadline = time.monotonic() + timeout_s
    with TopicReader(settings, settings.kafka.topic_verdicts, start) as reader:
        while not done(log) and time.monotonic() < deadline and alive():
            for rec in reader.poll(0.5):
                log.add_raw(rec.value)
    return log


def read_dead_letters(settings: Settings, start: dict[int, int] | None = None) -> list[DeadLetter]:
    with TopicReader(settings, settings.kafka.topic_deadletter, start) as reader:
        return [DeadLetter.from_record(r.key, r.value, r.headers) for r in reader.drain()]
