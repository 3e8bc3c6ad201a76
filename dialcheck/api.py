"""`POST /check`: one verdict over HTTP, with the models loaded once (`dialcheck serve-api`).

Why: a one-shot `dialcheck check` spends ~10 s loading and warming up before its first claim; a
chat app that does not run Kafka needs a cheap way to ask for one verdict. The request is held to
the stream's rules for a turn: each text (the claim and every context turn) goes through
`schemas.turn.parse_turn` with the stream's limits (DIALCHECK_MAX_TEXT_CHARS, MAX_EVENT_BYTES for
the whole body, JSON depth 16, no duplicate keys), at most DIALCHECK_CONTEXT_TURNS context turns.
The response is the published verdict (schemas/verdict.schema.json), scrubbed like every verdict
that leaves the process; an error is `{"error": ..., "code": ...}` with a 4xx status and never
echoes a secret. Bound to 127.0.0.1 unless --host says otherwise.

Concurrent requests are checked together: one pipeline thread takes whatever is waiting (at most
BATCH claims) into one `check_turns` call, as the stream worker batches turns.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass

import orjson
from aiohttp import web

from schemas.errors import InvalidEvent, Reason
from schemas.items import CheckItem
from schemas.settings import Settings
from schemas.turn import parse_turn
from schemas.wire import load_bounded_json, no_duplicate_keys

READY_MARKER = "dialcheck api at"
BATCH = 16
MAX_DEPTH = 16
FIELDS = ("claim", "context", "evidence", "conversation_id")
log = logging.getLogger("dialcheck.api")


class BadRequest(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass(frozen=True)
class Limits:
    max_text_chars: int
    max_body_bytes: int
    max_context_turns: int

    @classmethod
    def of(cls, settings: Settings) -> "Limits":
        st = settings.stream
        return cls(st.max_text_chars, st.max_event_bytes, st.context_turns)


def _text(value, name: str, limits: Limits, speaker: str) -> str:
    """One text through the turn contract's rules (parse_turn): NFKC, invisible characters removed,
    not empty, at most max_text_chars."""
    if not isinstance(value, str):
        raise BadRequest(400, Reason.SCHEMA.value, f"{name} must be a string")
    turn = orjson.dumps({"conversation_id": "api", "turn_id": name, "speaker": speaker, "text": value})
    try:
        return parse_turn(turn, limits.max_text_chars).text
    except InvalidEvent as e:
        status = 413 if e.code == Reason.TOO_LARGE else 400
        raise BadRequest(status, e.code.value, f"{name}: {e.reason}") from None


def parse_request(raw: bytes, limits: Limits, protocol: str) -> CheckItem:
    """The body → a CheckItem, or BadRequest with the status, a reason code and one line."""
    if len(raw) > limits.max_body_bytes:
        raise BadRequest(413, Reason.TOO_LARGE.value, f"body too large: {len(raw)} bytes > {limits.max_body_bytes}")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadRequest(400, Reason.INVALID_UTF8.value, f"invalid UTF-8 at byte {e.start}") from None
    try:
        obj = load_bounded_json(raw, MAX_DEPTH)
        import json

        json.loads(raw, object_pairs_hook=no_duplicate_keys)
    except InvalidEvent as e:
        raise BadRequest(400, e.code.value, e.reason) from None
    except (ValueError, RecursionError) as e:
        raise BadRequest(400, Reason.MALFORMED_JSON.value, f"malformed JSON: {str(e)[:200]}") from None
    if not isinstance(obj, dict):
        raise BadRequest(400, Reason.SCHEMA.value, 'expected a JSON object: {"claim": "...", "context": ["..."]}')
    unknown = sorted(set(obj) - set(FIELDS))
    if unknown:
        raise BadRequest(400, Reason.SCHEMA.value, f"unknown field {unknown[0][:64]!r}: expected {', '.join(FIELDS)}")
    if "claim" not in obj:
        raise BadRequest(400, Reason.SCHEMA.value, "no claim: the body needs \"claim\"")
    claim = _text(obj["claim"], "claim", limits, "assistant")
    context = obj.get("context", [])
    if not isinstance(context, list):
        raise BadRequest(400, Reason.SCHEMA.value, "context must be a list of turns (strings), oldest first")
    if len(context) > limits.max_context_turns:
        raise BadRequest(413, Reason.TOO_LARGE.value, f"context has {len(context)} turns > {limits.max_context_turns} "
                         "(DIALCHECK_CONTEXT_TURNS, as the stream keeps)")
    context = [_text(t, f"context[{i}]", limits, "user") for i, t in enumerate(context)]
    evidence = obj.get("evidence")
    if protocol == "fv":
        if not isinstance(evidence, list) or not evidence:
            raise BadRequest(400, Reason.SCHEMA.value, "this server checks against given evidence (--protocol fv): "
                             "add \"evidence\": [\"...\"]")
        if len(evidence) > limits.max_context_turns:
            raise BadRequest(413, Reason.TOO_LARGE.value, f"evidence has {len(evidence)} texts > {limits.max_context_turns}")
        evidence = [("evidence", _text(t, f"evidence[{i}]", limits, "user")) for i, t in enumerate(evidence)]
    elif evidence is not None:
        raise BadRequest(400, Reason.SCHEMA.value, "this server retrieves the evidence (--protocol e2e): "
                         "leave out \"evidence\", or start one with --protocol fv")
    conversation = obj.get("conversation_id", "api")
    if not isinstance(conversation, str) or not conversation.strip() or len(conversation) > 256:
        raise BadRequest(400, Reason.INVALID_FIELD.value, "conversation_id must be a non-empty string of at most 256 characters")
    return CheckItem(conversation, f"api-{time.time_ns()}", context, claim, evidence or None)


class Checker:
    """The pipeline behind one thread: requests queue up, each round checks what waits (≤ BATCH)."""

    def __init__(self, pipe):
        self.pipe = pipe
        self.queue: asyncio.Queue | None = None
        self._task: asyncio.Task | None = None
        self.lock = threading.Lock()

    async def start(self) -> None:
        self.queue = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def check(self, item: CheckItem):
        future = asyncio.get_running_loop().create_future()
        await self.queue.put((item, future))
        return await future

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self.queue.get()]
            while len(batch) < BATCH and not self.queue.empty():
                batch.append(self.queue.get_nowait())
            items = [item for item, _ in batch]
            try:
                results = await loop.run_in_executor(None, self._check, items)
            except Exception as e:  # noqa: BLE001 - a bug: every waiting request gets a 500, none hangs
                log.error("check failed: %s", self.pipe.scrub(f"{type(e).__name__}: {e}"))
                for _, future in batch:
                    if not future.done():
                        future.set_exception(e)
                continue
            for (_, future), verdict in zip(batch, results):
                if not future.done():
                    future.set_result(verdict)

    def _check(self, items: list[CheckItem]):
        with self.lock:
            turns = self.pipe.check_turns(items)
        return [self.pipe.scrub.verdict(t.verdict if hasattr(t, "verdict") else t[-1]) for t in turns]


CHECKER = web.AppKey("checker", Checker)
LIMITS = web.AppKey("limits", Limits)
PROTOCOL = web.AppKey("protocol", str)


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": message, "code": code}, status=status)


async def handle_check(request: web.Request) -> web.Response:
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        limit = request.app[LIMITS].max_body_bytes
        return _error(413, Reason.TOO_LARGE.value, f"body too large: more than {limit} bytes")
    checker = request.app[CHECKER]
    try:
        item = parse_request(raw, request.app[LIMITS], request.app[PROTOCOL])
    except BadRequest as e:
        return _error(e.status, e.code, checker.pipe.scrub(e.message))
    try:
        verdict = await checker.check(item)
    except Exception:  # noqa: BLE001 - logged scrubbed by the checker; the caller learns nothing internal
        return _error(500, "internal", "the check failed; see the server's log")
    return web.Response(body=verdict.to_json(), content_type="application/json")


async def handle_health(request: web.Request) -> web.Response:
    return web.json_response({"ok": True, "protocol": request.app[PROTOCOL]})


async def method_not_allowed(request: web.Request) -> web.Response:
    return _error(405, "method", "POST /check with a JSON body")


def create_app(pipe, settings: Settings, protocol: str) -> web.Application:
    limits = Limits.of(settings)
    # aiohttp refuses a larger body itself (413) before reading it all; the +1 lets parse_request say how large
    app = web.Application(client_max_size=limits.max_body_bytes + 1)
    checker = Checker(pipe)
    app[CHECKER], app[LIMITS], app[PROTOCOL] = checker, limits, protocol
    app.router.add_post("/check", handle_check)
    app.router.add_get("/check", method_not_allowed)
    app.router.add_get("/healthz", handle_health)

    async def on_startup(_app):
        await checker.start()

    async def on_cleanup(_app):
        await checker.stop()

    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    return app


def serve(pipe, settings: Settings, host: str, port: int, protocol: str) -> None:
    """Blocks until Ctrl-C / SIGTERM; prints the ready line with the bound URL first."""
    async def main() -> None:
        runner = web.AppRunner(create_app(pipe, settings, protocol), shutdown_timeout=2, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = site._server.sockets[0].getsockname()[:2]
        print(f"{READY_MARKER} http://{bound[0]}:{bound[1]} (POST /check; protocol {protocol})", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
