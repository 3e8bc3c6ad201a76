"""Replay DialFact records as chat turns: each record's context turns, then its response turn.

With protocol "fv" the response turn is a grounded turn: it carries the record's evidence (title,
text) as its `evidence` (chat_turn 1.1), so a default worker checks it against those passages as
`dialcheck eval --protocol fv` does; "e2e" sends no evidence and the worker retrieves.

Why conversation_id = record id (not context_id): several records share a context_id but answer it
with different responses; keyed by record id, each conversation's context is exactly its record's
context, and the ids (conversation `record.id`, turn `record.id#response`) are the ones the batch
evaluator uses, so the claim ids agree.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Sequence

from schemas.errors import DialcheckError
from schemas.settings import Settings
from schemas import ChatTurn
from schemas.items import GivenPassage, response_claim_id

from .kafka_config import kafka_python_kwargs


REPLAY_PROTOCOLS = ("e2e", "fv")


def given_passages(record) -> tuple[GivenPassage, ...]:
    """A record's evidence as the passages its reply was given (a blank title is left out, as a
    producer without titles would send it; so is a blank passage, which the turn contract refuses
    and which gives the verifier no window to read)."""
    return tuple(GivenPassage(text, title=title or None) for title, text in record.evidence if text.strip())


def record_turns(record, prefix: str = "", protocol: str = "e2e") -> list[ChatTurn]:
    """Context turns (check=false; speakers alternate, the last one is the user's) then the
    response turn (assistant, check=true; with protocol "fv" carrying the record's evidence).
    `prefix` gives a second, independent copy of a record."""
    if protocol not in REPLAY_PROTOCOLS:
        raise ValueError(f"unknown replay protocol {protocol!r}: one of {', '.join(REPLAY_PROTOCOLS)}")
    conv = f"{prefix}{record.id}"
    n = len(record.context)
    turns = [ChatTurn(conversation_id=conv, turn_id=f"{conv}#ctx{i}",
                      speaker="user" if (n - i) % 2 == 1 else "assistant", text=text, check=False)
             for i, text in enumerate(record.context)]
    turns.append(ChatTurn(conversation_id=conv, turn_id=f"{conv}#response", speaker="assistant",
                          text=record.response, check=True,
                          evidence=given_passages(record) if protocol == "fv" else None))
    return turns


@dataclass
class ReplayStats:
    records: int = 0
    turns: int = 0
    seconds: float = 0.0
    sent_at: dict[str, float] = field(default_factory=dict)  # claim id → wall time its turn was sent


class UndeliveredTurns(DialcheckError, RuntimeError):
    """Some turns were not acknowledged by the broker (after the producer's own retries): the
    replay must say so, never report them as sent."""


class TurnProducer:
    """Keyed, acks=all producer of chat turns (and of raw bytes, for the bad-input tests).

    A send the broker never acknowledged (after `retries`) is not dropped silently: `flush()` and
    `close()` raise `UndeliveredTurns` naming how many failed and the first error."""

    def __init__(self, settings: Settings, **config):
        """`config`: kafka-python producer settings over the defaults (e.g. a shorter delivery timeout)."""
        from kafka import KafkaProducer

        self.topic = settings.kafka.topic_turns
        self.knowledge_topic = settings.kafka.topic_knowledge
        self.producer = KafkaProducer(**{"acks": "all", "linger_ms": 2, "retries": 5, **kafka_python_kwargs(settings),
                                         **config})
        # partition → next offset, from the acks: Tansu's ListOffsets can be wrong after
        # multi-record batches, so "everything I sent was consumed" is judged from these
        self.sent_end: dict[int, int] = {}
        self.failed: list[BaseException] = []

    def _sent(self, md) -> None:
        self.sent_end[md.partition] = max(self.sent_end.get(md.partition, 0), md.offset + 1)

    def _failed(self, exc: BaseException) -> None:
        self.failed.append(exc)

    def send_turn(self, turn: ChatTurn):
        return self.send_raw(turn.conversation_id.encode("utf-8"), turn.to_json())

    def send_knowledge(self, record: dict):
        """A chat.knowledge record (schemas/knowledge.py), keyed by its conversation like its turns."""
        import orjson

        return self.send_raw(str(record["conversation_id"]).encode("utf-8"), orjson.dumps(record),
                             topic=self.knowledge_topic)

    def send_raw(self, key: bytes | None, value: bytes | None, topic: str | None = None):
        """`topic`: chat.turns unless named; only chat.turns sends count in `sent_end`."""
        sent = self.producer.send(topic or self.topic, key=key, value=value)
        if topic in (None, self.topic):
            sent.add_callback(self._sent)
        return sent.add_errback(self._failed)

    def flush(self) -> None:
        self.producer.flush()
        if self.failed:
            n, first = len(self.failed), self.failed[0]
            self.failed = []
            raise UndeliveredTurns(f"{n} turn(s) not acknowledged by the broker: {first!r}")

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self.producer.close()

    def __enter__(self) -> "TurnProducer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def replay(settings: Settings, records: Sequence, rate: float = 0.0, prefix: str = "", progress: bool = False,
           producer: TurnProducer | None = None, on_record: Callable[[int], None] | None = None,
           protocol: str = "e2e") -> ReplayStats:
    """Produce `records` at `rate` records (= checked claims) per second; 0 = as fast as possible.
    Each response turn carries ts = its send time, and its claim id's send time is recorded.
    `protocol` "fv": each response turn carries its record's evidence (record_turns)."""
    own = producer is None
    producer = producer or TurnProducer(settings)
    stats = ReplayStats()
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=len(records), unit="rec", desc="replay")
    t0 = time.monotonic()
    try:
        for i, rec in enumerate(records):
            if rate > 0:
                delay = t0 + i / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            turns = record_turns(rec, prefix, protocol)
            for t in turns[:-1]:
                producer.send_turn(t)
            resp = turns[-1]
            now = time.time()
            producer.send_turn(replace(resp, ts=now))
            stats.sent_at[response_claim_id(rec, prefix)] = now
            stats.records += 1
            stats.turns += len(turns)
            if rate > 0:
                producer.flush()  # keep the offered rate honest: no batching up of records
            if bar:
                bar.update(1)
            if on_record:
                on_record(i)
        producer.flush()
    finally:
        if bar:
            bar.close()
        if own:
            producer.close()
    stats.seconds = time.monotonic() - t0
    return stats


def load_records(path: str, limit: int | None = None) -> list:
    from schemas.items import load_dialfact  # the DialFact format is a contract (schemas/items.py)

    return load_dialfact(path, limit=limit)


def iter_claim_ids(records: Iterable, prefix: str = "") -> list[str]:
    return [response_claim_id(r, prefix) for r in records]
