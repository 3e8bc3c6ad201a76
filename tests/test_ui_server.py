"""The ui's web server (streams/ui/server.py) on a real socket, without Kafka (records go in through
`handle_record`, the function the consumer calls): security headers, the Host allow-list, the bound
on live pages, a page that does not read is dropped with its queue bounded, a page that goes away
mid-snapshot is one log line, and no record can raise out of the consumer's loop.

The consumer itself, with a real broker and Chromium, is in tests/test_ui_browser.py."""
from __future__ import annotations

import asyncio
import logging
import socket
import struct

import aiohttp
import orjson
import pytest
from aiohttp.test_utils import TestServer

from schemas.settings import load_settings
from streams.ui.server import CLIENTS, CONSUMER_STATE, STORE, Client, create_app, handle_record
from test_ui_store import good_verdict, hostile_verdicts, turn, v21

pytestmark = pytest.mark.unit

TURNS, VERDICTS = "chat.turns", "chat.verdicts"


def _app(**ui):
    return create_app(load_settings(ui=ui), consume=False)


def run(coro):
    return asyncio.run(coro)


async def _serve(app):
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server()
    return server


async def _get(server, path: str, host: str | None = None):
    headers = {"Host": host} if host else {}
    async with aiohttp.ClientSession() as s:
        async with s.get(f"http://127.0.0.1:{server.port}{path}", headers=headers) as r:
            return r.status, dict(r.headers), await r.read()


def test_security_headers_on_every_response():
    async def go():
        server = await _serve(_app())
        try:
            for path in ("/", "/api/state", "/static/app.js", "/static/style.css", "/nothing-here"):
                status, headers, _ = await _get(server, path)
                assert status == (404 if path == "/nothing-here" else 200), path
                csp = headers["Content-Security-Policy"]
                assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp, path
                assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
                assert headers["X-Content-Type-Options"] == "nosniff"
                assert headers["X-Frame-Options"] == "DENY"
        finally:
            await server.close()
    run(go())


def test_host_allow_list():
    """A DNS-rebinding page reaches 127.0.0.1 under its own name: that Host gets 421."""
    async def go():
        server = await _serve(_app(allowed_hosts="checker.example.org, ops.local"))
        port = server.port
        try:
            for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", "localhost",
                         f"checker.example.org:{port}", "OPS.LOCAL"):
                assert (await _get(server, "/api/state", host))[0] == 200, host
            for host in (f"evil.example:{port}", "rebind.attacker.test", f"localhost.evil.example:{port}",
                         "127.0.0.1.nip.io", f"[::2]:{port}", "a:b:c"):
                status, _, body = await _get(server, "/api/state", host)
                assert status == 421 and b"conversations" not in body, host
                assert (await _get(server, "/events", host))[0] == 421, host
        finally:
            await server.close()
    run(go())


async def _open_sse(port: int, rcvbuf: int | None = None, limit: int = 1 << 24) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A page as a raw socket (HTTP/1.0: the stream is not chunked); `rcvbuf` set before connecting
    and a small `limit` keep the kernel and asyncio from buffering megabytes for a page that does not read."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock, limit=limit)
    writer.write(f"GET /events HTTP/1.0\r\nHost: localhost:{port}\r\nAccept: text/event-stream\r\n\r\n".encode())
    await writer.drain()
    return reader, writer


async def _read_snapshot(reader: asyncio.StreamReader) -> dict:
    status = await reader.readline()
    assert b" 200 " in status, status
    await reader.readuntil(b"event: snapshot\n")
    data = await reader.readuntil(b"\n\n")
    assert data.startswith(b"data: ")
    return orjson.loads(data[len(b"data: "):])


def test_sse_clients_are_bounded():
    async def go():
        app = _app(max_clients=2)
        server = await _serve(app)
        try:
            a = await _open_sse(server.port)
            b = await _open_sse(server.port)
            await _read_snapshot(a[0])
            await _read_snapshot(b[0])
            assert len(app[CLIENTS]) == 2
            status, headers, _ = await _get(server, "/events")
            assert status == 503 and headers["Retry-After"] == "5"
            a[1].close()  # one page goes: a new one is served
            while len(app[CLIENTS]) > 1:  # the server notices at its next write
                handle_record(app, TURNS, turn("c", "t", "ping", check=False))
                await asyncio.sleep(0.05)
            c = await _open_sse(server.port)
            assert (await _read_snapshot(c[0]))["counts"]["turns"] >= 1
            b[1].close()
            c[1].close()
        finally:
            await server.close()
    run(go())


def test_a_page_that_does_not_read_is_dropped_and_its_queue_stays_bounded(caplog):
    """Unbounded, every stalled page once held up to 10,000 events (plus its snapshot) for ever."""
    async def go():
        queue_bytes = 65536
        app = _app(client_queue_bytes=queue_bytes, send_timeout_s=1.0)
        server = await _serve(app)
        try:
            reader, writer = await _open_sse(server.port, rcvbuf=4096, limit=4096)
            await _read_snapshot(reader)
            (client,) = app[CLIENTS]
            sent = 0
            while client in app[CLIENTS] and sent < 20000:  # this page never reads again
                handle_record(app, VERDICTS, orjson.dumps(good_verdict(f"c{sent % 50}", f"t{sent}", f"claim {sent}",
                                                                       evidence_text="w" * 2000)))
                sent += 1
                assert client.bytes <= queue_bytes
                if sent % 20 == 0:
                    await asyncio.sleep(0)  # let the handler run (and block on the full socket)
            for _ in range(200):  # wait (bounded) for the handler to end once dropped
                if client not in app[CLIENTS]:
                    break
                await asyncio.sleep(0.05)
            assert client.dropped and client not in app[CLIENTS]
            assert client.queue.qsize() <= 1 and client.bytes == 0  # what it was never sent is freed
            writer.close()
        finally:
            await server.close()
    with caplog.at_level(logging.INFO, logger="dialcheck.ui"):
        run(go())
    dropped = [r for r in caplog.records if r.name == "dialcheck.ui" and ("dropped the page" in r.message
                                                                          or "disconnected the page" in r.message)]
    assert len(dropped) == 1 and dropped[0].exc_info is None


def test_client_queue_refuses_beyond_its_bytes():
    async def go():
        c = Client(max_bytes=100)
        assert c.offer(b"x" * 60) and not c.offer(b"y" * 60)
        assert c.dropped and c.bytes == 0 and await c.next(1) is None
        assert not c.offer(b"z")  # a dropped page gets nothing more
    run(go())


def test_a_page_that_goes_away_mid_snapshot_is_one_log_line(caplog):
    async def go():
        app = _app()
        for i in range(300):  # a snapshot of a few MB: the page leaves while it is being written
            handle_record(app, VERDICTS, orjson.dumps(good_verdict(f"c{i}", "t", f"claim {i}", evidence_text="w" * 9000)))
        assert len(orjson.dumps(app[STORE].snapshot())) > 2_000_000
        server = await _serve(app)
        try:
            reader, writer = await _open_sse(server.port)
            await reader.readexactly(10000)
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # reset, not FIN
            writer.close()
            for _ in range(200):
                if not app[CLIENTS]:
                    break
                await asyncio.sleep(0.05)
            assert not app[CLIENTS]
            assert (await _get(server, "/api/state"))[0] == 200  # still serving
        finally:
            await server.close()
    with caplog.at_level(logging.DEBUG):
        run(go())
    lines = [r for r in caplog.records if r.name.startswith(("dialcheck.ui", "aiohttp")) and r.name != "aiohttp.access"
             and r.levelno >= logging.INFO]
    assert [r.name for r in lines] == ["dialcheck.ui"], [(r.name, r.getMessage()) for r in lines]
    assert "went away" in lines[0].getMessage() and lines[0].exc_info is None


def test_hostile_records_never_reach_a_page_and_the_snapshot_always_serialises():
    async def go():
        app = _app()
        for name, raw in hostile_verdicts().items():
            handle_record(app, VERDICTS, raw, name)
        for raw in (b"\xff\xfe", b"[" * 5000 + b"]" * 5000, b"null", b"{}"):
            handle_record(app, TURNS, raw)
            handle_record(app, VERDICTS, raw)
        handle_record(app, VERDICTS, None)  # a tombstone: nothing to show, nothing to count
        handle_record(app, TURNS, turn("good", "1", "Paris is in Spain."))
        handle_record(app, VERDICTS, orjson.dumps(good_verdict("good", "1", "Paris is in Spain.")))
        server = await _serve(app)
        try:
            reader, writer = await _open_sse(server.port)
            snap = await _read_snapshot(reader)
            writer.close()
        finally:
            await server.close()
        assert snap["counts"]["rejected"] == 5 + 8
        assert [c["id"] for c in snap["conversations"]] == ["good"]
        # 3 by the JSON schema and 1 by schemas.Verdict, then "null" and "{}"
        assert snap["rejected"]["verdict: schema"] == 4 + 2
        assert app[CONSUMER_STATE]["connected"] is False
    run(go())


def test_a_record_that_breaks_the_store_is_counted_not_raised(monkeypatch):
    """The consumer loop never sees an exception from one record (it used to restart from offset 0)."""
    app = _app()

    def boom(raw, where=""):
        raise RecursionError("something nobody foresaw")
    monkeypatch.setattr(app[STORE], "add_verdict_raw", boom)
    handle_record(app, VERDICTS, b"{}", "chat.verdicts/0@7")
    assert app[STORE].counts["rejected"] == 1
    assert app[STORE].last_rejected[-1]["where"] == "chat.verdicts/0@7"
    assert "RecursionError" in app[STORE].last_rejected[-1]["reason"]


def test_a_page_stalled_mid_snapshot_is_disconnected_after_the_send_timeout(caplog):
    """A page that stops reading inside a large snapshot: the write that cannot finish is given up
    after DIALCHECK_UI_SEND_TIMEOUT_S, the connection is aborted and the page no longer counts."""
    async def go():
        app = _app(send_timeout_s=1.0)
        for i in range(800):  # ~16 MB: more than the loopback socket buffers take
            handle_record(app, VERDICTS, orjson.dumps(good_verdict(f"c{i}", "t", f"claim {i}", evidence_text="w" * 9000)))
        server = await _serve(app)
        try:
            reader, writer = await _open_sse(server.port, rcvbuf=4096, limit=4096)
            await reader.readexactly(1000)  # then never reads again
            for _ in range(400):
                if not app[CLIENTS]:
                    break
                await asyncio.sleep(0.05)
            assert not app[CLIENTS]
            assert (await _get(server, "/api/state"))[0] == 200
            writer.close()
        finally:
            await server.close()
    with caplog.at_level(logging.INFO):
        run(go())
    lines = [r for r in caplog.records if r.name.startswith(("dialcheck.ui", "aiohttp")) and r.name != "aiohttp.access"
             and r.levelno >= logging.INFO]
    assert len(lines) == 1 and "one write took over 1 s" in lines[0].getMessage() and lines[0].exc_info is None


def test_pages_get_the_display_hint_latency_links_and_counts():
    """What the page gets for people, through the real server: a schema 2.1 verdict's display hint, latency and
    http(s) source link reach a live page as an SSE event; a javascript: link never leaves the server
    (not in the stream's bytes); /api/state and a fresh page's snapshot carry each conversation's
    counts and median latency."""
    async def go():
        app = _app()
        server = await _serve(app)
        try:
            reader, writer = await _open_sse(server.port)
            await _read_snapshot(reader)
            handle_record(app, TURNS, turn("c", "1", "Paris is in Spain."))
            handle_record(app, VERDICTS, orjson.dumps(v21(
                "c", "1", "Paris is in Spain.", display={"show": True, "tone": "disputed", "confidence": "high"},
                url="https://en.wikipedia.org/wiki/Paris", latency_ms=1200.0)))
            handle_record(app, TURNS, turn("c", "2", "Paris is in Italy."))
            handle_record(app, VERDICTS, orjson.dumps(v21("c", "2", "Paris is in Italy.", url="javascript:alert(1)",
                                                          latency_ms=2000.0)))
            raw = b""
            while raw.count(b"event: verdict\n") < 2:
                raw += await asyncio.wait_for(reader.readuntil(b"\n\n"), 10)
            writer.close()
            assert b"javascript:" not in raw
            verdicts = [orjson.loads(chunk.split(b"data: ", 1)[1])["verdict"] for chunk in raw.split(b"\n\n")
                        if chunk.startswith(b"event: verdict")]
            assert [v["evidence"][0]["url"] for v in verdicts] == ["https://en.wikipedia.org/wiki/Paris", None]
            assert verdicts[0]["display"] == {"show": True, "tone": "disputed", "confidence": "high"}
            assert verdicts[1]["display"] is None and verdicts[1]["latency_ms"] == 2000.0
            status, _, body = await _get(server, "/api/state")
            (conv,) = orjson.loads(body)["conversations"]
            assert status == 200 and b"javascript:" not in body
            assert conv["summary"]["labels"] == {"REFUTES": 2} and conv["summary"]["checked"] == 2
            assert conv["summary"]["latency_ms_median"] == 1600.0
            reader, writer = await _open_sse(server.port)  # a fresh page: the same through the snapshot
            (fresh,) = (await _read_snapshot(reader))["conversations"]
            writer.close()
            assert fresh["summary"] == conv["summary"] and fresh["verdicts"] == conv["verdicts"]
        finally:
            await server.close()
    run(go())


def test_feedback_post_produces_a_user_judgement_and_refuses_what_is_not_the_page():
    """POST /api/feedback: validated like every feedback record, source forced to "user" and the
    time set by the server; a cross-origin or non-JSON post is refused before anything is sent; a
    send that fails is a 503 the page can retry (never a 202 for an undelivered judgement)."""
    from schemas.feedback import parse_feedback
    from streams.ui.server import SEND_FEEDBACK

    sent: list[tuple[bytes, bytes]] = []
    fail = {"now": False}

    async def send(key, value):
        if fail["now"]:
            raise ConnectionError("broker gone")
        sent.append((key, value))

    body = {"conversation_id": "c1", "turn_id": "t1", "claim_id": "k1", "label_shown": "SUPPORTS",
            "judgement": "wrong", "feedback_id": "page:k1", "shown": True, "confidence_shown": "high",
            "source": "moderator", "ts": 1.0}

    async def go():
        app = _app()
        app[SEND_FEEDBACK] = send
        server = await _serve(app)
        url = f"http://127.0.0.1:{server.port}/api/feedback"
        out = []
        try:
            async with aiohttp.ClientSession() as s:
                for kw in ({"json": body}, {"json": {**body, "judgement": "meh"}}, {"data": b"{x", "headers": {"Content-Type": "application/json"}},
                           {"data": orjson.dumps(body), "headers": {"Content-Type": "text/plain"}},
                           {"json": body, "headers": {"Origin": "http://evil.example"}},
                           {"json": body, "headers": {"Origin": f"http://127.0.0.1:{server.port}"}}):
                    async with s.post(url, **kw) as r:
                        out.append((r.status, await r.json(content_type=None) if r.status in (202, 400) else None))
                fail["now"] = True
                async with s.post(url, json=body) as r:
                    out.append((r.status, await r.json()))
        finally:
            await server.close()
        return out

    out = run(go())
    assert [s for s, _ in out] == [202, 400, 400, 415, 403, 202, 503]
    assert "judgement" in out[1][1]["reason"] and out[6][1]["ok"] is False
    assert len(sent) == 2 and sent[0][0] == b"c1"
    f = parse_feedback(sent[0][1])
    assert f.source == "user" and f.ts > 1e9 and f.judgement == "wrong" and f.shown is True and f.feedback_id == "page:k1"


def test_live_precision_counts_each_judgement_once_and_raises_the_alarm():
    """chat.feedback read by the ui: a redelivered record counts once, a changed mind replaces the
    first judgement, an older replay never undoes it; the page gets `precision` events and the
    snapshot carries the rows and the alarm."""
    app = _app()
    state = app[CONSUMER_STATE]
    for i in range(4):
        v = good_verdict("c", f"t{i}", f"claim {i}")
        v["label"] = "REFUTES" if i < 3 else "SUPPORTS"
        v["display"] = {"show": True, "tone": "disputed" if i < 3 else "supported", "confidence": "medium"}
        handle_record(app, VERDICTS, orjson.dumps(v))

    def fb(i: int, judgement: str, ts: float, label: str = "REFUTES") -> bytes:
        return orjson.dumps({"conversation_id": "c", "turn_id": f"t{i}", "claim_index": 0, "label_shown": label,
                             "judgement": judgement, "source": "user", "ts": ts, "feedback_id": f"p{i}"})

    for raw in (fb(0, "wrong", 1), fb(0, "wrong", 1), fb(1, "right", 1), fb(1, "wrong", 2), fb(1, "right", 1),
                fb(2, "wrong", 1), fb(3, "right", 1, "SUPPORTS"), b"{not json"):
        handle_record(app, state["topic_feedback"], raw)
    snap = app[STORE].snapshot()
    rows = {r["label"]: r for r in snap["precision"]["rows"]}
    assert (rows["REFUTES"]["right"], rows["REFUTES"]["wrong"]) == (0, 3) and rows["REFUTES"]["alarm"]
    assert rows["SUPPORTS"]["n"] == 1 and not rows["SUPPORTS"]["alarm"]
    assert rows["REFUTES"]["coverage"] == 0.75 and rows["high"]["n"] == 0
    assert snap["precision"]["alarm"] == ["REFUTES"] and snap["precision"]["feedback"] == {"right": 1, "wrong": 3, "unsure": 0}
    assert snap["rejected"].get("feedback: malformed_json") == 1


def test_the_page_says_the_model_in_use_and_the_loops_last_steps(tmp_path):
    """The adaptation loop's events in the feedback store reach the page: the version in use (the last
    promotion's, or the one a rollback went back to) and the steps, in /api/state and as a `model` event."""
    from streams.feedback_store import FeedbackStore
    from streams.ui.server import MODEL, refresh_model

    path = tmp_path / "fb.sqlite3"
    app = _app()
    clients_got = Client(1 << 20)
    app[CLIENTS].add(clients_got)
    assert not refresh_model(app, "postgresql://nobody@127.0.0.1:1/none")  # unreachable: the page goes on
    with FeedbackStore(path) as st:
        st.add_event("built", "v1", other="v0", reason="ranks better")
        st.add_event("promoted", "v1", other="v0", reason="challenger won")
        st.add_event("promoted", "v2", other="v1", reason="by hand")
        st.add_event("rolled_back", "v2", other="v1", reason="drift alarm: SUPPORTS badges right 3 of 12")
    assert refresh_model(app, str(path))
    assert app[MODEL]["live"] == "v1"
    assert [(e["event"], e["version"]) for e in app[MODEL]["events"]] == [
        ("built", "v1"), ("promoted", "v1"), ("promoted", "v2"), ("rolled_back", "v2")]
    assert clients_got.queue.qsize() == 1 and clients_got.queue.get_nowait().startswith(b"event: model\n")
    assert refresh_model(app, str(path)) and clients_got.queue.qsize() == 0  # unchanged: nothing sent

    async def go():
        server = await _serve(app)
        try:
            return await _get(server, "/api/state")
        finally:
            await server.close()
    status, _, body = run(go())
    assert status == 200 and orjson.loads(body)["model"]["live"] == "v1"

    # more steps since than the page shows (refused challengers): the version in use is still v1
    from streams.ui.server import MODEL_EVENTS_SHOWN

    with FeedbackStore(path) as st:
        for i in range(MODEL_EVENTS_SHOWN):
            st.add_event("refused", f"v{3 + i}", other="v1", reason="lost to the live model")
    assert refresh_model(app, str(path)) and app[MODEL]["live"] == "v1"
    assert len(app[MODEL]["events"]) == MODEL_EVENTS_SHOWN and app[MODEL]["events"][-1]["event"] == "refused"
