"""Dead-letter records: the rejected input's original bytes, untouched, plus why and where from.

Why headers: the value stays byte-identical to what the producer sent (even invalid UTF-8), so a
fixed event can be re-driven by producing the value again; the reason and the source coordinates
ride in `dialcheck.*` headers (the Kafka Connect convention for dead-letter queues).
"""
from __future__ import annotations

from dataclasses import dataclass

H_REASON = "dialcheck.reason"
H_TOPIC = "dialcheck.source.topic"
H_PARTITION = "dialcheck.source.partition"
H_OFFSET = "dialcheck.source.offset"


@dataclass(frozen=True)
class DeadLetter:
    reason: str
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None

    def headers(self) -> list[tuple[str, bytes]]:
        return [(H_REASON, self.reason.encode("utf-8", "replace")), (H_TOPIC, self.topic.encode()),
                (H_PARTITION, str(self.partition).encode()), (H_OFFSET, str(self.offset).encode())]

    @classmethod
    def from_record(cls, key: bytes | None, value: bytes | None, headers) -> "DeadLetter":
        h = {k: v for k, v in (headers or [])}

        def text(name: str) -> str:
            v = h.get(name, b"")
            return v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else str(v)

        return cls(reason=text(H_REASON), topic=text(H_TOPIC), partition=int(text(H_PARTITION) or -1),
                   offset=int(text(H_OFFSET) or -1), key=key, value=value)

    def to_dict(self) -> dict:
        """For printing: bytes shown as text where they decode, else as hex."""
        def show(b: bytes | None):
            if b is None:
                return None
            try:
                return b.decode("utf-8")
            except UnicodeDecodeError:
                return {"hex": b.hex()}
        return {"reason": self.reason, "source": {"topic": self.topic, "partition": self.partition,
                                                  "offset": self.offset},
                "key": show(self.key), "value": show(self.value)}
