"""The OpenAI Responses API over a persistent WebSocket: OpenAI, Azure OpenAI, xAI, and
`steer serve` (the `local` default).

Why a WebSocket: the connection is opened when the app starts (warm()), so a request pays no
TCP/TLS/HTTP handshake, and a follow-up sends only what is new: when the model and the
instructions are unchanged and the new input strictly extends the last completed request
plus the model's answer, `response.create` carries just the new items and
`previous_response_id`; otherwise the full context. What the server keeps is the provider's
(the conversation), not a socket's: the request after an Esc, which closes the busy socket,
continues on the spare from the last completed response (the cut answer and the new message
are the new items), and `previous_response_not_found` resends in full. The server's events
(`response.created`, `response.output_text.delta`, `response.completed` / `.incomplete` /
`.failed`, `error`) arrive as JSON text frames, the same objects as over SSE.

What lives where: responses_wire.py has the JSON shapes and builds each request's fields;
responses_answer.py reads one response's events and words its errors; ws_pool.py keeps the
sockets; this module is the session (connecting, retrying, steering, look-up rounds, and
the HTTP fallback).

- One response in flight per socket; a spare socket is kept open, so the request after an
  Esc or a refused steer (which close the busy one) never waits for a handshake.
- A socket is retired before the server's 60-minute limit; `websocket_connection_limit_reached`
  opens a new one and resends in full, `previous_response_not_found` resends in full.
- Steering: `response.steer` on the socket of the running answer; the server cuts the
  answer at a token boundary (`response.incomplete`, reason `steered`) and its successor
  streams on the same socket. A refusal raises SteerRefused and the session resends.
- Cancelling closes the socket: the server stops generating; the partial answer stays.
- When the upgrade is refused (426, 404, 405, 501, or a plain HTTP answer) every request
  goes over HTTP SSE to POST /responses instead.
- Look-ups (Request.tools) go as function tools: each `function_call` item is a LookupCall once
  the response completes; the next round continues that response (its calls are what the
  server kept: `Kept.calls`) with their `function_call_output`s.
- The API key is sent on the upgrade request only (and on SSE requests), never logged:
  websockets' logger is held above DEBUG, and server text is redacted before it is shown.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from ssl import SSLContext
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import (
    ConnectionClosed,
    InvalidHandshake,
    InvalidStatus,
    WebSocketException,
)

from app.core.events import Connected, Done, Error, Event, LookupCall, TextDelta, ToolRound
from app.core.provider import STALL_TIMEOUT, Capabilities, Provider, Request, SteerRefused
from app.core.text import masking
from app.providers import http_stream
from app.providers.responses_answer import (
    Answer,
    Server,
    closed_error,
    outcome,
    read_event,
    upgrade_error,
)
from app.providers.responses_wire import (
    Kept,
    call_item,
    create_frame,
    message,
    request_fields,
    wire_status,
    ws_url,
)
from app.providers.ws_pool import Closed, Socket, SocketPool

_log = logging.getLogger("steer.responses.ws")
_log.setLevel(logging.WARNING)  # websockets logs the upgrade's headers (the key) at DEBUG

STEER_TIMEOUT = 3.0  # seconds a steer waits for the server's answer before cancel and resend
REFUSED_UPGRADE = {200, 404, 405, 426, 501}  # the endpoint exists but speaks no WebSocket


class OpenAIResponses(Provider):
    name = "openai-responses"
    # no `seed`: OpenAI's Responses API takes none (response.create has temperature and
    # top_p, not seed); steer serve's extension takes it (ServedLocal)
    capabilities = Capabilities(warm_up=True, native_steer=True, cancel="close",
                                continue_from=True, tools=True, parallel=True)

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *,
                 connect_timeout: float = http_stream.CONNECT_TIMEOUT,
                 stall_timeout: float = STALL_TIMEOUT, retries: int = http_stream.RETRIES,
                 capabilities: Capabilities | None = None, ssl: SSLContext | None = None,
                 transport: str = "websocket", steer_timeout: float = STEER_TIMEOUT) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._key = api_key  # never logged, never part of a message
        masking.remember(api_key)  # masked in whatever steer shows or saves
        self.connect_timeout = connect_timeout
        self.stall_timeout = stall_timeout
        self.retries = retries
        self.steer_timeout = steer_timeout
        if capabilities is not None:
            self.capabilities = capabilities
        self._ssl = ssl  # an ssl.SSLContext to trust (a self-signed server); None: the system's
        self.use_sse = transport == "sse"
        self.pool = SocketPool(self._dial)
        self.kept: Kept | None = None  # the last completed response: a follow-up continues it
        self._streaming: Socket | None = None
        self._http: httpx.AsyncClient | None = None
        self._calls: list[dict] = []  # function calls of the response streaming now

    # -- the sockets -----------------------------------------------------------------------
    async def warm(self) -> None:
        """Open the socket now, so the first request pays no handshake."""
        if self.use_sse or self.pool.idle:
            return
        try:
            self.pool.idle.append(await self.pool.open())
        except (OSError, WebSocketException):  # the request reports it, with what to do
            pass

    async def _endpoint(self) -> tuple[str, str | None]:
        """(base URL, key): subclasses find theirs late (a server started on demand)."""
        return self.base_url, self._key

    async def _dial(self) -> ClientConnection:
        base, key = await self._endpoint()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        url = ws_url(base)
        kw: dict = {}
        if url.startswith("wss://") and self._ssl is not None:
            kw["ssl"] = self._ssl
        return await connect(url, additional_headers=headers, open_timeout=self.connect_timeout,
                             compression=None, max_size=64 * 2**20, logger=_log, proxy=None, **kw)

    async def aclose(self) -> None:
        if self._streaming is not None:
            self.pool.discard(self._streaming)
        await self.pool.aclose()
        if self._http is not None:
            await self._http.aclose()

    def continue_from(self, response_id: str, messages: list[dict[str, str]], answer: str) -> None:
        fields, items = self._fields(Request(messages))
        self.kept = Kept(response_id, fields, items, answer)

    # -- a request -------------------------------------------------------------------------
    def _redact(self, text: str) -> str:
        return http_stream.redact(text, self._key)

    def _where(self) -> str:
        return ws_url(self.base_url)

    def _fields(self, req: Request) -> tuple[dict, list[dict]]:
        return request_fields(req, self.model, self.capabilities, self.seed)

    def _server(self) -> Server:
        return Server(ws_url(self.base_url), self.key_env, self._redact)

    def stream(self, req: Request) -> AsyncIterator[Event]:
        if req.tools and self.capabilities.tools:
            return self._rounds(req)
        return self._stream(req)

    async def _rounds(self, req: Request) -> AsyncIterator[Event]:
        """The answer with look-ups: a response per round until the model answers in text."""
        extra: list[dict] = []
        rounds = said = 0
        while True:
            held: Done | None = None
            sub = replace(req, messages=[*req.messages, *extra],
                          tool_choice="auto" if rounds < req.tool_rounds else "none")
            async for ev in self._stream(sub):
                if type(ev) is TextDelta:
                    said += len(ev.text)
                elif type(ev) is Done and self._calls and ev.finish_reason == "stop":
                    held = ev
                    continue
                yield ev
            if held is None:
                return
            calls = [call_item(c) for c in self._calls]
            if rounds > req.tool_rounds:  # it calls on after "none": end it, as it ended
                yield Error("model", f"the model kept calling look-ups after {rounds} rounds")
                yield held
                return
            futures = [asyncio.get_running_loop().create_future() for _ in calls]
            for c, fut in zip(calls, futures, strict=True):
                yield LookupCall(str(c["call_id"] or ""), str(c["name"] or ""), c["arguments"], fut)
            results = [await f for f in futures]  # cancelled with the answer (Esc)
            items = [*calls, *({"type": "function_call_output", "call_id": c["call_id"],
                                "output": r} for c, r in zip(calls, results, strict=True))]
            extra += items
            rounds += 1
            yield ToolRound(items, said)

    async def _stream(self, req: Request) -> AsyncIterator[Event]:
        fields, items = self._fields(req)
        self._calls = []
        # the stall timeout counts from the request: starting a server, connecting and the
        # model's first token share it, so nothing waits longer than that for a first sign
        first_by = asyncio.get_running_loop().time() + self.stall_timeout
        if self.use_sse:
            async for ev in self._stream_sse(fields, items):
                yield ev
            return
        attempt = 0
        full = False  # resend everything (the server lost the previous response)
        while True:
            try:
                async with asyncio.timeout_at(first_by):
                    sock = await self.pool.take()
            except InvalidStatus as exc:
                status = exc.response.status_code
                if status in REFUSED_UPGRADE:
                    self.use_sse = True
                    async for ev in self._stream_sse(fields, items):
                        yield ev
                    return
                asked = http_stream.server_wait(exc.response.headers)
                wait = http_stream.delay(asked, attempt)
                err = upgrade_error(self._server(), exc, asked, attempt + 1)
                if err.retryable and attempt < self.retries and wait is not None:
                    attempt += 1
                    yield http_stream.announce(attempt, self.retries, wait, f"HTTP {status}")
                    await http_stream.wait_out(wait)
                    continue
                yield Connected()
                yield err
                yield Done("error")
                return
            except InvalidHandshake:  # a plain HTTP server on that path
                self.use_sse = True
                async for ev in self._stream_sse(fields, items):
                    yield ev
                return
            except (OSError, TimeoutError) as exc:
                if asyncio.get_running_loop().time() >= first_by:
                    yield Error("stall", f"{self._where()} did not answer within "
                                f"{self.stall_timeout:g} s of the request", retryable=True)
                    yield Done("error")
                    return
                if attempt < self.retries and not getattr(exc, "final", False):
                    wait = http_stream.backoff(attempt)
                    attempt += 1
                    yield http_stream.announce(attempt, self.retries, wait, http_stream.connect_reason(exc))
                    await http_stream.wait_out(wait)
                    continue
                if getattr(exc, "final", False):  # the subclass said what happened, and what to do
                    err = Error("network", self._redact(f"cannot connect to {self._where()}: "
                                                        f"{http_stream.reason(exc)}"), retryable=True)
                else:
                    err = http_stream.connect_error(self._where(), exc, attempt + 1)
                    err.message = self._redact(err.message)
                yield err
                yield Done("error")
                return
            self.pool.keep_spare()
            if full:
                self.kept = None
            frame = create_frame(fields, items, self.kept)
            ans = Answer()
            self._streaming = sock
            sock.active_id, sock.active_fields, sock.active_input = None, fields, items
            sock.active_text = [req.prefill] if req.prefill and self.capabilities.prefill else []
            finished = False
            try:
                async with sock.reading:
                    try:
                        await sock.ws.send(json.dumps(frame))
                    except ConnectionClosed:
                        pass  # the reader reports the close below
                    async for ev in self._consume(sock, ans, first_by):
                        yield ev
                finished = True
            finally:
                if not finished:  # cancelled or abandoned: stop the generation upstream
                    self.pool.discard(sock)
                    self._streaming = None
            if ans.error is not None and ans.wire_error is None:
                ans.error = await self._diagnose(ans.error)
            again = self._retry(sock, ans, attempt)
            if again is not None:
                wait, resend_full, why = again
                full = full or resend_full
                attempt += 1
                if why:  # a failure sent again (a protocol resend is not announced)
                    yield http_stream.announce(attempt, self.retries, wait, why)
                if wait:
                    await http_stream.wait_out(wait)
                continue
            for ev in self._finish(sock, ans, fields, items, attempt + 1):
                yield ev
            return

    async def _consume(self, sock: Socket, ans: Answer,
                       first_by: float | None = None) -> AsyncIterator[Event]:
        """Events of the response on the socket, up to its terminal event. `first_by`: the
        loop time by which a first frame must come (then the stall timeout runs per frame)."""
        frames = sock.frames
        loop = asyncio.get_running_loop()
        while True:
            try:
                obj = frames.get_nowait()
            except asyncio.QueueEmpty:
                by = first_by if first_by is not None else loop.time() + self.stall_timeout
                try:  # (not wait_for: on 3.11 it can swallow a cancel that races a frame)
                    async with asyncio.timeout_at(by):
                        obj = await frames.get()
                except TimeoutError:
                    ans.error = http_stream.stall_error(ws_url(self.base_url), self.stall_timeout)
                    self.pool.discard(sock)
                    return
            first_by = None
            if type(obj) is dict:
                kind = obj["type"]
                if kind == "response.output_text.delta" or kind == "response.refusal.delta":
                    d = obj.get("delta")
                    if d:  # the hot path, kept inline
                        ans.text.append(d)
                        sock.active_text.append(d)
                        yield TextDelta(d)
                    continue
                events, done = self._on_event(obj, ans)
                if kind == "response.created":
                    sock.active_id = ans.rid
                for ev in events:
                    yield ev
                if done:
                    return
            elif type(obj) is Closed:
                ans.error = closed_error(self._server(), obj, ans)
                return
            else:
                ans.error = Error("protocol", self._redact(
                    f"the server sent a malformed frame: {obj.raw[:120]!r}"))
                self.pool.discard(sock)
                return

    def _on_event(self, obj: dict, ans: Answer) -> tuple[list[Event], bool]:
        """A server event as provider events, and whether it ends the response; a look-up's
        function call is kept for `_rounds` to answer."""
        return read_event(obj, ans, self._calls, self._redact)

    async def _diagnose(self, err: Error) -> Error:
        """What a failed stream's error really was, for a subclass that can find out (the
        local server died: app/providers/local_serve.py). Here: the error as it came."""
        return err

    def _retry(self, sock: Socket, ans: Answer, attempt: int) -> tuple[float, bool, str] | None:
        """(seconds to wait, resend in full, the failure to announce: "" for a resend the
        protocol asks for) when the request may be sent again: only while nothing of the
        answer was shown, so no token is lost or duplicated."""
        if ans.text:
            return None
        err = ans.wire_error
        if err is not None:
            code = str((err.get("error") or {}).get("code") or "")
            if code == "previous_response_not_found":
                self.kept = None
                self.pool.release(sock)
                return 0.0, True, ""
            if code == "websocket_connection_limit_reached":
                self.pool.discard(sock)
                return 0.0, True, ""
            status = wire_status(err)
            wait = http_stream.delay(http_stream.server_wait((err.get("error") or {}).get("headers")), attempt)
            if attempt < self.retries and wait is not None and status is not None \
                    and (status == 429 or status >= 500):
                self.pool.release(sock)
                return wait, False, f"HTTP {status}"
            return None
        if ans.error is not None and ans.error.kind == "network" and not ans.connected \
                and attempt < self.retries:
            return 0.0, True, "the socket closed"  # before the request got an answer
        return None

    def _finish(self, sock: Socket, ans: Answer, fields: dict, items: list[dict],
                attempts: int = 1) -> list[Event]:
        self._streaming = None
        steer_pending = sock.steer_wait is not None and not sock.steer_wait.done()
        if ans.finish in ("stop", "length") and ans.rid:  # kept whole by the server
            self.kept = Kept(ans.rid, fields, items, "".join(sock.active_text),
                             [call_item(c) for c in self._calls])
        if ans.finish != "steered" and not steer_pending:
            self.pool.release(sock)  # a steered socket goes on with the successor
        return outcome(self._server(), ans, attempts)

    # -- steering --------------------------------------------------------------------------
    async def steer(self, req: Request) -> AsyncIterator[Event]:
        """Send the request's last message to the running answer as `response.steer`. Returns
        the successor's events once the server accepted; raises SteerRefused otherwise."""
        sock = self._streaming
        if self.use_sse or sock is None or sock.active_id is None or not sock.usable():
            raise SteerRefused("no answer is streaming on a WebSocket")
        items = [message("user", req.messages[-1]["content"])]
        wait = sock.steer_wait = asyncio.get_running_loop().create_future()
        try:
            await sock.ws.send(json.dumps({"type": "response.steer",
                                           "previous_response_id": sock.active_id,
                                           "input": items}))
            async with asyncio.timeout(self.steer_timeout):
                ack = await wait
        except (TimeoutError, ConnectionClosed) as exc:
            raise SteerRefused(f"the steer got no answer ({http_stream.reason(exc)})") from None
        finally:
            sock.steer_wait = None
        if ack.get("type") != "response.steer.accepted":
            if self._streaming is not sock:  # the answer ended meanwhile: the socket is free
                self.pool.release(sock)
            e = ack.get("error") or {}
            raise SteerRefused(self._redact(str(e.get("message") or e.get("code") or ack)))
        return self._successor(sock, items)

    async def _successor(self, sock: Socket, items: list[dict]) -> AsyncIterator[Event]:
        ans = Answer()
        fields = sock.active_fields or {}
        # the conversation the successor continues: the steered request, its answer as the
        # server kept it (everything streamed before the cut), then the steering input
        steered_input = [*(sock.active_input or []),
                         message("assistant", "".join(sock.active_text)), *items]
        finished = False
        try:
            async with sock.reading:  # the steered answer has read its last frame
                self._streaming, self._calls = sock, []
                sock.active_id, sock.active_input = None, steered_input
                prefill = fields.get("prefill", "")
                sock.active_text = [prefill] if prefill else []
                async for ev in self._consume(sock, ans):
                    yield ev
            finished = True
        finally:
            if not finished:
                self.pool.discard(sock)
                self._streaming = None
        for ev in self._finish(sock, ans, fields, steered_input):
            yield ev

    # -- the HTTP fallback -----------------------------------------------------------------
    async def _stream_sse(self, fields: dict[str, Any], items: list[dict[str, Any]]
                          ) -> AsyncIterator[Event]:
        base, key = await self._endpoint()
        if self._http is None:
            verify: SSLContext | bool = self._ssl if self._ssl is not None else True
            self._http = httpx.AsyncClient(
                timeout=httpx.Timeout(connect=self.connect_timeout, read=self.stall_timeout,
                                      write=30.0, pool=30.0), verify=verify)
        url = f"{base}/responses"
        to = http_stream.Endpoint(self._http, url, url, key, self.key_env, self.retries,
                                  self.stall_timeout)
        body = {**fields, "input": items, "stream": True}
        async for ev in http_stream.stream(to, lambda: body, lambda: _SSEAnswer(self)):
            yield ev


class _SSEAnswer:
    """One response over the SSE fallback, event by event (http_stream.Reader)."""

    def __init__(self, provider: OpenAIResponses) -> None:
        self.provider = provider
        self.ans = Answer(connected=True)

    def feed(self, data: str) -> tuple[list[Event], bool]:
        try:
            obj = json.loads(data)
            obj["type"]
        except (ValueError, KeyError, TypeError):
            self.ans.error = Error("protocol", self.provider._redact(
                f"the server sent a malformed event: {data[:120]!r}"))
            return [], True
        events, done = self.provider._on_event(obj, self.ans)
        return [ev for ev in events if type(ev) is not Connected], done

    def end(self, attempts: int) -> list[Event]:
        return outcome(self.provider._server(), self.ans, attempts)
