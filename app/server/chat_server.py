"""`steer serve`: the local model server on 127.0.0.1, speaking two protocols on one port.

- the OpenAI Responses API over a persistent WebSocket (GET /v1/responses, upgraded; see
  app/server/responses.py), the subset steer's openai-responses provider uses, with native
  steering; and the same events over SSE (POST /v1/responses) for clients that cannot upgrade;
- OpenAI-compatible Chat Completions over SSE (POST /v1/chat/completions) for other tools:
  `data: {chat.completion.chunk}` events, a final chunk with finish_reason, a usage chunk when
  `stream_options.include_usage` is set, then `data: [DONE]`, byte for byte as OpenAI does.

Two back-ends:
- the embedded model (default, or any GGUF with --model-path), loaded once and kept warm;
  one generation at a time, in arrival order (a FIFO lock), so several clients are served
  fairly and the KV cache of a conversation's shared prefix is reused between its turns;
- `--replay FILE`: streams a recorded answer at a chosen rate (tokens/s; 0 = as fast as the
  socket takes it), with optional faults: drop the connection, stall, an error status, a
  malformed event, a close code after N tokens. Benchmarks and fault-injection tests use it.
  Replays run concurrently: N requests in flight each stream at the full rate (parallel
  variants), request n in arrival order getting answer n, the last repeating.

Both take steer's `seed` (the Chat Completions body's, or response.create's extension): the
embedded model samples with it, so variants asked with seeds 1..N differ.

With a token (from the command line always when serving a model; see
app/providers/serve_registry.py) every request must carry it as `Authorization: Bearer`, or
gets 401 before the rest of it is read; the HTTP server's limits (sizes, timeouts,
connections without the token) are in app/server/http.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator

from app.server.generation import Backend, Faults, prediction_usage, rss_bytes, stall
from app.server.http import HttpRequest, HttpResponse, HttpServer, Limits
from app.server.responses import ResponsesService


def _chunk(cid: str, model: str, created: int, delta: dict, finish: str | None = None) -> bytes:
    obj = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


async def _tool_sse(calls: list[dict], n: int, model: str,
                    include_usage: bool) -> AsyncIterator[bytes]:
    """A scripted answer that calls tools, streamed as OpenAI does: each call's id and name
    first, its arguments in pieces, then finish_reason "tool_calls"."""
    cid = f"chatcmpl-{uuid.uuid4().hex[:12]}"
    created = int(time.time())
    yield _chunk(cid, model, created, {"role": "assistant", "content": None})
    for i, call in enumerate(calls):
        args = call.get("arguments", {})
        text = args if isinstance(args, str) else json.dumps(args)
        yield _chunk(cid, model, created, {"tool_calls": [{
            "index": i, "id": f"call_{n}_{i}", "type": "function",
            "function": {"name": call["name"], "arguments": ""}}]})
        half = len(text) // 2
        for piece in (text[:half], text[half:]):
            yield _chunk(cid, model, created, {"tool_calls": [{
                "index": i, "function": {"arguments": piece}}]})
    tail = [_chunk(cid, model, created, {}, "tool_calls")]
    if include_usage:
        tail.append(b"data: " + json.dumps({"id": cid, "object": "chat.completion.chunk",
                                            "created": created, "model": model, "choices": [],
                                            "usage": {"prompt_tokens": 0, "completion_tokens": 0,
                                                      "total_tokens": 0}}).encode() + b"\n\n")
    yield b"".join([*tail, b"data: [DONE]\n\n"])


class ChatServer(Backend):
    """Chat Completions over SSE and the Responses API (WebSocket and SSE) on one port."""

    def __init__(self, *, replay: str | list[str] | None = None, rate: float = 0.0,
                 model_path: str | None = None, faults: Faults | None = None, host: str = "127.0.0.1",
                 port: int = 0, model_name: str | None = None, token: str | None = None,
                 websocket: bool = True, steering: bool = True, ssl: object | None = None,
                 first_token_delay: float = 0.0, record_frames: bool = False,
                 limits: Limits | None = None,
                 tool_calls: dict[int, list[dict]] | None = None) -> None:
        super().__init__(replay=replay, rate=rate, model_path=model_path, faults=faults,
                         model_name=model_name, token=token, first_token_delay=first_token_delay,
                         record_frames=record_frames, tool_calls=tool_calls)
        self.responses = ResponsesService(self, websocket=websocket, steering=steering)
        # the token is checked by the HTTP server, before it reads the rest of a request
        self.http = HttpServer(self.handle, host, port, upgrade=self.responses.upgrade, ssl=ssl,
                               authorize=self.authorized, unauthorized=self.unauthorized,
                               limits=limits, refused=self.stats.refused)

    async def start(self) -> int:
        await self.load()
        return await self.http.start()

    @property
    def base_url(self) -> str:
        scheme = "https" if self.http.ssl is not None else "http"
        return f"{scheme}://{self.http.host}:{self.http.port}/v1"

    async def close(self) -> None:
        await self.http.close()

    async def handle(self, req: HttpRequest) -> HttpResponse:
        self.last_activity = time.monotonic()  # (the token was checked: see __init__)
        path = req.path.split("?")[0].rstrip("/")
        if req.method == "GET" and path == "/health":
            return HttpResponse.json(await self.health())
        if path == "/v1/responses":
            return await self.responses.handle_http(req)
        if req.method == "GET" and path == "/v1/models":
            return HttpResponse.json({"object": "list", "data": [
                {"id": self.model_name, "object": "model", "owned_by": "steer",
                 "meta": {"n_ctx": self.context_window}}]})
        if req.method != "POST" or req.path.rstrip("/") != "/v1/chat/completions":
            return HttpResponse.json({"error": {"message": f"no route {req.method} {req.path}"}}, 404)
        self.stats.requests.append(time.time())
        self.stats.headers.append(dict(req.headers))
        try:
            body = req.json()
            messages = body["messages"]
        except (ValueError, KeyError, TypeError):
            return HttpResponse.json({"error": {"message": "invalid JSON body or missing messages",
                                                "type": "invalid_request_error"}}, 400)
        self.stats.bodies.append(body)
        if self.faults.refuse_prediction and "prediction" in body:  # as OpenAI does for most models
            return HttpResponse.json({"error": {
                "message": "Predicted outputs are not supported with this model.",
                "type": "invalid_request_error", "param": "prediction",
                "code": "unsupported_parameter"}}, 400)
        if self.faults.refuse_tools and "tools" in body:
            return HttpResponse.json({"error": {"message": "tools param requires --jinja flag",
                                                "type": "invalid_request_error"}}, 400)
        n = self.next_request()
        refused = self.injected_status(n)
        if refused is not None:
            return refused
        model = body.get("model") or self.model_name
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        calls = self.tool_calls.get(n)
        if calls and body.get("tools") and body.get("tool_choice") != "none" and body.get("stream"):
            return HttpResponse(200, {"Content-Type": "text/event-stream",
                                      "Cache-Control": "no-cache"},
                                stream=_tool_sse(calls, n, model, include_usage))
        seed = body.get("seed")  # as OpenAI's and llama-server's Chat Completions take it
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            return HttpResponse.json({"error": {"message": "seed must be an integer",
                                                "type": "invalid_request_error",
                                                "param": "seed"}}, 400)
        tokens = self.tokens(n, messages, max_tokens=body.get("max_tokens"),
                             temperature=body.get("temperature"), seed=seed)
        if not body.get("stream"):
            text = "".join([t async for t in tokens])
            return HttpResponse.json({
                "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion",
                "created": int(time.time()), "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "finish_reason": "stop"}]})
        f = self.stream_faults(n)
        prediction = body.get("prediction")
        if isinstance(prediction, dict) and prediction.get("type") == "content":
            prediction = prediction.get("content")
            if isinstance(prediction, list):  # content parts
                prediction = "".join(p.get("text", "") for p in prediction if isinstance(p, dict))
        if not isinstance(prediction, str):
            prediction = None
        return HttpResponse(200, {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"},
                            stream=self._sse(tokens, model, include_usage, f, prediction),
                            close=f.drop_after is not None)

    async def _sse(self, tokens: AsyncIterator[str], model: str, include_usage: bool,
                   f: Faults, prediction: str | None = None) -> AsyncIterator[bytes]:
        cid = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        created = int(time.time())
        yield _chunk(cid, model, created, {"role": "assistant", "content": ""})
        n = 0
        sent: list[str] = []
        batch: list[bytes] = []
        try:
            async for tok in tokens:
                if tok == "":  # the pacer's signal: the batch due by now is complete
                    if batch:
                        yield b"".join(batch)
                        batch = []
                    continue
                if f.drop_after is not None and n >= f.drop_after:
                    yield b"".join(batch)
                    return
                if f.stall_after is not None and n == f.stall_after:
                    yield b"".join(batch)
                    batch = []
                    await stall(f)
                if f.malformed_after is not None and n >= f.malformed_after:
                    batch.append(b"data: {\"choices\": [{\"delta\": {\"content\": \"x\n\n")
                    yield b"".join(batch)
                    return
                batch.append(_chunk(cid, model, created, {"content": tok}))
                sent.append(tok)
                n += 1
        except Exception as exc:  # noqa: BLE001 - the model failed mid-answer: said as OpenAI-compatible servers do
            batch.append(b"event: error\ndata: " + json.dumps({"error": {
                "message": str(exc), "type": "server_error"}}).encode() + b"\n\n")
            yield b"".join(batch)
            return
        batch.append(_chunk(cid, model, created, {}, "stop"))
        if include_usage:
            usage: dict = {"prompt_tokens": 0, "completion_tokens": n, "total_tokens": n}
            if prediction is not None:
                usage["completion_tokens_details"] = prediction_usage(prediction, sent)
            batch.append(b"data: " + json.dumps({"id": cid, "object": "chat.completion.chunk",
                                                 "created": created, "model": model, "choices": [],
                                                 "usage": usage}).encode() + b"\n\n")
        batch.append(b"data: [DONE]\n\n")
        yield b"".join(batch)

def _stderr_log() -> tuple[str | None, int]:
    """(the regular file stderr goes to, where this process started writing in it): where a
    client reads this server's crash (app/providers/serve_crash.py)."""
    import os
    import stat

    try:
        if not stat.S_ISREG(os.fstat(2).st_mode):
            return None, 0
        return os.path.realpath("/proc/self/fd/2"), os.lseek(2, 0, os.SEEK_END)
    except OSError:
        return None, 0


class ServerThread:
    """A ChatServer on its own event loop in a background thread: for synchronous callers
    (benchmarks, snapshot tests) that need a real server while they block."""

    def __init__(self, **kwargs: object) -> None:
        self.server = ChatServer(**kwargs)  # type: ignore[arg-type]  # the tests' keywords, checked there
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="steer-chat-server", daemon=True)

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.server.start())
        self._ready.set()
        self.loop.run_forever()

    def __enter__(self) -> ChatServer:
        self._thread.start()
        if not self._ready.wait(60):
            raise RuntimeError("the loopback server did not start")
        return self.server

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


def _llama_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llama-cpp-python")
    except PackageNotFoundError:
        return "(unknown version)"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="steer serve",
        description="The local model server: the Responses API over a WebSocket (and SSE) and "
                    "OpenAI-compatible Chat Completions, on loopback. Every request needs the "
                    "token from $XDG_STATE_HOME/steer/serve.json as Bearer.")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; anything else is reachable by others)")
    p.add_argument("--port", type=int, default=8765, help="port (0: any free one)")
    p.add_argument("--model-path", help="GGUF to serve (default: the embedded SmolLM2-135M)")
    p.add_argument("--replay", metavar="FILE", action="append",
                   help="serve this recorded answer instead of a model; again: the next "
                        "request's answer (the last one serves every request after)")
    p.add_argument("--rate", type=float, default=0.0, help="replay speed in tokens/s (0: unthrottled)")
    p.add_argument("--drop-after", type=int, help="fault: drop the connection after N tokens")
    p.add_argument("--stall-after", type=int, help="fault: stop sending after N tokens")
    p.add_argument("--stall-seconds", type=float, default=3600.0,
                   help="fault: with --stall-after, go on after this many seconds")
    p.add_argument("--status", type=int, help="fault: answer every request with this HTTP status")
    p.add_argument("--fail-first", type=int, default=0, metavar="N",
                   help="fault: with --status, only the first N requests (then serve normally)")
    p.add_argument("--retry-after", type=float, default=0.0, metavar="SECONDS",
                   help="fault: the Retry-After a --status 429 carries")
    p.add_argument("--idle-exit", type=float, default=0.0, metavar="SECONDS",
                   help="exit after this long without a client (0: never); a server the `local` "
                        "provider starts on demand gets 900, or $STEER_SERVE_IDLE_EXIT")
    p.add_argument("--require-token", action="store_true",
                   help="require the token with --replay too (a model always requires it)")
    args = p.parse_args(argv)
    import faulthandler

    from app.providers import serve_registry as registry

    # a native crash in llama.cpp dumps every thread's stack to stderr (the log a client reads)
    faulthandler.enable(all_threads=True)
    log, log_offset = _stderr_log()
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"steer serve: binding {args.host}: other machines can connect (the token still "
              "applies)", file=sys.stderr)
    # newline="": the answer exactly as recorded (a bare CR is the model's, not a line end)
    replay: list[str] | None = None
    for path in args.replay or ():
        try:
            with open(path, encoding="utf-8", newline="") as f:
                replay = [*(replay or []), f.read()]
        except (OSError, UnicodeDecodeError) as exc:
            p.error(f"--replay {path}: {exc.strerror if isinstance(exc, OSError) else exc}")
    server = ChatServer(replay=replay, rate=args.rate, model_path=args.model_path, host=args.host,
                        port=args.port,
                        # the token guards the model; a replay serves a file given here (tests)
                        token=registry.token() if args.require_token or not replay else None,
                        faults=Faults(drop_after=args.drop_after, stall_after=args.stall_after,
                                      stall_seconds=args.stall_seconds, status=args.status,
                                      fail_first=args.fail_first, retry_after=args.retry_after))

    async def run() -> None:
        import os
        import signal

        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        try:
            await server.start()
        except (OSError, ValueError, RuntimeError) as exc:  # a broken model, a taken port
            raise SystemExit(f"steer serve: cannot start: {exc}") from None
        model_path = server._local.model_path if server._local is not None else None
        if model_path:  # `local` finds the server for its model here
            registry.register(model_path, server.http.host, server.http.port, os.getpid(),
                              log=log, log_offset=log_offset)
            rss = rss_bytes()
            print(f"steer serve: pid {os.getpid()} serving {model_path} with llama-cpp-python "
                  f"{_llama_version()}"
                  + (f", {rss / 2**20:.0f} MB resident" if rss else ""), file=sys.stderr, flush=True)
        print(f"steer serve: listening on {server.base_url}", flush=True)
        try:
            while True:
                await asyncio.sleep(min(5.0, args.idle_exit or 5.0))
                idle = time.monotonic() - server.last_activity
                if args.idle_exit and not server.http._connections and idle > args.idle_exit:
                    print(f"steer serve: no client for {idle:.0f} s; exiting", file=sys.stderr)
                    return
        finally:
            if model_path:
                registry.unregister(model_path, os.getpid())
            await server.close()

    try:
        asyncio.run(run())
    except (KeyboardInterrupt, asyncio.CancelledError):
        pass
    return 0
