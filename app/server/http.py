"""A small HTTP/1.1 server on asyncio streams: keep-alive, Content-Length bodies, chunked
streaming responses, with limits. Just what an OpenAI-compatible endpoint on 127.0.0.1 needs.

Why hand-written rather than aiohttp (installed with textual-serve): full control over what
goes on the wire and when, which the benchmarks and fault-injection tests are made of (a
batch of SSE events or WebSocket frames in one write per paced tick; a stream dropped
without its last chunk; a frame that bypasses the framing), and two limits aiohttp 3.14
cannot give. Measured on this 2-core VM (the same replay served by each in its own
process, httpx and websockets as clients, three rounds, medians): SSE 200,000 tokens unthrottled
2.4-4.3M tokens/s here vs 3.1-4.4M with aiohttp (the client is the bottleneck; a tie);
keep-alive request 0.39-0.50 ms vs 0.43-0.59 ms; WebSocket 200,000 tokens 274-347k
tokens/s vs 139-168k (aiohttp writes frame by frame: 1.7-2x slower), one-token round trip
0.067-0.082 ms vs 0.082-0.103 ms. And aiohttp parses a request's whole head (up to 128
lines of 8,190 bytes) before any handler can look at the token, and has no header timeout:
a client sending one header line a second was still held after 20 s.

The limits (`Limits`; every refusal answers with a status and closes the connection):
- the token first: with `authorize`, a request whose Authorization header is not among the
  first `auth_window` bytes of its head, or is wrong, gets 401 there, before the rest of its
  head or any body is read (the WebSocket upgrade and /health too); what is read before is
  never stored beyond the small record of refusals;
- size: a request line over `line` bytes gets 414, a header line over `line` or a head over
  `head` bytes 431, a body over `body` bytes 413 (refused from its Content-Length, unread);
- framing: a bad request line, a Content-Length that is not a decimal number of at most 18
  digits (or two that differ), Content-Length with Transfer-Encoding, an obsolete line
  folding or a header line without a name get 400; a chunked request body 411 (send its
  Content-Length), another transfer coding 501, an HTTP version other than 1.x 505;
- time: a head must arrive within `header_timeout` of its first byte (of the connection,
  for the first request), a body within `body_timeout` (else 408; head lines end with
  CRLF); a keep-alive connection
  waiting `idle_timeout` for its next request is closed (an upgraded WebSocket is not: it is
  the persistent connection steer keeps); TLS handshakes get `header_timeout` as well;
- concurrency: at most `unauthenticated` connections at once that have not yet shown the
  token (or, without a token, finished their first head); more get 503 at once;
- after a refusal the server stops reading, half-closes and drops what the client still
  sends for at most `linger` seconds, so that a client busy sending its body reads the
  answer rather than a connection reset.

What the limits cost: reading and checking a usual head takes ~13 us instead of ~5 us, and
a stream buffers `line` (8 kB) rather than asyncio's 64 kB before it stops reading the
socket (a 4 MB upload: ~1-2 ms more); `steer bench transport` is unchanged within its noise
(medians of 20 interleaved runs, before -> after: persistent WebSocket request 0.251 ->
0.256 ms, new HTTPS connection request 2.59 -> 2.51 ms, native steer added 1.65 -> 1.64 ms).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class Limits:
    line: int = 8 * 1024  # the request line, and each header line
    auth_window: int = 8 * 1024  # head bytes read before the Authorization header must be seen
    head: int = 32 * 1024  # the whole head of an authorized request
    body: int = 16 * 1024 * 1024  # a request body (the WebSocket's own message cap is the same)
    header_timeout: float = 5.0
    body_timeout: float = 30.0
    idle_timeout: float = 30.0
    unauthenticated: int = 64  # connections at once that have not shown the token yet
    linger: float = 1.0



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
# the value of a request's Authorization header (None: it has none) -> whether it may go on;
# authorize(None) is True when the server needs no token
Authorize = Callable[[str | None], bool]


class Record(Protocol):
    """Where refusals are noted (app/server/generation.py's Recent: the last few only)."""

    def append(self, item: dict, /) -> None: ...
REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
           408: "Request Timeout", 411: "Length Required", 413: "Content Too Large",
           414: "URI Too Long", 426: "Upgrade Required", 429: "Too Many Requests",
           431: "Request Header Fields Too Large", 500: "Internal Server Error",
           501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable",
           505: "HTTP Version Not Supported"}
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VERSION = re.compile(rb"HTTP/(\d)\.(\d)")
_LENGTH = re.compile(r"[0-9]{1,18}")  # beyond 18 digits it is no length this server could mean
_BAD_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_BAD_TARGET = re.compile(rb"[\x00-\x20\x7f]")
# the header lines of a head, blank line included: names are tokens, values hold no controls
_FIELDS = re.compile(rb"(?:" + _TOKEN.pattern + rb":[^\x00-\x08\x0a-\x1f\x7f]*\r\n)*\r\n")


class Refusal(Exception):
    """A request answered with `status` and the connection closed."""

    def __init__(self, status: int, message: str, *, linger: bool = True,
                 seen: dict | None = None, answer: HttpResponse | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.linger = status, message, linger
        self.seen = seen or {}  # what was read of the request before the refusal
        self.answer = answer  # the response to send (else a JSON error with the message)

    def response(self) -> HttpResponse:
        if self.answer is not None:
            return self.answer
        return HttpResponse.json({"error": {"message": self.message,
                                            "type": "invalid_request_error"}}, self.status)


class HttpServer:
    def __init__(self, handler: Handler, host: str = "127.0.0.1", port: int = 0, *,
                 upgrade: Upgrade | None = None, ssl: object | None = None,
                 authorize: Authorize | None = None,
                 unauthorized: Callable[[], HttpResponse] | None = None,
                 limits: Limits | None = None, refused: Record | None = None) -> None:
        self.handler = handler
        self.upgrade = upgrade
        self.host = host
        self.port = port
        self.ssl = ssl  # an ssl.SSLContext: https and wss on the same port
        self.authorize = authorize
        self.unauthorized = unauthorized  # the 401 answer (else a plain one)
        self.limits = limits or Limits()
        self.refused = refused  # a dict per refusal: status, and method, path, headers as read
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task] = set()
        self._unauthenticated = 0

    async def start(self) -> int:
        self._server = await asyncio.start_server(
            self._serve, self.host, self.port, ssl=self.ssl,
            limit=self.limits.line,  # what a stream buffers before it stops reading the socket
            ssl_handshake_timeout=self.limits.header_timeout if self.ssl is not None else None)
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
            with contextlib.suppress(Exception):  # closing: a slow or broken peer is let go
                await asyncio.wait_for(self._server.wait_closed(), 1.0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)
        pending = True  # not yet past the token: counted against `unauthenticated`
        self._unauthenticated += 1
        try:
            if self._unauthenticated > self.limits.unauthenticated:
                await self._refuse(reader, writer, Refusal(
                    503, "too many connections have not shown the token yet; retry shortly"))
                return
            first = True
            while True:
                try:
                    req = await self._read_request(reader, writer, first)
                except Refusal as refusal:
                    await self._refuse(reader, writer, refusal)
                    return
                if req is None:
                    return
                first = False
                if pending:
                    pending = False
                    self._unauthenticated -= 1
                if self.upgrade is not None and req.headers.get("upgrade", "").lower() == "websocket":
                    refused = await self.upgrade(req, reader, writer)
                    if refused is None:
                        return  # the WebSocket ran on this connection and is over
                    await _write_response(writer, refused)
                    return
                resp = await self.handler(req)
                keep = await _write_response(writer, resp)
                if not keep or not _keep_alive(req):
                    return
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            return  # the client went away or spoke nonsense: nothing to answer
        except asyncio.CancelledError:
            return  # the server is closing: end this connection quietly
        finally:
            if pending:
                self._unauthenticated -= 1
            writer.close()
            with contextlib.suppress(Exception):  # the peer may be gone already: nothing to do
                await writer.wait_closed()

    async def _read_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            first: bool) -> HttpRequest | None:
        """The next request, or None when the client closed (or a kept-alive connection
        idled out) before it began; raises Refusal for a request to answer with an error."""
        lim = self.limits
        loop = asyncio.get_running_loop()
        prefix = b""
        phase = "idle"
        try:  # one timer per request, moved on at each phase: a new connection has
            # header_timeout for its whole head, a kept-alive one idle_timeout for the next
            # request to begin, then header_timeout for its head; a body body_timeout
            async with asyncio.timeout(lim.header_timeout if first else lim.idle_timeout) as timer:
                if not first:
                    prefix = await reader.readexactly(1)
                    timer.reschedule(loop.time() + lim.header_timeout)
                phase = "head"
                method, path, version, headers, head = await self._read_head(reader, prefix)
                seen = {"method": method, "path": path, "headers": headers}
                n = _body_length(headers, lim.body, seen)
                body = b""
                if n:
                    phase = "body"
                    if headers.get("expect", "").lower() == "100-continue":
                        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                    timer.reschedule(loop.time() + lim.body_timeout)
                    body = await reader.readexactly(n)
        except TimeoutError:
            if phase == "idle":
                return None
            took = lim.header_timeout if phase == "head" else lim.body_timeout
            raise Refusal(408, f"the request {phase} did not arrive within {took:g} s",
                          linger=False) from None
        except asyncio.IncompleteReadError:
            if phase == "idle":
                return None
            raise
        if version == "HTTP/1.0" and headers.get("connection", "").lower() != "keep-alive":
            headers.setdefault("connection", "close")
        return HttpRequest(method, path, headers, body, head)

    async def _read_head(self, reader: asyncio.StreamReader, prefix: bytes
                         ) -> tuple[str, str, str, dict[str, str], bytes]:
        """(method, path, version, headers, the raw head) of the next request. A head within
        the reader's limit (`line` bytes, no more than `auth_window`: every real client's)
        is read in one piece, a longer one line by line, checked as each line arrives."""
        try:
            block: bytes | None = prefix + await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:  # nothing was taken from the reader: go line by line
            block = None
        if block is not None:
            return self._usual_head(block) or self._head_by_lines(block)
        head = _Head(self)
        lines = []
        line = await _line(reader, prefix)
        while not head.take(line):
            if head.request is not None and line is not None:  # take() refuses a None line
                lines.append(line)
            line = await _line(reader)
        return head.end(b"\r\n".join(lines) + b"\r\n\r\n")

    def _head_by_lines(self, block: bytes) -> tuple[str, str, str, dict[str, str], bytes]:
        """A whole head (blank line included) taken line by line."""
        head = _Head(self)
        lines = block.split(b"\r\n")
        del lines[-2:]  # the blank line's two empty pieces
        for line in lines:
            head.take(line)
        if head.request is None:  # only empty lines
            raise Refusal(400, "malformed request line")
        return head.end(block.lstrip(b"\r\n"))

    def _usual_head(self, block: bytes) -> tuple[str, str, str, dict[str, str], bytes] | None:
        """A small, well-formed head in one go (a regex checks every header line at once):
        the same result as taking it line by line, at a fraction of the cost; None leaves
        anything unusual to the line-by-line path, which names the fault."""
        lim = self.limits
        eol = block.find(b"\r\n")
        if len(block) > min(lim.auth_window, lim.line, lim.head) or eol <= 0 \
                or not _FIELDS.fullmatch(block, eol + 2):
            return None
        method, path, version = _request_line(block[:eol])
        headers: dict[str, str] = {}
        for line in block[eol + 2:-4].decode("latin-1").split("\r\n") if eol + 4 < len(block) else ():
            name, _, value = line.partition(":")
            name = name.lower()
            value = value.strip(" \t")
            if name in headers:
                if name == "authorization":
                    return None
                headers[name] = f"{headers[name]}, {value}"
            else:
                headers[name] = value
        if self.authorize is not None and not self.authorize(headers.get("authorization")):
            seen = {"method": method, "path": path, "headers": headers}
            raise self._unauthorized(seen, "wrong token" if "authorization" in headers
                                     else "no token")
        return method, path, version, headers, block

    def _unauthorized(self, seen: dict, why: str) -> Refusal:
        return Refusal(401, f"missing or wrong token ({why})", seen=seen,
                       answer=self.unauthorized() if self.unauthorized is not None else None)

    async def _refuse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      refusal: Refusal) -> None:
        """Answer, then stop: half-close and drop what the client still sends (at most
        `linger` seconds) so that it reads the answer, not a reset."""
        if self.refused is not None:
            self.refused.append({"status": refusal.status, **refusal.seen})
        resp = refusal.response()
        resp.headers["Connection"] = "close"
        if refusal.status == 503:
            resp.headers["Retry-After"] = "1"
        with contextlib.suppress(OSError, RuntimeError):
            await _write_response(writer, resp)
            if not refusal.linger:
                return
            if writer.can_write_eof():
                writer.write_eof()
            with contextlib.suppress(TimeoutError, OSError, asyncio.LimitOverrunError):
                async with asyncio.timeout(self.limits.linger):
                    while await reader.read(65536):
                        pass


async def _line(reader: asyncio.StreamReader, prefix: bytes = b"") -> bytes | None:
    """One line without its CRLF, or None for a line longer than the reader's limit (the
    connection is refused then, so what is left of it is never read)."""
    try:
        return (prefix + await reader.readuntil(b"\r\n"))[:-2]
    except asyncio.LimitOverrunError:
        return None


class _Head:
    """A request head checked line by line, in order: the request line, then each header
    line; the token is checked the moment its line arrives, and must have arrived within the
    first `auth_window` bytes. Raises Refusal."""

    __slots__ = ("server", "lim", "authorized", "size", "request", "headers", "seen")

    def __init__(self, server: HttpServer) -> None:
        self.server = server
        self.lim = server.limits
        self.authorized = server.authorize is None or server.authorize(None)
        self.size = 0
        self.request: tuple[str, str, str] | None = None
        self.headers: dict[str, str] = {}
        self.seen: dict = {}

    def take(self, line: bytes | None) -> bool:
        """Take one line (without its CRLF; None: longer than the limit); True once the
        blank line that ends the head was taken."""
        lim = self.lim
        if self.request is None:
            if line == b"" and self.size < 8:  # an empty line or two before a request line
                self.size += 2
                return False
            if line is None or len(line) > lim.line:
                raise Refusal(414, f"the request line is longer than {lim.line} bytes")
            self.request = _request_line(line)
            self.size = len(line) + 2
            self.seen = {"method": self.request[0], "path": self.request[1],
                         "headers": self.headers}
            return False
        if line is None or len(line) > lim.line:
            if not self.authorized:
                raise self.server._unauthorized(self.seen, f"no token in the first "
                                                f"{lim.auth_window} bytes")
            raise Refusal(431, f"a header line is longer than {lim.line} bytes", seen=self.seen)
        self.size += len(line) + 2
        if not self.authorized and self.size > lim.auth_window:
            raise self.server._unauthorized(self.seen, f"no token in the first "
                                            f"{lim.auth_window} bytes")
        if self.size > lim.head:
            raise Refusal(431, f"the request head is longer than {lim.head} bytes", seen=self.seen)
        if not line:
            return True
        name, value = _header(line, self.seen)
        headers = self.headers
        if name in headers:  # a repeated field is one list (RFC 9110 5.3)
            headers[name] = f"{headers[name]}, {value}"
        else:
            headers[name] = value
        if name == "authorization" and not self.authorized:
            if not self.server.authorize(value):  # type: ignore[misc]  # a callable attribute, not a method
                raise self.server._unauthorized(self.seen, "wrong token")
            self.authorized = True
        return False

    def end(self, raw: bytes) -> tuple[str, str, str, dict[str, str], bytes]:
        if not self.authorized:
            raise self.server._unauthorized(self.seen, "no token")
        assert self.request is not None
        return (*self.request, self.headers, raw)


def _request_line(line: bytes) -> tuple[str, str, str]:
    parts = line.split(b" ")
    if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]) or not parts[1] \
            or _BAD_TARGET.search(parts[1]):
        raise Refusal(400, "malformed request line")
    version = _VERSION.fullmatch(parts[2])
    if version is None:
        raise Refusal(400, "malformed request line")
    if version.group(1) != b"1":
        raise Refusal(505, "this server speaks HTTP/1.1")
    return parts[0].decode("latin-1"), parts[1].decode("latin-1"), parts[2].decode("latin-1")


def _header(line: bytes, seen: dict) -> tuple[str, str]:
    if line[:1] in (b" ", b"\t"):
        raise Refusal(400, "obsolete line folding in the request head", seen=seen)
    name, colon, value = line.partition(b":")
    value = value.strip(b" \t")
    if not colon or not _TOKEN.fullmatch(name) or _BAD_VALUE.search(value):
        raise Refusal(400, "malformed header line", seen=seen)
    return name.decode("latin-1").lower(), value.decode("latin-1")


def _body_length(headers: dict[str, str], cap: int, seen: dict) -> int:
    """The body's length from the head; refuses the framings this server does not take."""
    length = headers.get("content-length")
    coding = headers.get("transfer-encoding")
    if coding is not None:
        if length is not None:
            raise Refusal(400, "Content-Length together with Transfer-Encoding", seen=seen)
        if coding.strip().lower() == "chunked":
            raise Refusal(411, "chunked request bodies are not taken: send Content-Length",
                          seen=seen)
        raise Refusal(501, f"transfer coding {coding[:40]!r} is not supported", seen=seen)
    if length is None:
        return 0
    values = {v.strip() for v in length.split(",")}
    if len(values) != 1 or not _LENGTH.fullmatch(v := values.pop()):
        raise Refusal(400, "Content-Length is not a length", seen=seen)
    n = int(v)
    if n > cap:
        raise Refusal(413, f"the request body ({n} bytes) is larger than {cap} bytes", seen=seen)
    return n


def _keep_alive(req: HttpRequest) -> bool:
    return req.headers.get("connection", "").lower() != "close"


def parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    """(method, path, headers with lower-cased names) of a request's head, leniently (for
    tests' raw servers; the server itself reads a head under its limits, above)."""
    lines = head.decode("latin-1").split("\r\n")
    method, path, _version = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return method, path, headers


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

