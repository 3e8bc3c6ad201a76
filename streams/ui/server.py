"""The web app: one aiokafka consumer (no consumer group, so it never takes partitions from a
worker) follows chat.turns and chat.verdicts into a bounded Store; browsers get a snapshot and
then every change as Server-Sent Events.

Why SSE and not WebSocket: updates only flow server → browser, EventSource reconnects by itself,
and it is plain HTTP (works through proxies, testable with curl)."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from pathlib import Path

import orjson
from aiohttp import web

from schemas import InvalidEvent, parse_turn
from schemas.settings import Settings

from ..kafka_config import aiokafka_kwargs
from .store import Store

STATIC = Path(__file__).resolve().parent / "static"
READY_MARKER = "dialcheck ui at"
log = logging.getLogger("dialcheck.ui")

STORE, CLIENTS, CONSUMER_STATE = web.AppKey("store", Store), web.AppKey("clients", set), web.AppKey("consumer", dict)


def _verdict_dict(raw: bytes) -> dict | None:
    """Lenient like VerdictLog: an off-schema verdict is still shown if it names its turn."""
    try:
        v = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(v, dict) or not all(isinstance(v.get(k), str) for k in ("conversation_id", "turn_id", "claim_id")):
        return None
    return v


def _broadcast(app: web.Application, events: list[dict]) -> None:
    for q in list(app[CLIENTS]):
        for ev in events:
            try:
                q.put_nowait(ev)
            except asyncio.QueueFull:  # a stalled browser: drop it; EventSource reconnects to a fresh snapshot
                app[CLIENTS].discard(q)
                break


async def _consume(app: web.Application, settings: Settings, from_beginning: bool) -> None:
    from aiokafka import AIOKafkaConsumer

    store, state = app[STORE], app[CONSUMER_STATE]
    turns_topic, verdicts_topic = settings.kafka.topic_turns, settings.kafka.topic_verdicts
    while True:  # the broker may not be up yet, or may restart: keep trying
        consumer = AIOKafkaConsumer(group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="earliest" if from_beginning else "latest",
                                    metadata_max_age_ms=2000, **aiokafka_kwargs(settings))
        try:
            await consumer.start()
            consumer.subscribe([turns_topic, verdicts_topic])
            state["connected"] = True
            async for rec in consumer:
                if rec.value is None:
                    continue
                if rec.topic == turns_topic:
                    try:
                        turn = parse_turn(rec.value)
                    except InvalidEvent:  # dead-lettered by the worker; nothing to show
                        store.counts["unreadable"] += 1
                        continue
                    events = store.add_turn(turn.__dict__)
                else:
                    v = _verdict_dict(rec.value)
                    if v is None:
                        store.counts["unreadable"] += 1
                        continue
                    events = store.add_verdict(v)
                _broadcast(app, events)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - broker gone or not there yet: say so, retry
            state["connected"] = False
            state["error"] = str(e)
            log.warning("ui consumer: %s; retrying in 2 s", e)
            await asyncio.sleep(2)
        finally:
            with contextlib.suppress(Exception):
                await consumer.stop()


async def index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html")


async def state(request: web.Request) -> web.Response:
    snap = request.app[STORE].snapshot()
    snap["consumer"] = dict(request.app[CONSUMER_STATE])
    return web.json_response(snap)


async def events(request: web.Request) -> web.StreamResponse:
    """SSE: `snapshot` first, then `turn` / `verdict` / `evict` events; a comment every 15 s."""
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                       "X-Accel-Buffering": "no"})
    await resp.prepare(request)
    q: asyncio.Queue = asyncio.Queue(maxsize=10000)
    # snapshot and subscription in one step (no await in between): nothing is missed or doubled
    snapshot = request.app[STORE].snapshot()
    request.app[CLIENTS].add(q)
    try:
        await resp.write(b"event: snapshot\ndata: " + orjson.dumps(snapshot) + b"\n\n")
        while q in request.app[CLIENTS]:
            try:
                ev = await asyncio.wait_for(q.get(), timeout=15)
            except asyncio.TimeoutError:
                await resp.write(b": keep-alive\n\n")
                continue
            await resp.write(f"event: {ev['type']}\n".encode() + b"data: " + orjson.dumps(ev) + b"\n\n")
    except ConnectionResetError:  # the browser went away
        pass
    finally:
        request.app[CLIENTS].discard(q)
    return resp


def create_app(settings: Settings, max_conversations: int = 200, max_turns: int = 100,
               from_beginning: bool = True) -> web.Application:
    app = web.Application()
    app[STORE] = Store(max_conversations, max_turns)
    app[CLIENTS] = set()
    app[CONSUMER_STATE] = {"connected": False, "broker": settings.kafka.bootstrap}

    async def consumer_ctx(app: web.Application):
        task = asyncio.create_task(_consume(app, settings, from_beginning))
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task

    async def close_streams(app: web.Application) -> None:
        app[CLIENTS].clear()  # ends every SSE handler's loop

    app.cleanup_ctx.append(consumer_ctx)
    app.on_shutdown.append(close_streams)
    app.router.add_get("/", index)
    app.router.add_get("/events", events)
    app.router.add_get("/api/state", state)
    app.router.add_static("/static/", STATIC)
    return app


async def _start(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, shutdown_timeout=2)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # the real port when 0 was asked for
    return runner, f"http://{host}:{bound}/"


def serve(settings: Settings, host: str = "127.0.0.1", port: int = 8765, max_conversations: int = 200,
          from_beginning: bool = True) -> int:
    """Run in the foreground until Ctrl-C / SIGTERM; prints the URL when it listens."""
    import signal

    async def main() -> None:
        runner, url = await _start(create_app(settings, max_conversations, from_beginning=from_beginning), host, port)
        print(f"{READY_MARKER} {url} (following {settings.kafka.topic_turns} and {settings.kafka.topic_verdicts} "
              f"on {settings.kafka.bootstrap})", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()

    asyncio.run(main())
    return 0


class UIServer:
    """The app in a background thread with its own event loop (for `dialcheck demo --ui`)."""

    def __init__(self, settings: Settings, host: str = "127.0.0.1", port: int = 0, max_conversations: int = 200):
        self.settings, self.host, self.port, self.max_conversations = settings, host, port, max_conversations
        self.url: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None

    def start(self, timeout_s: float = 15.0) -> "UIServer":
        ready = threading.Event()
        errors: list[BaseException] = []

        async def main() -> None:
            self._stopped = asyncio.Event()
            try:
                runner, self.url = await _start(create_app(self.settings, self.max_conversations), self.host, self.port)
            except BaseException as e:  # noqa: BLE001 - reported to the starting thread
                errors.append(e)
                ready.set()
                return
            ready.set()
            try:
                await self._stopped.wait()
            finally:
                await runner.cleanup()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(main())
            self._loop.close()

        self._thread = threading.Thread(target=run, name="dialcheck-ui", daemon=True)
        self._thread.start()
        if not ready.wait(timeout_s) or errors:
            self.stop()
            raise RuntimeError(f"ui server did not start: {errors[0] if errors else 'timeout'}")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stopped is not None and self._thread and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stopped.set)
            self._thread.join(timeout=10)

    def __enter__(self) -> "UIServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


__all__ = ["READY_MARKER", "UIServer", "create_app", "serve"]
