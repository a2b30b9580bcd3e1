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

With a token (from the command line always when serving a model; see
app/providers/serve_registry.py) every request must carry it as `Authorization: Bearer`, or
gets 401.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from app.core.faults import stop_point
from app.server.http import HttpRequest, HttpResponse, HttpServer

_TOKEN = re.compile(r" ?[A-Za-z]+| ?\d{1,3}| ?[^\sA-Za-z\d]{1,3}|\s+")


def split_tokens(text: str) -> list[str]:
    """Cut text roughly where a BPE tokenizer would (~4 characters a token), so recorded
    answers replay with realistic chunk sizes."""
    return _TOKEN.findall(text)


def prediction_usage(prediction: str, answer: list[str]) -> dict:
    """OpenAI's figures for a predicted output: the prediction's tokens that appear in the
    answer (in order) were accepted, the others rejected."""
    import difflib

    pred = split_tokens(prediction)
    kept = sum(b.size for b in difflib.SequenceMatcher(None, pred, answer, autojunk=False)
               .get_matching_blocks())
    return {"reasoning_tokens": 0, "accepted_prediction_tokens": kept,
            "rejected_prediction_tokens": len(pred) - kept}


@dataclass
class Faults:
    drop_after: int | None = None  # close the connection mid-answer, no finish, no [DONE]
    stall_after: int | None = None  # stop sending, keep the connection open
    stall_seconds: float = 3600.0  # ... for this long, then go on
    status: int | None = None  # answer with this HTTP status instead (429 gets Retry-After)
    retry_after: float = 0.0
    malformed_after: int | None = None  # send a chunk that is not JSON
    fail_first: int = 0  # fail only this many requests with `status`, then serve normally
    only_first: int = 0  # the stream faults (drop, stall, malformed) hit only the first N requests
    close_after: int | None = None  # WebSocket: close with `close_code` after N tokens
    close_code: int = 1011
    error_event: int | None = None  # WebSocket: answer response.create with an `error` event
    forget_previous: bool = False  # no previous_response_id is ever found
    connection_limit: int | None = None  # WebSocket: after N responses, the 60-minute-limit error
    refuse_prediction: bool = False  # Chat Completions: a body with `prediction` gets OpenAI's 400


@dataclass
class ServerStats:
    requests: list[float] = field(default_factory=list)  # wall-clock time each request arrived
    bodies: list[dict] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)  # names lower-cased
    # perf_counter times, for benchmarks: a generation began / sent its first token / was
    # stopped early (the client interrupted, steered or went away)
    started: list[float] = field(default_factory=list)
    first_token: list[float] = field(default_factory=list)
    stopped: list[float] = field(default_factory=list)
    upgrades: int = 0  # WebSocket connections accepted
    frames: list[tuple[str, str]] = field(default_factory=list)  # with record_frames: WebSocket frames


@dataclass
class Generation:
    """One answer's tokens and how it ended (filled in as they stream)."""

    finish: str = "stop"
    prompt_tokens: int = 0
    tokens: int = 0


def _chunk(cid: str, model: str, created: int, delta: dict, finish: str | None = None) -> bytes:
    obj = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


class ChatServer:
    def __init__(self, *, replay: str | list[str] | None = None, rate: float = 0.0,
                 model_path: str | None = None, faults: Faults | None = None, host: str = "127.0.0.1",
                 port: int = 0, model_name: str | None = None, token: str | None = None,
                 websocket: bool = True, steering: bool = True, ssl: object | None = None,
                 first_token_delay: float = 0.0, record_frames: bool = False) -> None:
        # a list of answers is served one per request, the last one repeating
        answers = [replay] if isinstance(replay, str) else replay
        self.replays = [split_tokens(a) for a in answers] if answers else None
        self.replay_tokens = self.replays[0] if self.replays else None
        self.rate = rate
        self.model_path = model_path
        self.faults = faults or Faults()
        self.model_name = model_name or ("replay" if replay is not None else "smollm2-135m-instruct")
        # the embedded model runs with an 8k window (providers/local.py); a replay has no limit
        self.context_window = None if replay is not None else 8192
        self.stats = ServerStats()
        self.token = token  # required as Bearer when set
        self.first_token_delay = first_token_delay  # replay: the "model's" own time to first token
        self.record_frames = record_frames
        from app.server.responses import ResponsesService

        self.responses = ResponsesService(self, websocket=websocket, steering=steering)
        self.http = HttpServer(self.handle, host, port, upgrade=self.responses.upgrade, ssl=ssl)
        self._served = 0
        self._local = None
        self._model_turn = asyncio.Lock()  # FIFO: generations run one at a time, in arrival order
        self.last_activity = time.monotonic()

    async def start(self) -> int:
        if self.replay_tokens is None:
            from app.providers.local import LocalModel, warm

            self._local = LocalModel(self.model_path)
            await asyncio.to_thread(warm, self._local.model_path)  # keep the model loaded and warm
        return await self.http.start()

    @property
    def base_url(self) -> str:
        scheme = "https" if self.http.ssl is not None else "http"
        return f"{scheme}://{self.http.host}:{self.http.port}/v1"

    def authorized(self, req: HttpRequest) -> bool:
        if not self.token:
            return True
        import hmac

        return hmac.compare_digest(req.headers.get("authorization", ""), f"Bearer {self.token}")

    def unauthorized(self) -> HttpResponse:
        return HttpResponse.json({"error": {"message": "missing or wrong token: steer serve needs "
                                            "the token from its state file as Bearer",
                                            "type": "invalid_request_error",
                                            "code": "invalid_api_key"}}, 401)

    def next_request(self) -> int:
        """Count a request (an answer asked for): replays and faults go by this number."""
        self._served += 1
        return self._served

    def injected_status(self, n: int) -> HttpResponse | None:
        """The `status` fault for the n-th request, if it applies."""
        f = self.faults
        if f.status and (f.fail_first == 0 or n <= f.fail_first):
            headers = {"Retry-After": f"{f.retry_after:g}"} if f.status == 429 else {}
            return HttpResponse.json({"error": {"message": "injected failure", "type": "server_error"}},
                                     f.status, **headers)
        return None

    def stream_faults(self, n: int) -> Faults:
        f = self.faults
        return Faults() if f.only_first and n > f.only_first else f

    def tokens(self, n: int, messages: list[dict], *, prefill: str = "",
               max_tokens: int | None = None, temperature: float | None = None,
               gen: Generation | None = None, grammar: str | None = None) -> AsyncIterator[str]:
        """The n-th request's tokens from the back-end; "" marks the end of a batch due by now."""
        self.last_activity = time.monotonic()
        if self.replays:
            tokens = self.replays[min(max(n, 1), len(self.replays)) - 1]
            if max_tokens is not None and len(tokens) > max_tokens:
                tokens = tokens[:max_tokens]
                if gen is not None:
                    gen.finish = "length"
            return self._replay(tokens)
        return self._generate(messages, prefill, max_tokens, temperature, gen or Generation(),
                              grammar)

    async def health(self) -> dict:
        import os

        return {"status": "ok", "pid": os.getpid(), "model": self.model_name,
                "model_path": self._local.model_path if self._local is not None else None,
                "rss_bytes": rss_bytes()}

    async def close(self) -> None:
        await self.http.close()

    async def handle(self, req: HttpRequest) -> HttpResponse:
        self.last_activity = time.monotonic()
        if not self.authorized(req):
            return self.unauthorized()
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
        n = self.next_request()
        refused = self.injected_status(n)
        if refused is not None:
            return refused
        model = body.get("model") or self.model_name
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        tokens = self.tokens(n, messages, max_tokens=body.get("max_tokens"),
                             temperature=body.get("temperature"))
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
                await asyncio.sleep(f.stall_seconds)
            if f.malformed_after is not None and n >= f.malformed_after:
                batch.append(b"data: {\"choices\": [{\"delta\": {\"content\": \"x\n\n")
                yield b"".join(batch)
                return
            batch.append(_chunk(cid, model, created, {"content": tok}))
            sent.append(tok)
            n += 1
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

    async def _replay(self, tokens: list[str]) -> AsyncIterator[str]:
        """The recorded tokens, paced: every wake-up sends all tokens due by then (one SSE
        event each, as a real server would), then yields "" to flush the batch."""
        self.stats.started.append(time.perf_counter())
        if self.first_token_delay:
            await asyncio.sleep(self.first_token_delay)
        if tokens:
            self.stats.first_token.append(time.perf_counter())
        try:
            async for tok in self._paced(tokens):
                yield tok
        except (asyncio.CancelledError, GeneratorExit):
            self.stats.stopped.append(time.perf_counter())
            raise

    async def _paced(self, tokens: list[str]) -> AsyncIterator[str]:
        if self.rate <= 0:
            for i, tok in enumerate(tokens):
                yield tok
                if i % 64 == 63:
                    yield ""
                    await asyncio.sleep(0)
            return
        t0 = time.perf_counter()
        i = 0
        while i < len(tokens):
            due = min(len(tokens), int((time.perf_counter() - t0) * self.rate) + 1)
            while i < due:
                yield tokens[i]
                i += 1
            yield ""
            await asyncio.sleep(min(0.001, max(0.0, (i / self.rate) - (time.perf_counter() - t0))))

    async def _generate(self, messages: list[dict], prefill: str, max_tokens: int | None,
                        temperature: float | None, gen: Generation,
                        grammar: str | None = None) -> AsyncIterator[str]:
        from app.core.events import Done, Error, TextDelta, Usage
        from app.core.provider import Request

        assert self._local is not None
        req = Request(messages, max_tokens=max_tokens, temperature=temperature, prefill=prefill,
                      grammar=grammar)
        async with self._model_turn:  # FIFO: whoever asked first is served first
            self.stats.started.append(time.perf_counter())
            stream = self._local.stream(req)
            ended = False
            try:
                async for ev in stream:
                    t = type(ev)
                    if t is TextDelta:
                        if gen.tokens == 0:
                            self.stats.first_token.append(time.perf_counter())
                        elif gen.tokens == 3:  # three tokens sent: a crash test's moment
                            stop_point("serve:generating")
                        gen.tokens += 1
                        yield ev.text
                        yield ""
                    elif t is Usage:
                        gen.prompt_tokens = ev.prompt
                    elif t is Done:
                        gen.finish = ev.finish_reason
                    elif t is Error:
                        raise RuntimeError(ev.message)
                ended = True
            finally:
                if not ended:
                    self.stats.stopped.append(time.perf_counter())
                await stream.aclose()  # the client left or steered: the model stops at its next token


def rss_bytes() -> int | None:
    """This process's resident memory now (the model's weights count once they are read)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


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
        self.server = ChatServer(**kwargs)  # type: ignore[arg-type]
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
    p.add_argument("--replay", metavar="FILE", help="serve this recorded answer instead of a model")
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
                   help="exit after this long without a client (0: never)")
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
    replay = open(args.replay, encoding="utf-8", newline="").read() if args.replay else None
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
