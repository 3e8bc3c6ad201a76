"""`POST /check`: one verdict over HTTP, with the models loaded once (`dialcheck serve-api`).

Why: a one-shot `dialcheck check` spends ~10 s loading and warming up before its first claim; a
chat app that does not run Kafka needs a cheap way to ask for one verdict. The request is held to
the stream's rules for a turn (dialcheck/check_input.py, shared with the Python API): each text (the
claim and every context turn) goes through `schemas.turn.parse_turn` with the stream's limits
(DIALCHECK_MAX_TEXT_CHARS, MAX_EVENT_BYTES for the whole body, JSON depth 16, no duplicate keys), at
most DIALCHECK_CONTEXT_TURNS context turns; `evidence` (a grounded turn's passages, strings or objects)
as a chat turn's (schemas/evidence.py): given, it is checked against instead of retrieving.
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

from aiohttp import web

from schemas.errors import Reason
from schemas.items import CheckItem
from schemas.settings import Settings

# the request rules, shared with the Python API (dialcheck/python_api.py)
from .check_input import InvalidInput as BadRequest  # noqa: F401 - re-exported for callers of this module
from .check_input import Limits, parse_request

READY_MARKER = "dialcheck api at"
BATCH = 16
log = logging.getLogger("dialcheck.api")


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
        """Per item every verdict the stream would publish (each claim's, the turn's own last), scrubbed."""
        with self.lock:
            turns = self.pipe.check_turns(items)
        return [[self.pipe.scrub.verdict(v) for v in (t.verdicts if hasattr(t, "verdicts") else t)] for t in turns]


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
    every = request.query.get("verdicts", "turn")
    if every not in ("turn", "all"):
        return _error(400, Reason.SCHEMA.value, "verdicts= is turn (the reply's verdict, the default) or all")
    try:
        verdicts = await checker.check(item)
    except Exception:  # noqa: BLE001 - logged scrubbed by the checker; the caller learns nothing internal
        return _error(500, "internal", "the check failed; see the server's log")
    if every == "turn":
        return web.Response(body=verdicts[-1].to_json(), content_type="application/json")
    # ?verdicts=all: what the stream publishes for the reply (each claim's with its claim_span, then its own)
    return web.Response(body=b'{"verdicts":[' + b",".join(v.to_json() for v in verdicts) + b"]}",
                        content_type="application/json")


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
