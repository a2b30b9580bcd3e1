"""The Responses API as `steer serve` speaks it: over a persistent WebSocket, and over SSE.

The subset steer uses, with OpenAI's event shapes (app/providers/responses_wire.py):
- `response.create` (the create body without `stream`): created, in_progress, the message's
  added events, one `response.output_text.delta` per token, the done events, then
  `response.completed` (or `.incomplete` when cut by max_output_tokens or a steer);
- `previous_response_id`: the conversation continues from a kept response (the last
  `KEEP` of them, across connections), so a client sends only the new input; the model's KV
  cache already holds the shared prefix (llama.cpp reuses the longest common prefix);
  unknown ids get an `error` with code `previous_response_not_found`;
- `response.steer` {previous_response_id, input}: `response.steer.accepted`, then the active
  response ends at the next token as `response.incomplete` (reason `steered`) and its
  successor starts at once (`response.created`), continuing from the kept answer with the
  new input and the same settings; `response.steer.failed` when the response is not active;
- one response in flight per connection; a second `response.create` meanwhile is an error;
- the client closing or dropping the connection stops the generation at the next token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from app.providers.responses_wire import EventWriter, from_input, new_id, response_object
from app.server.generation import Backend, Faults, Generation, stall
from app.server.http import HttpRequest, HttpResponse
from app.server.ws import WsClosed, WsConnection

KEEP = 256  # responses kept for previous_response_id


class RequestError(ValueError):
    def __init__(self, code: str, message: str, param: str | None = None, status: int = 400):
        super().__init__(message)
        self.code, self.message, self.param, self.status = code, message, param, status


@dataclass
class Kept:
    messages: list[dict]  # the conversation the answer replied to (no instructions)
    answer: str  # prefill + generated text
    settings: dict


@dataclass
class Active:
    """The response now generating on a connection, and steering queued for it."""

    rid: str
    steers: list[list[dict]] = field(default_factory=list)
    done: bool = False
    cut: asyncio.Event = field(default_factory=asyncio.Event)  # set by an accepted steer


@dataclass
class Lane:
    active: Active | None = None


def _sse(frame: str) -> bytes:
    kind = frame[9:frame.index('"', 9)] if frame.startswith('{"type":"') else "message"
    return b"event: %s\ndata: %s\n\n" % (kind.encode(), frame.encode())


class ResponsesService:
    def __init__(self, server: Backend, *, websocket: bool = True, steering: bool = True) -> None:
        self.server = server
        self.websocket = websocket  # False: refuse the upgrade (426), as SSE-only servers do
        self.steering = steering  # False: response.steer fails with steering_not_supported
        self.kept: OrderedDict[str, Kept] = OrderedDict()
        self._upgrade_attempts = 0

    # -- WebSocket -------------------------------------------------------------------------
    async def upgrade(self, req: HttpRequest, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> HttpResponse | None:
        s = self.server
        s.last_activity = time.monotonic()
        if req.path.split("?")[0].rstrip("/") != "/v1/responses":
            return HttpResponse.json({"error": {"message": f"no WebSocket at {req.path}"}}, 404)
        s.stats.headers.append(dict(req.headers))  # (the HTTP server checked the token)
        if not self.websocket:
            return HttpResponse.json({"error": {
                "message": "WebSocket mode is not available here; POST /v1/responses streams SSE",
                "type": "invalid_request_error"}}, 426, Upgrade="websocket")
        self._upgrade_attempts += 1
        f = s.faults
        if f.status and (f.fail_first == 0 or self._upgrade_attempts <= f.fail_first):
            headers = {"Retry-After": f"{f.retry_after:g}"} if f.status == 429 else {}
            return HttpResponse.json({"error": {"message": "injected failure", "type": "server_error"}},
                                     f.status, **headers)
        try:
            conn = await WsConnection.accept(req.head, reader, writer)
        except Exception:  # noqa: BLE001 - a broken handshake: nothing to answer
            return None
        s.stats.upgrades += 1
        conn.record = s.stats.frames if s.record_frames else None
        await self._serve(conn)
        return None

    async def _serve(self, conn: WsConnection) -> None:
        s = self.server
        ew = EventWriter()
        lane = Lane()
        task: asyncio.Task | None = None
        created = 0
        try:
            while True:
                raw = await conn.recv()
                s.last_activity = time.monotonic()
                try:
                    ev = json.loads(raw)
                    kind = ev["type"]
                except (ValueError, KeyError, TypeError):
                    await conn.send(ew.error("invalid_json", "the event is not a JSON object with "
                                             "a type"))
                    continue
                if kind == "response.create":
                    if task is not None and not task.done():
                        await conn.send(ew.error(
                            "conversation_already_has_active_response", "a response is in progress "
                            "on this connection; send the next one when it ends"))
                        continue
                    created += 1
                    limit = s.faults.connection_limit
                    if limit is not None and created > limit:
                        await conn.send(ew.error(
                            "websocket_connection_limit_reached", "Responses websocket connection "
                            "limit reached. Create a new websocket connection to continue."))
                        await conn.close(1000, "connection limit reached")
                        return
                    task = asyncio.create_task(self._create(conn, ew, ev, lane))
                elif kind == "response.steer":
                    await conn.send(*self._steer(ew, ev, lane))
                else:
                    await conn.send(ew.error("invalid_value", f"unknown event type {kind!r}",
                                             param="type"))
        except WsClosed:
            pass
        finally:
            if task is not None and not task.done():
                task.cancel()  # the client went away: stop generating now
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            conn.abort()

    async def _create(self, conn: WsConnection, ew: EventWriter, body: dict, lane: Lane) -> None:
        s = self.server
        s.stats.requests.append(time.time())
        s.stats.bodies.append(body)
        f = s.faults
        try:
            if f.error_event:
                n = s.next_request()
                if f.fail_first == 0 or n <= f.fail_first:
                    await conn.send(_injected_error(ew, f.error_event, f.retry_after))
                    return
                s._served -= 1  # this request is served below: count it once
            conv = self.prepare(body)
        except RequestError as exc:
            await conn.send(ew.error(exc.code, exc.message, param=exc.param, status=exc.status))
            return
        except WsClosed:
            return
        try:
            async for batch in self.respond(conv, ew, lane):
                if isinstance(batch, tuple):
                    if batch[0] == "drop":
                        conn.abort()
                    else:
                        await conn.close(batch[1], "injected close")
                    return
                await conn.send(*batch)
        except WsClosed:
            pass

    def _steer(self, ew: EventWriter, ev: dict, lane: Lane) -> list[str]:
        target = ev.get("previous_response_id")
        raw_input = ev.get("input")
        steer = {"previous_response_id": str(target), "input": raw_input if raw_input else ""}

        def failed(code: str, message: str) -> list[str]:
            return [ew.event("response.steer.failed", steer=steer, error={
                "type": "invalid_request_error", "code": code, "message": message})]

        try:
            items = from_input(raw_input)
            if not items or any(m["role"] != "user" for m in items):
                raise ValueError("steering takes user messages only")
        except ValueError as exc:
            return failed("invalid_input", str(exc))
        if not self.steering:
            return failed("steering_not_supported", "this server does not steer responses")
        active = lane.active
        if active is None or active.rid != target:
            if target in self.kept:
                return failed("response_already_completed", f"response {target} has completed")
            return failed("response_not_found", f"no response {target} on this connection")
        if active.done:
            return failed("response_already_completed", f"response {target} has completed")
        if len(active.steers) >= 8:
            return failed("too_many_pending_steers", "too much steering input is pending")
        active.steers.append(items)
        active.cut.set()
        sid = new_id("steer")
        return [ew.event("response.steer.accepted",
                         steer={"id": sid, "previous_response_id": active.rid})]

    # -- SSE -------------------------------------------------------------------------------
    async def handle_http(self, req: HttpRequest) -> HttpResponse:
        s = self.server
        if req.method != "POST":
            return HttpResponse.json({"error": {"message": "POST a response.create body, or "
                                                "upgrade to a WebSocket"}}, 400)
        try:
            body = req.json()
            if not isinstance(body, dict):
                raise ValueError
        except ValueError:
            return HttpResponse.json({"error": {"message": "invalid JSON body",
                                                "type": "invalid_request_error"}}, 400)
        s.stats.requests.append(time.time())
        s.stats.headers.append(dict(req.headers))
        s.stats.bodies.append(body)
        n = s.next_request()
        refused = s.injected_status(n)
        if refused is not None:
            return refused
        s._served -= 1  # respond() counts it
        try:
            conv = self.prepare(body)
        except RequestError as exc:
            return HttpResponse.json({"error": {"message": exc.message, "code": exc.code,
                                                "param": exc.param,
                                                "type": "invalid_request_error"}}, exc.status)
        f = s.stream_faults(n)
        ew = EventWriter()
        if not body.get("stream"):
            final: dict = {}
            async for batch in self.respond(conv, ew, Lane()):
                if isinstance(batch, tuple):
                    break
                for frame in batch:
                    obj = json.loads(frame)
                    if obj["type"] in ("response.completed", "response.incomplete"):
                        final = obj["response"]
            return HttpResponse.json(final)

        async def stream() -> AsyncIterator[bytes]:
            async for batch in self.respond(conv, ew, Lane()):
                if isinstance(batch, tuple):
                    return  # a drop or a close: the connection ends without the terminal event
                yield b"".join(_sse(frame) for frame in batch)

        return HttpResponse(200, {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"},
                            stream=stream(), close=f.drop_after is not None or f.close_after is not None)

    # -- one response (and its steered successors) -----------------------------------------
    def prepare(self, body: dict) -> tuple[list[dict], dict, str | None]:
        """(the conversation, the settings, previous_response_id) of a create body."""
        try:
            items = from_input(body.get("input", []))
        except ValueError as exc:
            raise RequestError("invalid_value", str(exc), "input") from None
        settings = {"model": body.get("model") or self.server.model_name,
                    "instructions": body.get("instructions"),
                    "max_output_tokens": body.get("max_output_tokens"),
                    "temperature": body.get("temperature"),
                    "prefill": body.get("prefill") or "",
                    "grammar": body.get("grammar") or None,
                    "seed": body.get("seed"),  # steer's extension, as `prefill`
                    "tools": bool(body.get("tools")) and body.get("tool_choice") != "none"}
        for key, kind in (("max_output_tokens", int), ("temperature", (int, float)),
                          ("instructions", str), ("prefill", str), ("grammar", str), ("seed", int)):
            if settings[key] is not None and (not isinstance(settings[key], kind)
                                              or isinstance(settings[key], bool)):
                raise RequestError("invalid_type", f"{key} has the wrong type", key)
        prev = body.get("previous_response_id")
        history: list[dict] = []
        if prev is not None:
            kept = None if self.server.faults.forget_previous else self.kept.get(prev)
            if kept is None:
                raise RequestError("previous_response_not_found",
                                   f"Previous response with id '{prev}' not found.",
                                   "previous_response_id")
            history = [*kept.messages, {"role": "assistant", "content": kept.answer}]
        return [*history, *items], settings, prev

    async def respond(self, conv: tuple[list[dict], dict, str | None], ew: EventWriter,
                      lane: Lane) -> AsyncIterator[list[str] | tuple]:
        """Batches of event frames; a tuple ("drop",) or ("close", code) is a fault for the
        transport to carry out."""
        s = self.server
        messages, settings, prev = conv
        while True:  # a steered response goes on as its successor
            n = s.next_request()
            f: Faults = s.stream_faults(n)
            rid, mid = new_id("resp"), new_id("msg")
            active = lane.active = Active(rid)
            created = time.time()
            opening = response_object(rid, settings["model"], status="in_progress", settings=settings,
                                      previous_response_id=prev, created_at=created)
            scripted = s.tool_calls.get(n) if settings.get("tools") else None
            if scripted:  # a look-up the test scripted: function calls instead of text
                frames, items = ew.calls(scripted, n)
                final = response_object(rid, settings["model"], status="completed",
                                        settings=settings, previous_response_id=prev,
                                        created_at=created, usage=(0, 0), calls=items)
                self._keep(rid, Kept(messages, "", settings))
                lane.active = None
                yield [ew.event("response.created", response=opening),
                       ew.event("response.in_progress", response=opening), *frames,
                       ew.event("response.completed", response=final)]
                return
            batch = ew.opening(opening, mid)
            instructions = settings["instructions"]
            prompt = ([{"role": "system", "content": instructions}] if instructions else []) + messages
            gen = Generation()
            tokens = s.tokens(n, prompt, prefill=settings["prefill"], grammar=settings["grammar"],
                              max_tokens=settings["max_output_tokens"],
                              temperature=settings["temperature"], gen=gen,
                              seed=settings["seed"])
            if s.replays is None:
                tokens = _cuttable(tokens, active.cut)
            parts: list[str] = []
            failure: str | None = None
            try:
                async for tok in tokens:
                    if active.steers:
                        break  # cut here: the steer commits at this token boundary
                    if tok == "":
                        if batch:
                            yield batch
                            batch = []
                        continue
                    i = len(parts)
                    if f.drop_after is not None and i >= f.drop_after:
                        yield batch
                        yield ("drop",)
                        return
                    if f.close_after is not None and i >= f.close_after:
                        yield batch
                        yield ("close", f.close_code)
                        return
                    if f.malformed_after is not None and i >= f.malformed_after:
                        batch.append('{"type":"response.output_text.delta","delta":"x')
                        yield batch
                        yield ("close", 1011)
                        return
                    if f.stall_after is not None and i == f.stall_after:
                        yield batch
                        batch = []
                        await stall(f)
                    batch.append(ew.delta(mid, tok))
                    parts.append(tok)
            except Exception as exc:  # noqa: BLE001 - the model failed: the client is told, not left to stall
                failure = str(exc) or type(exc).__name__
            finally:
                await tokens.aclose()  # type: ignore[attr-defined]  # an async generator, typed as its iterator
            if failure is not None:
                lane.active = None
                final = response_object(rid, settings["model"], status="failed", text="".join(parts),
                                        msg_id=mid, settings=settings, previous_response_id=prev,
                                        created_at=created, usage=(gen.prompt_tokens, len(parts)),
                                        error=("server_error", failure))
                yield batch + ew.closing(final, mid, "".join(parts))
                return
            steered = bool(active.steers)
            active.done = True  # no await since the last check: a steer now is too late
            text = "".join(parts)
            if steered:
                status, reason = "incomplete", "steered"
            elif gen.finish == "length":
                status, reason = "incomplete", "max_output_tokens"
            else:
                status, reason = "completed", None
            final = response_object(rid, settings["model"], status=status, text=text, msg_id=mid,
                                    settings=settings, previous_response_id=prev,
                                    created_at=created, usage=(gen.prompt_tokens, len(parts)),
                                    incomplete_reason=reason)
            answer = settings["prefill"] + text
            self._keep(rid, Kept(messages, answer, settings))
            batch += ew.closing(final, mid, text)
            yield batch
            if not steered:
                lane.active = None
                return
            # the successor: the same settings, the kept answer, then the queued input
            messages = [*messages, {"role": "assistant", "content": answer},
                        *[m for st in active.steers for m in st]]
            settings = {**settings, "grammar": None}  # it shaped the answer from its start
            prev = rid

    def _keep(self, rid: str, kept: Kept) -> None:
        self.kept[rid] = kept
        while len(self.kept) > KEEP:
            self.kept.popitem(last=False)


async def _cuttable(tokens: AsyncIterator[str], cut: asyncio.Event) -> AsyncIterator[str]:
    """The model's tokens, ending the moment `cut` is set rather than at the next token: a
    token of a CPU model takes milliseconds, and a steer should not wait for it."""
    it = tokens.__aiter__()
    cutting = asyncio.ensure_future(cut.wait())
    nxt: asyncio.Future | None = None
    try:
        while True:
            nxt = asyncio.ensure_future(it.__anext__())
            await asyncio.wait({nxt, cutting}, return_when=asyncio.FIRST_COMPLETED)
            if not nxt.done():
                return  # cut: the generation stops (its thread at the token in flight)
            try:
                tok = nxt.result()
            except StopAsyncIteration:
                return
            yield tok
    finally:
        cutting.cancel()
        if nxt is not None and not nxt.done():
            nxt.cancel()
            await asyncio.gather(nxt, return_exceptions=True)
        await tokens.aclose()  # type: ignore[attr-defined]  # an async generator, typed as its iterator


def _injected_error(ew: EventWriter, status: int, retry_after: float) -> str:
    code = {401: "invalid_api_key", 403: "forbidden", 429: "rate_limit_exceeded"}.get(
        status, "server_error")
    headers = {"retry-after": f"{retry_after:g}"} if status == 429 else None
    return ew.error(code, "injected failure", status=status,
                    type_="invalid_request_error" if status < 500 else "server_error",
                    headers=headers)
