"""Dead-letter records: the rejected input's original bytes, untouched, plus why and where from.

Why headers: the value stays byte-identical to what the producer sent (even invalid UTF-8), so a
fixed event can be re-driven by producing the value again; the reason and the source coordinates
ride in `dialcheck.*` headers (the Kafka Connect convention for dead-letter queues).

Headers: `dialcheck.reason` (short, for people; may quote the input), `dialcheck.reason.code` (one
of `schemas.Reason`, for machines: metrics and alerts key on it), `dialcheck.source.topic`,
`.partition`, `.offset`, and `dialcheck.truncated` when key or value was cut.

Why a bounded prefix: a dead letter of a 1 MB record (plus its reason) exceeded the producer's
request size, the send raised and the whole batch was lost. Key and value longer than
`stream.deadletter_max_bytes` keep a prefix; `dialcheck.truncated` says so and gives the original
lengths, and the original stays in chat.turns at the source topic/partition/offset.
"""
from __future__ import annotations

from dataclasses import dataclass

H_REASON = "dialcheck.reason"
H_CODE = "dialcheck.reason.code"
H_TOPIC = "dialcheck.source.topic"
H_PARTITION = "dialcheck.source.partition"
H_OFFSET = "dialcheck.source.offset"
H_TRUNCATED = "dialcheck.truncated"


@dataclass(frozen=True)
class DeadLetter:
    code: str  # a schemas.Reason value ("" when read from a record written before codes existed)
    reason: str
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    truncated: str = ""  # "key=N,value=M": original lengths of what was cut to a prefix

    def headers(self) -> list[tuple[str, bytes]]:
        h = [(H_REASON, self.reason.encode("utf-8", "replace")), (H_CODE, str(self.code).encode()),
             (H_TOPIC, self.topic.encode()),
             (H_PARTITION, str(self.partition).encode()), (H_OFFSET, str(self.offset).encode())]
        return h + ([(H_TRUNCATED, self.truncated.encode())] if self.truncated else [])

    def bounded(self, max_bytes: int) -> "DeadLetter":
        """This dead letter with key and value cut to a `max_bytes` prefix where longer."""
        cut = [f"{name}={len(b)}" for name, b in (("key", self.key), ("value", self.value))
               if b is not None and len(b) > max_bytes]
        if not cut:
            return self
        return DeadLetter(self.code, self.reason, self.topic, self.partition, self.offset,
                          None if self.key is None else bytes(self.key[:max_bytes]),
                          None if self.value is None else bytes(self.value[:max_bytes]), ",".join(cut))

    @classmethod
    def from_record(cls, key: bytes | None, value: bytes | None, headers) -> "DeadLetter":
        h = {k: v for k, v in (headers or [])}

        def text(name: str) -> str:
            v = h.get(name, b"")
            return v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else str(v)

        return cls(code=text(H_CODE), reason=text(H_REASON), topic=text(H_TOPIC), partition=int(text(H_PARTITION) or -1),
                   offset=int(text(H_OFFSET) or -1), key=key, value=value, truncated=text(H_TRUNCATED))

    def to_dict(self) -> dict:
        """For printing: bytes shown as text where they decode, else as hex."""
        def show(b: bytes | None):
            if b is None:
                return None
            try:
                return b.decode("utf-8")
            except UnicodeDecodeError:
                return {"hex": b.hex()}
        return {"code": self.code, "reason": self.reason, "source": {"topic": self.topic, "partition": self.partition,
                                                  "offset": self.offset},
                **({"truncated": self.truncated} if self.truncated else {}),
                "key": show(self.key), "value": show(self.value)}
