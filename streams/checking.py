"""Between the wire and the pipeline: validate an event, call the pipeline so nothing is dropped,
and keep every text that leaves the worker short and free of secrets.

Why separate from the Faust app: these rules decide what reaches the dead-letter topic and what a
verdict looks like when the pipeline itself fails; they are tested without a broker.
"""
from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
from typing import Callable, Iterable, Sequence

from schemas import ChatTurn, InvalidEvent, Status, Surface, Verdict, claim_id, parse_turn
from schemas.settings import Settings, redact

log = logging.getLogger("dialcheck.stream")

CheckMany = Callable[[list], list[Verdict]]
ELLIPSIS = "…"


def bound(text: str, max_bytes: int) -> str:
    """`text` cut to at most `max_bytes` UTF-8 bytes (on a character boundary, with "…" when cut)."""
    raw = text.encode("utf-8", "replace")
    if len(raw) <= max_bytes:
        return text
    keep = max_bytes - len(ELLIPSIS.encode())
    return raw[:keep].decode("utf-8", "ignore") + ELLIPSIS


class Scrubber:
    """Removes credentials from text: user:password@ inside URLs (any URL, not only ours) and the
    literal values of the configured secrets (SASL password, URL passwords)."""

    def __init__(self, secrets: Iterable[str] = ()):
        self.secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    @classmethod
    def from_settings(cls, settings: Settings) -> "Scrubber":
        import urllib.parse

        secrets = [settings.kafka.sasl_password.get_secret_value()]
        for url in (settings.retrieval.opensearch_url, settings.kafka.bootstrap, settings.models.backend):
            for part in url.replace(";", ",").split(","):
                try:
                    u = urllib.parse.urlsplit(part.strip())
                    secrets += [u.password or "", urllib.parse.unquote(u.password or "")]
                except ValueError:
                    continue
        return cls(secrets)

    def __call__(self, text: str) -> str:
        text = redact(text)
        for s in self.secrets:
            if s in text:
                text = text.replace(s, "***")
        return text


class ScrubbingFilter(logging.Filter):
    """A log filter: every record's final message goes through the scrubber (installed on the
    root handlers, so Faust's and aiokafka's lines are covered too)."""

    def __init__(self, scrub: Scrubber, max_bytes: int = 4096):
        super().__init__()
        self.scrub, self.max_bytes = scrub, max_bytes

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
            if record.exc_info:
                msg += "\n" + logging.Formatter().formatException(record.exc_info)
                record.exc_info, record.exc_text = None, None
        except Exception:  # noqa: BLE001 - a broken log call must not break the worker
            return True
        record.msg, record.args = bound(self.scrub(msg), self.max_bytes), ()
        return True


class DaemonExecutor(concurrent.futures.Executor):
    """One daemon thread running submitted calls in order. Why not ThreadPoolExecutor: its threads
    are joined at interpreter exit, so a pipeline call abandoned at its deadline (still hung) would
    hold up the worker's shutdown; a daemon thread does not."""

    def __init__(self, name: str = "pipeline"):
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn, /, *args, **kwargs) -> concurrent.futures.Future:
        f: concurrent.futures.Future = concurrent.futures.Future()
        self._q.put((f, fn, args, kwargs))
        return f

    def _run(self) -> None:
        while (job := self._q.get()) is not None:
            f, fn, args, kwargs = job
            if not f.set_running_or_notify_cancel():
                continue
            try:
                f.set_result(fn(*args, **kwargs))
            except BaseException as e:  # noqa: BLE001 - handed to the waiting coroutine
                f.set_exception(e)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._q.put(None)
        if wait:
            self._thread.join()


def validate_event(key: bytes | None, value: bytes | None, max_text_chars: int, max_bytes: int | None = None,
                   max_depth: int = 16) -> ChatTurn:
    """Wire bytes → ChatTurn, or InvalidEvent(reason); nothing else escapes. The key must be the
    conversation id: the context table is partitioned like the input, so a turn keyed otherwise
    would find another partition's (or no) context."""
    try:
        if value is None:
            raise InvalidEvent("null value (tombstone)")
        if max_bytes is not None and key is not None and len(key) > max_bytes:
            raise InvalidEvent(f"key too large: {len(key)} bytes > {max_bytes}")
        turn = parse_turn(bytes(value), max_text_chars, max_bytes=max_bytes, max_depth=max_depth)
        if key is None:
            raise InvalidEvent("missing key: the key must be the conversation_id")
        if bytes(key) != turn.conversation_id.encode("utf-8"):
            raise InvalidEvent(f"key {bytes(key)[:80]!r} does not match conversation_id {turn.conversation_id[:80]!r}")
        return turn
    except InvalidEvent:
        raise
    except Exception as e:  # noqa: BLE001 - validation raises only InvalidEvent, whatever the input did
        raise InvalidEvent(f"unreadable event ({type(e).__name__})") from None


def error_verdict(item, reason: str, max_reason_bytes: int = 1024) -> Verdict:
    """A verdict that says the check failed: published instead of dropping the claim."""
    return Verdict(conversation_id=item.conversation_id, turn_id=item.turn_id,
                   claim_id=claim_id(item.conversation_id, item.turn_id, item.claim), claim=item.claim,
                   surface=Surface(name="r0", text=item.claim, candidate="r0", candidate_text=item.claim), label="NOT ENOUGH INFO",
                   probabilities={"SUPPORTS": 0.0, "REFUTES": 0.0, "NOT ENOUGH INFO": 1.0}, evidence=[],
                   model_versions={}, timings_ms={}, status=Status(state="error", reason=bound(reason, max_reason_bytes)))


def check_safely(check_many: CheckMany, items: Sequence) -> list[Verdict]:
    """`check_many`, but an unexpected exception (a bug, not an outage: outages already come back
    as degraded/error verdicts) costs only the item that raised, as an error verdict."""
    items = list(items)
    if not items:
        return []
    try:
        out = check_many(items)
        if len(out) != len(items):
            raise RuntimeError(f"pipeline returned {len(out)} verdicts for {len(items)} items")
        return list(out)
    except Exception as e:  # noqa: BLE001 - never lose a claim to a pipeline bug
        if len(items) == 1:
            log.exception("pipeline failed on %s/%s", items[0].conversation_id, items[0].turn_id)
            return [error_verdict(items[0], f"pipeline failure: {e!r}")]
        log.warning("pipeline failed on a batch of %d (%r); retrying one by one", len(items), e)
        return [v for it in items for v in check_safely(check_many, [it])]


def safe_verdict(v: Verdict, scrub: Scrubber, max_reason_bytes: int) -> Verdict:
    """The verdict as published: status reason scrubbed of secrets and at most `max_reason_bytes`."""
    if v.status.reason:
        v.status.reason = bound(scrub(v.status.reason), max_reason_bytes)
    return v
