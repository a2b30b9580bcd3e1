"""`steer serve`'s HTTP server under hostile clients: the token before anything else, size
caps, framing, timeouts, a bound on connections without the token, and statistics that stay
bounded. Real sockets on 127.0.0.1 against a real ChatServer; the memory figures of a real
`steer serve` process are in test_serve_memory.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.providers.openai_responses import OpenAIResponses
from app.server.chat_server import ChatServer
from app.server.generation import KEEP_REQUESTS, Recent
from app.server.http import Limits, Refusal

TOKEN = "serve-limits-token-0123456789abcdefghijklmnop"
AUTH = f"Authorization: Bearer {TOKEN}\r\n"
CHAT = json.dumps({"model": "r", "messages": [{"role": "user", "content": "hi"}]}).encode()


@contextlib.asynccontextmanager
async def serve(**limits: object) -> AsyncIterator[ChatServer]:
    server = ChatServer(replay="ok", token=TOKEN, limits=Limits(**limits))  # type: ignore[arg-type]
    await server.start()
    try:
        yield server
    finally:
        await server.close()


async def connect(server: ChatServer) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", server.http.port)


async def status_of(reader: asyncio.StreamReader, give_up: float = 30.0) -> int:
    """The status of the next response (its head and body read), or 0 when the connection
    closed without one. `give_up` only ends a test the server never answers."""
    async with asyncio.timeout(give_up):
        line = await reader.readline()
        if not line:
            return 0
        length = 0
        while (h := await reader.readline()) not in (b"\r\n", b""):
            if h.lower().startswith(b"content-length:"):
                length = int(h.split(b":")[1])
        await reader.readexactly(length)
    return int(line.split()[1])


async def ask(server: ChatServer, raw: bytes) -> int:
    r, w = await connect(server)
    try:
        w.write(raw)
        await w.drain()
        return await status_of(r)
    finally:
        w.close()


def passed(seconds: float) -> asyncio.Event:
    """Set once `seconds` have gone by on the event loop's clock, the one the server's timeouts
    run on (the server runs in this loop). A timeout as long armed after this one fires after
    it, however loaded the machine: the loop runs its timers in the order they fall due. So
    "closed after this was set" is an order of events, not a measured time."""
    moment = asyncio.Event()
    asyncio.get_running_loop().call_later(seconds, moment.set)
    return moment


async def close_of(reader: asyncio.StreamReader, timeout: asyncio.Event | None = None,
                   give_up: float = 30.0) -> str:
    """How the server ended the connection (whatever it sent first): "closed", or "early"
    when it closed before `timeout` was set, or "open" when it had not closed it when the
    test gave up waiting (`give_up` only ends a test whose server never closes)."""
    try:
        async with asyncio.timeout(give_up):
            while await reader.read(65536):
                pass
    except TimeoutError:
        return "open"
    except ConnectionError:
        pass
    return "early" if timeout is not None and not timeout.is_set() else "closed"


async def until(cond, give_up: float = 30.0) -> None:
    """Wait for `cond()` (a state the server reaches), giving up after `give_up` s."""
    async with asyncio.timeout(give_up):
        while not cond():
            await asyncio.sleep(0.005)


# -- the token first ------------------------------------------------------------------------
async def test_a_tokenless_upgrade_with_60kB_of_headers_gets_401_after_reading_8kB():
    async with serve() as server:
        head = (b"GET /v1/responses HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                + b"".join(b"X-Pad-%d: %s\r\n" % (i, b"a" * 1000) for i in range(60)) + b"\r\n")
        assert await ask(server, head) == 401  # answered: the 60 kB were not waited for
        refused = server.stats.refused[-1]
        assert refused["status"] == 401 and refused["path"] == "/v1/responses"
        assert len(json.dumps(refused)) < 9000  # no more than the first 8 kB was read
        assert server.stats.headers == [] and server.stats.upgrades == 0


@pytest.mark.parametrize("auth", ["", "Authorization: Bearer wrong\r\n",
                                  "Authorization: Bearer \xe9t\xe9\r\n"],
                         ids=["none", "wrong", "latin-1"])
@pytest.mark.parametrize("path", ["/health", "/v1/models", "/v1/responses"])
async def test_every_route_needs_the_token_health_too(auth, path):
    async with serve() as server:
        assert await ask(server, f"GET {path} HTTP/1.1\r\n{auth}\r\n".encode("latin-1")) == 401
        assert await ask(server, f"GET {path} HTTP/1.1\r\n{AUTH}\r\n".encode()) in (200, 400)


async def test_a_tokenless_60MB_body_is_refused_before_it_is_read():
    async with serve() as server:
        r, w = await connect(server)
        w.write(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 60000000\r\n\r\n")
        sent = 0
        status = asyncio.ensure_future(status_of(r))
        with contextlib.suppress(ConnectionError):
            while not status.done() and sent < 60_000_000:
                w.write(b"x" * 1_000_000)
                sent += 1_000_000
                await asyncio.wait_for(w.drain(), 5)
        assert await status == 401
        assert sent < 30_000_000, sent  # answered long before the body could have been read
        assert server.stats.bodies == [] and server.stats.requests == []
        w.close()


async def test_the_token_may_come_after_other_headers_within_the_window():
    async with serve() as server:
        pad = "".join(f"X-{i}: {'b' * 200}\r\n" for i in range(20))  # 4 kB before the token
        assert await ask(server, f"GET /health HTTP/1.1\r\n{pad}{AUTH}\r\n".encode()) == 200
        pad = "".join(f"X-{i}: {'b' * 200}\r\n" for i in range(50))  # 10 kB before it
        assert await ask(server, f"GET /health HTTP/1.1\r\n{pad}{AUTH}\r\n".encode()) == 401


# -- sizes and framing ----------------------------------------------------------------------
async def test_a_100MB_authorized_body_gets_413_unread():
    async with serve() as server:
        r, w = await connect(server)
        w.write(f"POST /v1/chat/completions HTTP/1.1\r\n{AUTH}Content-Length: 100000000\r\n"
                "\r\n".encode())
        status = asyncio.ensure_future(status_of(r))
        sent = 0
        with contextlib.suppress(ConnectionError):
            while not status.done() and sent < 100_000_000:
                w.write(b"x" * 1_000_000)
                sent += 1_000_000
                await asyncio.wait_for(w.drain(), 5)
        assert await status == 413
        assert sent < 30_000_000, sent
        assert server.stats.bodies == [] and server.stats.refused[-1]["status"] == 413
        w.close()


def post(length: str, extra: str = "") -> bytes:
    return (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n{AUTH}Content-Length: {length}"
            f"\r\n{extra}\r\n").encode()


FRAMING = [
    (post("-1"), 400),
    (post("abc"), 400),
    (post("99999999999999999999"), 400),
    (post("+5"), 400),
    (post("5, 6"), 400),
    (post("5", "Transfer-Encoding: chunked\r\n"), 400),
    (f"POST /v1/chat/completions HTTP/1.1\r\n{AUTH}Transfer-Encoding: chunked\r\n\r\n".encode(), 411),
    (f"POST /v1/chat/completions HTTP/1.1\r\n{AUTH}Transfer-Encoding: gzip\r\n\r\n".encode(), 501),
    (b"GET /health\r\n\r\n", 400),
    (b"GET  /health HTTP/1.1\r\n\r\n", 400),
    (b"G(T /health HTTP/1.1\r\n\r\n", 400),
    (b"GET /health HTTX/1.1\r\n\r\n", 400),
    (b"GET /health HTTP/2.0\r\n\r\n", 505),
    (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n", 414),
    (f"GET /health HTTP/1.1\r\n{AUTH}X-Long: {'a' * 9000}\r\n\r\n".encode(), 431),
    (f"GET /health HTTP/1.1\r\n{AUTH}".encode()  # 36 kB of lines of 4 kB
     + b"".join(b"X-%d: %s\r\n" % (i, b"a" * 4000) for i in range(9)) + b"\r\n", 431),
    (f"GET /health HTTP/1.1\r\n{AUTH} folded\r\n\r\n".encode(), 400),
    (f"GET /health HTTP/1.1\r\n{AUTH}No colon here\r\n\r\n".encode(), 400),
    (f"GET /health HTTP/1.1\r\n{AUTH}Bad Name: x\r\n\r\n".encode(), 400),
]
NAMES = ["length -1", "length abc", "length 20 digits", "length +5", "two lengths",
         "length and chunked", "chunked", "gzip", "no version", "two spaces", "bad method",
         "bad version", "HTTP/2.0", "request line 9 kB", "header line 9 kB", "head 36 kB",
         "folded", "no colon", "space in name"]


@pytest.mark.parametrize("raw,status", FRAMING, ids=NAMES)
async def test_malformed_framing_gets_its_4xx(raw, status):
    async with serve() as server:
        assert await ask(server, raw) == status
        assert server.stats.bodies == [] and server.stats.refused[-1]["status"] == status


async def test_a_request_without_host_and_a_body_with_its_length_are_fine():
    async with serve() as server:
        assert await ask(server, f"GET /health HTTP/1.1\r\n{AUTH}\r\n".encode()) == 200
        raw = post(str(len(CHAT)), "Expect: 100-continue\r\n") + CHAT
        r, w = await connect(server)
        w.write(raw)
        assert await status_of(r) == 100  # then the answer, on the same connection
        assert await status_of(r) == 200
        w.close()
        assert server.stats.bodies[-1]["messages"][0]["content"] == "hi"


# -- time -----------------------------------------------------------------------------------
async def dribbler(server: ChatServer, with_token: bool, timeout: asyncio.Event) -> str:
    r, w = await connect(server)
    w.write(b"GET /health HTTP/1.1\r\n" + (AUTH.encode() if with_token else b""))
    closed = asyncio.ensure_future(close_of(r, timeout))
    with contextlib.suppress(ConnectionError):
        while not closed.done():
            w.write(b"X")  # one byte of a header line every 0.1 s
            await w.drain()
            await asyncio.sleep(0.1)
    w.close()
    return await closed


async def test_50_slow_header_clients_are_all_closed_after_the_header_timeout():
    async with serve(header_timeout=1.0) as server:
        timeout = passed(1.0)  # armed before any of them connects
        # a byte every 0.1 s never lets a per-read timeout fire: closed at all, each is closed
        # by the timer on its whole head, and not before that timer (nor by the test giving up)
        closed = await asyncio.gather(*(dribbler(server, i % 2 == 0, timeout) for i in range(50)))
        assert closed == ["closed"] * 50, closed
        assert not server.http._connections
        assert [r["status"] for r in server.stats.refused].count(408) == 50


async def test_a_silent_connection_is_closed_after_the_header_timeout():
    async with serve(header_timeout=0.5) as server:
        timeout = passed(0.5)
        r, _ = await connect(server)
        assert await close_of(r, timeout) == "closed"
        assert [x["status"] for x in server.stats.refused] == [408]


async def test_an_idle_keep_alive_connection_is_closed_but_a_websocket_is_not():
    async with serve(idle_timeout=1.0, header_timeout=0.5) as server:
        r, w = await connect(server)
        for _ in range(2):  # the same connection serves several requests
            timeout = passed(1.0)  # before the request whose answer starts the idle timer
            w.write(f"GET /health HTTP/1.1\r\n{AUTH}\r\n".encode())
            assert await status_of(r) == 200
        assert await close_of(r, timeout) == "closed"
        assert server.stats.refused == []  # an idle connection is closed, not answered 408
        # the persistent WebSocket the providers keep is not an idle HTTP connection
        p = OpenAIResponses(server.base_url, "m", TOKEN)
        await p.warm()
        await passed(1.5).wait()  # the idle timer of a connection made before it has fired
        assert server.stats.upgrades == 1 and len(server.http._connections) == 1  # still open
        from app.core.provider import Request

        events = [ev async for ev in p.stream(Request([{"role": "user", "content": "x"}]))]
        await p.aclose()
        assert any(type(ev).__name__ == "Done" for ev in events)


async def test_a_slow_authorized_body_gets_408():
    async with serve(body_timeout=0.5) as server:
        r, w = await connect(server)
        w.write(post("100") + b"{")
        assert await status_of(r) == 408


# -- how many at once -----------------------------------------------------------------------
async def test_connections_without_the_token_are_bounded():
    async with serve(unauthenticated=8, header_timeout=2.0) as server:
        held = [await connect(server) for _ in range(8)]
        for _, w in held:
            w.write(b"GET /health HTTP/1.1\r\n")  # a head begun, no token yet
        await until(lambda: len(server.http._connections) == 8)  # the server holds all 8
        assert await ask(server, f"GET /health HTTP/1.1\r\n{AUTH}\r\n".encode()) == 503
        # refused at once, not held until a slot was freed: no header timeout had fired yet
        assert [x["status"] for x in server.stats.refused] == [503]
        for r, _ in held:  # the header timeout frees them
            assert await close_of(r) == "closed"
        assert await ask(server, f"GET /health HTTP/1.1\r\n{AUTH}\r\n".encode()) == 200
        # a connection past the token no longer counts
        kept = []
        for _ in range(10):
            r, w = await connect(server)
            w.write(f"GET /health HTTP/1.1\r\n{AUTH}\r\n".encode())
            assert await status_of(r) == 200
            kept.append((r, w))
        assert await ask(server, f"GET /health HTTP/1.1\r\n{AUTH}\r\n".encode()) == 200
        for _, w in kept:
            w.close()


# -- statistics -----------------------------------------------------------------------------
async def test_statistics_stay_bounded_after_10000_requests():
    async with serve() as server:
        async def client(n: int) -> None:
            r, w = await connect(server)
            for _ in range(n):
                w.write(post(str(len(CHAT))) + CHAT)
                assert await status_of(r) == 200
            w.close()

        await asyncio.gather(*(client(2500) for _ in range(4)))
        stats = server.stats
        assert len(stats.requests) == len(stats.bodies) == len(stats.headers) == 10_000
        assert len(stats.bodies.kept) == len(stats.headers.kept) == KEEP_REQUESTS
        assert len(stats.requests.kept) <= 1024 and len(stats.started.kept) <= 1024
        assert stats.bodies[-1]["messages"][0]["content"] == "hi"  # the recent ones are read
        assert stats.bodies[9999] == stats.bodies[-1]
        with pytest.raises(IndexError):
            stats.bodies[0]


def test_recent_keeps_absolute_positions():
    r: Recent[int] = Recent(3)
    assert r == [] and not r
    for i in range(5):
        r.append(i)
    assert len(r) == 5 and r == [2, 3, 4] and list(r) == [2, 3, 4]
    assert r[4] == r[-1] == 4 and r[2] == 2 and r[3:] == [3, 4] and r[0:] == [2, 3, 4]
    with pytest.raises(IndexError):
        r[1]
    with pytest.raises(IndexError):
        r[5]


# -- the usual head in one go = the same head line by line ---------------------------------
_names = st.sampled_from(["Host", "Content-Length", "authorization", "Authorization", "X-A",
                          "Bad Name", " folded", "", "Ünï", "Expect"])
_values = st.one_of(st.sampled_from([f"Bearer {TOKEN}", "Bearer wrong", "12", " 5 ", "a\tb"]),
                    st.text(st.characters(min_codepoint=0, max_codepoint=255), max_size=12))


@settings(max_examples=400)
@given(st.lists(st.tuples(_names, st.sampled_from([":", ": ", " :", ""]), _values), max_size=8),
       st.sampled_from(["GET /health HTTP/1.1", "GET /x HTTP/1.0", "G T / HTTP/1.1", ""]))
def test_the_usual_head_in_one_go_reads_as_it_does_line_by_line(fields, request_line):
    block = (request_line + "\r\n" + "".join(f"{n}{c}{v}\r\n" for n, c, v in fields)
             + "\r\n").encode("latin-1")
    server = ChatServer(replay="ok", token=TOKEN)

    def outcome(read):
        try:
            return read(block)
        except Refusal as refusal:
            return refusal.status

    quick = outcome(server.http._usual_head)
    if quick is not None:
        assert quick == outcome(server.http._head_by_lines)
