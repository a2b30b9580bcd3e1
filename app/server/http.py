"""A small HTTP/1.1 server on asyncio streams: keep-alive, Content-Length bodies, chunked
streaming responses. Just what an OpenAI-compatible endpoint on 127.0.0.1 needs, with full
control over pacing and faults (for benchmarks and fault-injection tests), and no web
framework to install or start."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

MAX_BODY = 64 * 1024 * 1024


@dataclass
class HttpRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    head: bytes = b""  # the raw request head (a WebSocket upgrade hands it to its protocol)

    def json(self) -> dict:
        return json.loads(self.body or b"{}")


@dataclass
class HttpResponse:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    stream: AsyncIterator[bytes] | None = None  # chunked body, one write per item
    close: bool = False  # drop the connection after the stream (fault injection)

    @classmethod
    def json(cls, obj: object, status: int = 200, **headers: str) -> HttpResponse:
        return cls(status, {"Content-Type": "application/json", **headers}, json.dumps(obj).encode())


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]
# a WebSocket upgrade: the handler owns the connection; it returns None once it took it over,
# or a response to refuse the upgrade with
Upgrade = Callable[[HttpRequest, asyncio.StreamReader, asyncio.StreamWriter],
                   Awaitable[HttpResponse | None]]
REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
           426: "Upgrade Required", 429: "Too Many Requests", 500: "Internal Server Error",
           502: "Bad Gateway", 503: "Service Unavailable"}


class HttpServer:
    def __init__(self, handler: Handler, host: str = "127.0.0.1", port: int = 0, *,
                 upgrade: Upgrade | None = None, ssl: object | None = None) -> None:
        self.handler = handler
        self.upgrade = upgrade
        self.host = host
        self.port = port
        self.ssl = ssl  # an ssl.SSLContext: https and wss on the same port
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, self.host, self.port,
                                                  ssl=self.ssl)  # type: ignore[arg-type]
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        """Stop listening and end open connections (a stalled stream among them)."""
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            if self._connections:
                await asyncio.wait(list(self._connections), timeout=2.0)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)
        try:
            while True:
                req = await _read_request(reader)
                if req is None:
                    return
                if self.upgrade is not None and req.headers.get("upgrade", "").lower() == "websocket":
                    refused = await self.upgrade(req, reader, writer)
                    if refused is None:
                        return  # the WebSocket ran on this connection and is over
                    await _write_response(writer, refused)
                    return
                resp = await self.handler(req)
                keep = await _write_response(writer, resp)
                if not keep or req.headers.get("connection", "").lower() == "close":
                    return
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            return  # the client went away or spoke nonsense: nothing to answer
        except asyncio.CancelledError:
            return  # the server is closing: end this connection quietly
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


def parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    """(method, path, headers with lower-cased names) of a request's head."""
    lines = head.decode("latin-1").split("\r\n")
    method, path, _version = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return method, path, headers


async def _read_request(reader: asyncio.StreamReader) -> HttpRequest | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    method, path, headers = parse_head(head)
    n = int(headers.get("content-length", "0"))
    if n > MAX_BODY:
        raise ValueError("request body too large")
    body = await reader.readexactly(n) if n else b""
    return HttpRequest(method, path, headers, body, head)


async def _write_response(writer: asyncio.StreamWriter, resp: HttpResponse) -> bool:
    reason = REASONS.get(resp.status, "Status")
    head = [f"HTTP/1.1 {resp.status} {reason}"]
    headers = dict(resp.headers)
    if resp.stream is None:
        headers["Content-Length"] = str(len(resp.body))
    else:
        headers["Transfer-Encoding"] = "chunked"
    head += [f"{k}: {v}" for k, v in headers.items()]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
    if resp.stream is None:
        writer.write(resp.body)
        await writer.drain()
        return not resp.close
    try:
        async for piece in resp.stream:
            if piece:
                writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                await writer.drain()
            if writer.is_closing():
                return False
        if resp.close:
            return False  # fault injection: drop without the terminating chunk
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True
    finally:
        aclose = getattr(resp.stream, "aclose", None)
        if aclose is not None:
            await aclose()  # stops the generator (and the model) when the client went away
