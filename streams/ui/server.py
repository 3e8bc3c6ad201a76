"""The web app: one aiokafka consumer (no consumer group, so it never takes partitions from a
worker) follows chat.turns, chat.verdicts and chat.feedback into a bounded Store; browsers get a
snapshot and then every change as Server-Sent Events. A page's right/wrong buttons POST to
/api/feedback, which produces the judgement to chat.feedback (the worker stores it); the live
precision on the page is counted from the judgements the consumer reads back. The model in use
and the adaptation loop's last steps are read from the feedback store's model_events (the loop's own
record, `dialcheck adapt-loop`) every MODEL_POLL_S and sent as a `model` event when they change.

Why SSE and not WebSocket: updates only flow server → browser, EventSource reconnects by itself,
and it is plain HTTP (works through proxies, testable with curl)."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from pathlib import Path

import orjson
from aiohttp import web

from schemas.errors import DialcheckError
from schemas.settings import Settings, UISettings, redact

from ..kafka_config import aiokafka_kwargs
from .store import Store

STATIC = Path(__file__).resolve().parent / "static"
READY_MARKER = "dialcheck ui at"
log = logging.getLogger("dialcheck.ui")

STORE, CLIENTS, CONSUMER_STATE = web.AppKey("store", Store), web.AppKey("clients", set), web.AppKey("consumer", dict)
UI = web.AppKey("ui", UISettings)
# the judgement sender: async (key, value) -> None, raising when the record was not delivered
SEND_FEEDBACK = web.AppKey("send_feedback", object)
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
SNAPSHOT_SLICE = 1 << 18
MODEL = web.AppKey("model", dict)
MODEL_POLL_S = 5.0
MODEL_EVENTS_SHOWN = 8
# the page needs nothing but its own origin: script, style sheet and the SSE stream
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
                               "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Resource-Policy": "same-origin",
}


class Client:
    """One live page: its queue of ready SSE chunks, bounded in bytes. `offer` refuses what does not
    fit and the page is dropped (its EventSource reconnects to a fresh snapshot): a page that does not
    read never makes the server buffer without limit."""

    def __init__(self, max_bytes: int, peer: str = "?"):
        self.queue: asyncio.Queue = asyncio.Queue()
        self.bytes, self.max_bytes, self.peer = 0, max_bytes, peer
        self.dropped: str | None = None

    def offer(self, chunk: bytes) -> bool:
        if self.dropped:
            return False
        if self.bytes + len(chunk) > self.max_bytes:
            self.drop(f"more than {self.max_bytes} bytes of events queued")
            return False
        self.bytes += len(chunk)
        self.queue.put_nowait(chunk)
        return True

    def drop(self, reason: str) -> None:
        if not self.dropped:
            self.dropped = reason
            while not self.queue.empty():  # what it will never be sent is freed now
                self.queue.get_nowait()
            self.bytes = 0
            self.queue.put_nowait(None)  # wakes the handler

    async def next(self, timeout: float) -> bytes | None:
        chunk = await asyncio.wait_for(self.queue.get(), timeout)
        if chunk is not None:
            self.bytes -= len(chunk)
        return chunk


def sse(event: dict) -> bytes:
    return f"event: {event['type']}\n".encode() + b"data: " + orjson.dumps(event) + b"\n\n"


def _broadcast(app: web.Application, events: list[dict]) -> None:
    """Each event is serialised once (stored items were checked to serialise when they entered the store)."""
    clients = [c for c in app[CLIENTS] if not c.dropped]
    if not clients:
        return
    for ev in events:
        chunk = sse(ev)
        for c in clients:
            c.offer(chunk)


def _log_rejection(store: Store) -> None:
    n = store.counts["rejected"]
    if n <= 100 or n % 1000 == 0:  # a flood of bad records must not flood the log
        last = store.last_rejected[-1]
        log.warning("ui: rejected %s at %s (%d so far): %s", last["what"], last["where"], n, last["reason"])


def handle_record(app: web.Application, topic: str, value: bytes | None, where: str = "") -> None:
    """One record into the store and out to the pages. Never raises: a record that breaks something
    unforeseen is counted as rejected, and the consumer goes on from the next offset."""
    store = app[STORE]
    if value is None:
        return
    try:
        before = store.counts["rejected"]
        if topic == app[CONSUMER_STATE]["topic_turns"]:
            events = store.add_turn_raw(value, where)
        elif topic == app[CONSUMER_STATE]["topic_feedback"]:
            events = store.add_feedback_raw(value, where)
        else:
            events = store.add_verdict_raw(value, where)
        if store.counts["rejected"] != before:
            _log_rejection(store)
        _broadcast(app, events)
    except Exception as e:  # noqa: BLE001 - one record never stops the page (and never rewinds the consumer)
        store.reject("record", "unreadable", f"internal error {type(e).__name__}: {str(e)[:200]}", where)
        _log_rejection(store)


def model_view(store_url: str) -> dict:
    """The live model version and the loop's last events, from the feedback store: `live` is the version
    the last promotion or rollback put in use (None before the loop did anything)."""
    from ..feedback_store import FeedbackStore

    with FeedbackStore(store_url) as st:
        events = st.events()  # a few rows a day: the whole table, so a promotion older than the shown ones counts
    live = None
    for e in events:
        live = e.version if e.event == "promoted" else e.other if e.event == "rolled_back" else live
    return {"live": live, "events": [{k: v for k, v in e.to_dict().items() if k != "detail"}
                                     for e in events[-MODEL_EVENTS_SHOWN:]]}


def refresh_model(app: web.Application, store_url: str) -> bool:
    """Read the model view; broadcast it when it changed. False when the store cannot be read (the
    page keeps the last view; the worker's /readyz says why)."""
    try:
        view = model_view(store_url)
    except Exception as e:  # noqa: BLE001 - a store down or not readable from here: the page goes on without it
        log.debug("ui: model events not read: %s", redact(str(e))[:200])
        return False
    if view != app[MODEL]:
        app[MODEL] = view
        _broadcast(app, [{"type": "model", "model": view}])
    return True


async def _watch_models(app: web.Application, store_url: str) -> None:
    while True:
        await asyncio.to_thread(refresh_model, app, store_url)
        await asyncio.sleep(MODEL_POLL_S)


def _store_readable(settings: Settings) -> str | None:
    """The feedback store to read model events from: a database URL, or a SQLite file that exists
    (the page never creates one)."""
    from schemas.settings.stream import feedback_off

    url = settings.stream.feedback_store
    if not url or feedback_off(url):
        return None
    if url.startswith(("postgresql://", "postgres://")):
        return url
    path = Path(url[len("sqlite:///"):] if url.startswith("sqlite:///") else url).expanduser()
    return str(path) if path.is_file() else None


async def _consume(app: web.Application, settings: Settings, from_beginning: bool) -> None:
    from aiokafka import AIOKafkaConsumer

    state = app[CONSUMER_STATE]
    turns_topic, verdicts_topic = settings.kafka.topic_turns, settings.kafka.topic_verdicts
    while True:  # the broker may not be up yet, or may restart: keep trying
        consumer = AIOKafkaConsumer(group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="earliest" if from_beginning else "latest",
                                    metadata_max_age_ms=2000, **aiokafka_kwargs(settings))
        try:
            await consumer.start()
            consumer.subscribe([turns_topic, verdicts_topic, settings.kafka.topic_feedback])
            state["connected"] = True
            state.pop("error", None)
            async for rec in consumer:
                handle_record(app, rec.topic, rec.value, f"{rec.topic}/{rec.partition}@{rec.offset}")
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - broker gone or not there yet: say so, retry
            state["connected"] = False
            state["error"] = redact(str(e))[:300]
            log.warning("ui consumer: %s; retrying in 2 s", state["error"])
            await asyncio.sleep(2)
        finally:
            with contextlib.suppress(Exception):
                await consumer.stop()


def _host_name(header: str | None) -> str | None:
    """'name:port' / '[v6]:port' → the lower-case name ('[v6]' keeps its brackets)."""
    if not header:
        return None
    h = header.strip().lower()
    if h.startswith("["):
        end = h.find("]")
        return h[:end + 1] if end > 0 else None
    return h.rsplit(":", 1)[0].rstrip(".") if h.count(":") <= 1 else None


def allowed_hosts(ui: UISettings, bind_host: str | None = None) -> frozenset[str]:
    names = {*LOOPBACK_HOSTS, *(n.strip().lower() for n in ui.allowed_hosts.split(",") if n.strip())}
    if bind_host and bind_host not in ("0.0.0.0", "::", ""):
        names.add(f"[{bind_host}]" if ":" in bind_host else bind_host.lower())
    return frozenset(names)


def _host_check(allowed: frozenset[str]):
    @web.middleware
    async def check(request: web.Request, handler):
        """Only Host names this server is meant to be reached by: a DNS-rebinding page (its own name
        pointing at 127.0.0.1) gets 421 and never reads /api/state or /events."""
        if _host_name(request.headers.get("Host")) not in allowed:
            raise web.HTTPMisdirectedRequest(text="dialcheck ui: this Host is not served here "
                                                  "(DIALCHECK_UI_ALLOWED_HOSTS adds names)\n")
        return await handler(request)
    return check


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    for k, v in SECURITY_HEADERS.items():
        response.headers.setdefault(k, v)


async def no_icon(request: web.Request) -> web.Response:
    """No icon, and no 404 in the browser's console."""
    return web.Response(status=204)


async def index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html")


async def state(request: web.Request) -> web.Response:
    snap = request.app[STORE].snapshot()
    snap["model"] = request.app[MODEL]
    snap["consumer"] = dict(request.app[CONSUMER_STATE])
    snap["clients"] = len(request.app[CLIENTS])
    return web.json_response(snap, dumps=lambda o: orjson.dumps(o).decode(), headers={"Cache-Control": "no-store"})


async def events(request: web.Request) -> web.StreamResponse:
    """SSE: `snapshot` first, then `turn` / `verdict` / `evict` / `counts` events; a comment every 15 s.
    At most UI_MAX_CLIENTS pages at once (503 beyond); a page that cannot keep up is disconnected."""
    app, ui = request.app, request.app[UI]
    clients: set = app[CLIENTS]
    if len(clients) >= ui.max_clients:  # dropped pages count until their handler has ended
        raise web.HTTPServiceUnavailable(text=f"dialcheck ui: {ui.max_clients} live pages already open "
                                              "(DIALCHECK_UI_MAX_CLIENTS)\n", headers={"Retry-After": "5"})
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store",
                                       "X-Accel-Buffering": "no"})
    client = Client(ui.client_queue_bytes, request.remote or "?")
    # snapshot and subscription in one step (no await in between): nothing is missed or doubled
    snapshot = orjson.dumps({**app[STORE].snapshot(), "model": app[MODEL]})
    clients.add(client)
    try:
        await asyncio.wait_for(resp.prepare(request), ui.send_timeout_s)
        await asyncio.wait_for(resp.write(b"event: snapshot\ndata: "), ui.send_timeout_s)
        view = memoryview(snapshot)  # in slices: a stalled page holds the snapshot once, not once more in its socket buffer
        for i in range(0, len(view), SNAPSHOT_SLICE):
            await asyncio.wait_for(resp.write(view[i:i + SNAPSHOT_SLICE]), ui.send_timeout_s)
        await asyncio.wait_for(resp.write(b"\n\n"), ui.send_timeout_s)
        del view, snapshot
        while not client.dropped:
            try:
                chunk = await client.next(timeout=15)
            except asyncio.TimeoutError:
                chunk = b": keep-alive\n\n"
            if chunk is None:
                break
            await asyncio.wait_for(resp.write(chunk), ui.send_timeout_s)
        if client.dropped and client.dropped.startswith("more than"):
            app[CONSUMER_STATE]["pages_dropped"] = app[CONSUMER_STATE].get("pages_dropped", 0) + 1
            log.warning("ui: dropped the page at %s (%s); it reconnects to a fresh snapshot", client.peer, client.dropped)
            if request.transport is not None:
                request.transport.abort()  # what its socket still buffers is freed too
    except asyncio.TimeoutError:
        log.warning("ui: disconnected the page at %s: one write took over %.0f s", client.peer, ui.send_timeout_s)
        if request.transport is not None:
            request.transport.abort()  # frees what the socket still buffers
    except (ConnectionError, OSError, RuntimeError) as e:  # the browser went away, even mid-snapshot: one line
        log.info("ui: the page at %s went away (%s)", client.peer, type(e).__name__)
    except asyncio.CancelledError:  # aiohttp cancels a handler whose connection was lost while it waited
        if request.transport is None or request.transport.is_closing():
            log.info("ui: the page at %s went away (connection lost)", client.peer)
        raise
    finally:
        clients.discard(client)
    return resp


async def post_feedback(request: web.Request) -> web.Response:
    """A user's right/wrong on a verdict (the page's buttons) → one record on chat.feedback, source
    "user", validated like every feedback record (schemas/feedback.py); 202 once the broker has it.
    Only this page may post: JSON only (a cross-site form cannot send it without a CORS preflight,
    which is never granted) and, when the browser says where it comes from, this page's own origin."""
    from schemas import InvalidEvent
    from schemas.feedback import MAX_FEEDBACK_BYTES, feedback_from_dict

    origin = request.headers.get("Origin")
    if origin is not None and _host_name(origin.split("://", 1)[-1]) != _host_name(request.headers.get("Host")):
        raise web.HTTPForbidden(text="dialcheck ui: feedback only from this page\n")
    if request.content_type != "application/json":
        raise web.HTTPUnsupportedMediaType(text="dialcheck ui: feedback is a JSON object\n")
    if (request.content_length or 0) > MAX_FEEDBACK_BYTES:
        raise web.HTTPRequestEntityTooLarge(max_size=MAX_FEEDBACK_BYTES, actual_size=request.content_length)
    raw = await request.content.read(MAX_FEEDBACK_BYTES + 1)
    try:
        if len(raw) > MAX_FEEDBACK_BYTES:
            raise InvalidEvent("too_large", f"feedback too large: more than {MAX_FEEDBACK_BYTES} bytes")
        obj = orjson.loads(raw)
        if not isinstance(obj, dict):
            raise InvalidEvent("schema", "feedback is a JSON object")
        obj = {**obj, "source": "user", "ts": time.time(), "schema_version": "1.0"}  # the page judges for users, by our clock
        f = feedback_from_dict(obj)
    except orjson.JSONDecodeError:
        return web.json_response({"ok": False, "reason": "not JSON"}, status=400)
    except InvalidEvent as e:
        return web.json_response({"ok": False, "reason": e.reason}, status=400)
    try:
        await request.app[SEND_FEEDBACK](f.conversation_id.encode("utf-8"), f.to_json())
    except Exception as e:  # noqa: BLE001 - the broker did not take it: say so, the page may retry
        log.warning("ui: feedback not delivered: %s", redact(str(e))[:300])
        return web.json_response({"ok": False, "reason": "not delivered to the broker; try again"}, status=503)
    return web.json_response({"ok": True, "feedback_id": f.feedback_id, "judgement": f.judgement}, status=202)


def kafka_sender(settings: Settings):
    """(send, close): one aiokafka producer started on first use; `send` awaits the broker's ack."""
    state: dict = {}

    async def send(key: bytes, value: bytes) -> None:
        from aiokafka import AIOKafkaProducer

        if "producer" not in state:
            p = AIOKafkaProducer(acks="all", request_timeout_ms=10000, **aiokafka_kwargs(settings))
            await p.start()
            state["producer"] = p
        await asyncio.wait_for(state["producer"].send_and_wait(settings.kafka.topic_feedback, value, key=key), 15)

    async def close() -> None:
        if "producer" in state:
            with contextlib.suppress(Exception):
                await state.pop("producer").stop()

    return send, close


def create_app(settings: Settings, max_conversations: int | None = None, max_turns: int | None = None,
               from_beginning: bool = True, consume: bool = True, bind_host: str | None = None) -> web.Application:
    """`consume=False`: no Kafka consumer (tests feed records through `handle_record`)."""
    ui = settings.ui if max_turns is None else settings.ui.model_copy(update={"max_turns": max_turns})
    from ..precision import preload

    preload()  # the live precision's scipy, before the page is served (not on the first judgement)
    app = web.Application(middlewares=[_host_check(allowed_hosts(ui, bind_host))])
    app[UI] = ui
    app[STORE] = Store.from_settings(settings.updated(ui={"max_turns": ui.max_turns}), max_conversations)
    app[CLIENTS] = set()
    app[MODEL] = {"live": None, "events": []}
    app[CONSUMER_STATE] = {"connected": False, "broker": redact(settings.kafka.bootstrap),
                           "topic_turns": settings.kafka.topic_turns, "topic_verdicts": settings.kafka.topic_verdicts,
                           "topic_feedback": settings.kafka.topic_feedback}
    send, close_sender = kafka_sender(settings)
    app[SEND_FEEDBACK] = send

    async def consumer_ctx(app: web.Application):
        task = asyncio.create_task(_consume(app, settings, from_beginning)) if consume else None
        store_url = _store_readable(settings) if consume else None
        models = asyncio.create_task(_watch_models(app, store_url)) if store_url else None
        yield
        await close_sender()
        for t in (task, models):
            if t is not None:
                t.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t

    async def close_streams(app: web.Application) -> None:
        for c in list(app[CLIENTS]):  # ends every SSE handler's loop
            c.drop("server shutting down")

    app.cleanup_ctx.append(consumer_ctx)
    app.on_shutdown.append(close_streams)
    app.on_response_prepare.append(_security_headers)
    app.router.add_get("/", index)
    app.router.add_get("/favicon.ico", no_icon)
    app.router.add_get("/events", events)
    app.router.add_get("/api/state", state)
    app.router.add_post("/api/feedback", post_feedback)
    app.router.add_static("/static/", STATIC)
    return app


class PortInUse(DialcheckError, OSError):
    """The page's port is taken (the CLI says so in one line, dialcheck/errors.py)."""

    def __init__(self, host: str, port: int):
        super().__init__(f"port {host}:{port} is in use")
        self.host, self.port = host, port


async def _start(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, str]:
    import errno

    runner = web.AppRunner(app, shutdown_timeout=2)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as e:
        await runner.cleanup()
        if e.errno == errno.EADDRINUSE:
            raise PortInUse(host, port) from None
        raise
    bound = site._server.sockets[0].getsockname()[1]  # the real port when 0 was asked for
    return runner, f"http://{host}:{bound}/"


def serve(settings: Settings, host: str = "127.0.0.1", port: int = 8765, max_conversations: int = 200,
          from_beginning: bool = True) -> int:
    """Run in the foreground until Ctrl-C / SIGTERM; prints the URL when it listens."""
    import signal

    async def main() -> None:
        runner, url = await _start(create_app(settings, max_conversations, from_beginning=from_beginning, bind_host=host),
                                   host, port)
        print(f"{READY_MARKER} {url} (following {settings.kafka.topic_turns} and {settings.kafka.topic_verdicts} "
              f"on {redact(settings.kafka.bootstrap)})", flush=True)
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
                runner, self.url = await _start(create_app(self.settings, self.max_conversations, bind_host=self.host),
                                                self.host, self.port)
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
            if errors and isinstance(errors[0], PortInUse):
                raise errors[0]
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


__all__ = ["READY_MARKER", "PortInUse", "UIServer", "create_app", "serve"]
