"""The provider layer against real servers on 127.0.0.1: the project's own ChatServer (OpenAI
Chat Completions SSE byte for byte, with injected faults) and, for wire shapes it cannot
produce (reasoning deltas, server speed fields, provider error bodies), a tiny raw asyncio
server that writes exact HTTP/1.1 bytes. One test runs the embedded SmolLM2 model."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest
from conftest import run_isolated

from app.core.events import Connected, Done, Error, Event, ReasoningDelta, TextDelta, Usage
from app.core.provider import Request
from app.providers.openai_chat import OpenAIChat
from app.server.chat_server import ChatServer
from app.server.generation import Faults, split_tokens
from app.server.http import HttpRequest, HttpResponse, parse_head

KEY = "sk-test-7f3a9c2e4b1d8065"
MESSAGES = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Fix the off-by-one in total()."}]
ANSWER = (
    "The loop stops one item early — `range(len(items) - 1)` skips the last price.\n\n"
    "calc.py\n"
    "<<<<<<< SEARCH\n"
    "    for i in range(len(items) - 1):\n"
    "        total += items[i].price * items[i].qty\n"
    "=======\n"
    "    for item in items:\n"
    "        total += item.price * item.qty\n"
    ">>>>>>> REPLACE\n\n"
    "Now `total([Item(2.5, 4)])` returns 10.0 as expected (naïve tests pass ✓).\n"
)
TOKENS = split_tokens(ANSWER)
LONG_ANSWER = "word " * 3000  # ~3000 tokens: still streaming when a test walks away


# ---------------------------------------------------------------------------------------------
# helpers


def provider(base_url: str, key: str | None = KEY, **kw: object) -> OpenAIChat:
    kw.setdefault("stall_timeout", 5.0)
    kw.setdefault("connect_timeout", 5.0)
    return OpenAIChat(base_url, "test-model", key, **kw)  # type: ignore[arg-type]


async def collect(p: OpenAIChat, req: Request | None = None) -> list[Event]:
    events = [ev async for ev in p.stream(req or Request(MESSAGES))]
    await p.aclose()
    return events


def text_of(events: list[Event]) -> str:
    return "".join(ev.text for ev in events if type(ev) is TextDelta)


def reasoning_of(events: list[Event]) -> str:
    return "".join(ev.text for ev in events if type(ev) is ReasoningDelta)


def one(events: list[Event], cls: type) -> object:
    found = [ev for ev in events if type(ev) is cls]
    assert len(found) == 1, f"expected exactly one {cls.__name__}, got {found!r}"
    return found[0]


def assert_ends_with_error(events: list[Event], kind: str) -> Error:
    """A failed generation: ... Error(kind) then exactly one Done("error"), nothing after."""
    assert len(events) >= 2
    err, done = events[-2], events[-1]
    assert type(err) is Error, events[-3:]
    assert err.kind == kind, err
    assert type(done) is Done and done.finish_reason == "error", done
    assert sum(type(ev) is Done for ev in events) == 1
    assert sum(type(ev) is Error for ev in events) == 1
    assert err.message.strip(), "an error must say what happened"
    return err


@contextlib.asynccontextmanager
async def chat_server(**kw: object) -> AsyncIterator[ChatServer]:
    server = ChatServer(**kw)  # type: ignore[arg-type]
    await server.start()
    try:
        yield server
    finally:
        await server.close()


async def eventually(cond: Callable[[], bool], timeout: float = 5.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or cond}")
        await asyncio.sleep(0.01)


@dataclass
class RawRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


RawHandler = Callable[[RawRequest, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> RawRequest:
    method, path, headers = parse_head(await reader.readuntil(b"\r\n\r\n"))
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return RawRequest(method, path, headers, body)


@contextlib.asynccontextmanager
async def raw_server(handler: RawHandler) -> AsyncIterator[tuple[str, list[RawRequest]]]:
    """A bare HTTP/1.1 server: one request per connection, answered by `handler` with
    exact bytes. Yields (base_url, requests seen)."""
    seen: list[RawRequest] = []
    tasks: set[asyncio.Task] = set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        try:
            req = await _read_request(reader)
            seen.append(req)
            await handler(req, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1", seen
    finally:
        server.close()
        for task in tasks:
            task.cancel()  # a handler still stalling or streaming
        if tasks:
            await asyncio.wait(tasks, timeout=2.0)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.wait_closed(), 2.0)


def sse(obj: dict | str) -> bytes:
    data = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
    return b"data: " + data.encode() + b"\n\n"


def chunk(obj: dict | None = None, *, content: str | None = None, finish: str | None = None,
          **delta: object) -> dict:
    """A chat.completion.chunk as OpenAI-compatible servers send it."""
    d = dict(delta)
    if content is not None:
        d["content"] = content
    base = {"id": "chatcmpl-raw1", "object": "chat.completion.chunk", "created": 1730000000,
            "model": "test-model", "choices": [{"index": 0, "delta": d, "finish_reason": finish}]}
    base.update(obj or {})
    return base


def sse_head(status: int = 200, reason: str = "OK", **headers: str) -> bytes:
    lines = [f"HTTP/1.1 {status} {reason}", "Content-Type: text/event-stream",
             "Cache-Control: no-cache", "Transfer-Encoding: chunked"]
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def http_chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def sse_reply(events: list[bytes]) -> RawHandler:
    """A handler that streams these SSE events (one HTTP chunk each) and ends the body."""

    async def handler(req: RawRequest, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        writer.write(sse_head())
        for ev in events:
            writer.write(http_chunk(ev))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    return handler


def json_reply(status: int, reason: str, body: dict, **headers: str) -> RawHandler:
    async def handler(req: RawRequest, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        raw = json.dumps(body).encode()
        lines = [f"HTTP/1.1 {status} {reason}", "Content-Type: application/json",
                 f"Content-Length: {len(raw)}"] + [f"{k.replace('_', '-')}: {v}"
                                                    for k, v in headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + raw)
        await writer.drain()

    return handler


# ---------------------------------------------------------------------------------------------
# 1. a normal answer


async def test_normal_stream_delivers_the_exact_answer_usage_and_timings():
    async with chat_server(replay=ANSWER) as server:
        events = await collect(provider(server.base_url))

    assert text_of(events) == ANSWER
    assert not any(type(ev) in (Error, ReasoningDelta) for ev in events)
    # one delta per replayed token, in order (the server's role-only first chunk adds none)
    assert [ev.text for ev in events if type(ev) is TextDelta] == TOKENS
    usage = one(events, Usage)
    assert usage.completion == len(TOKENS) > 50
    assert usage.prompt >= 0
    done = events[-1]
    assert type(done) is Done and done.finish_reason == "stop"
    assert one(events, Done) is done
    assert events.index(usage) < len(events) - 1  # usage arrives before the end
    # the turn's clock takes its connect time from the one Connected, before any text
    assert one(events, Connected) is events[0]
    assert done.server_tokens_per_s is None  # the ChatServer sends no speed fields


async def test_paced_stream_reassembles_the_same_answer():
    # paced replay batches several tokens per TCP write; the text must still be exact
    async with chat_server(replay=ANSWER, rate=2000) as server:
        events = await collect(provider(server.base_url))
    assert text_of(events) == ANSWER
    assert events[-1] == Done("stop")


async def test_usage_without_a_usage_chunk_falls_back_to_counted_deltas():
    # servers that ignore stream_options send no usage: tokens are the counted deltas
    deltas = ["def ", "add", "(a, b)", ":\n", "    return a + b\n"]
    events_out = [sse(chunk(content=d)) for d in deltas]
    events_out += [sse(chunk(finish="stop")), sse("[DONE]")]
    async with raw_server(sse_reply(events_out)) as (url, _):
        events = await collect(provider(url))
    assert text_of(events) == "".join(deltas)
    assert not any(type(ev) is Usage for ev in events)
    done = events[-1]
    assert type(done) is Done and done.finish_reason == "stop"


async def test_openai_null_usage_on_every_chunk_and_length_finish():
    # with include_usage OpenAI puts "usage": null on every chunk, then a usage-only chunk
    out = [sse(chunk({"usage": None}, role="assistant", content=""))]
    out += [sse(chunk({"usage": None}, content=w)) for w in ("one", " two", " three")]
    out.append(sse(chunk({"usage": None}, finish="length")))
    out.append(sse({"id": "chatcmpl-raw1", "object": "chat.completion.chunk", "created": 1,
                    "model": "test-model", "choices": [],
                    "usage": {"prompt_tokens": 31, "completion_tokens": 3, "total_tokens": 34}}))
    out.append(sse("[DONE]"))
    async with raw_server(sse_reply(out)) as (url, _):
        events = await collect(provider(url))
    assert text_of(events) == "one two three"
    assert one(events, Usage) == Usage(31, 3)
    assert events[-1].finish_reason == "length"


async def test_sse_framing_cut_anywhere_with_crlf_comments_and_no_space_after_colon():
    # bytes arrive in 5-byte pieces (cutting UTF-8 characters and "\r\n" in half);
    # CRLF line ends, keep-alive comments and "data:" without a space are all legal SSE
    parts = ["Grüße, ", "naïve ", "→ ✓ ", "日本語", "\n"]
    body = b": OPENROUTER PROCESSING\r\n\r\n"
    for i, p in enumerate(parts):
        data = json.dumps(chunk(content=p), ensure_ascii=False).encode()
        body += (b"data:" if i % 2 else b"data: ") + data + b"\r\n\r\n"
        body += b": keep-alive\n\n"
    body += b"data: " + json.dumps(chunk(finish="stop")).encode() + b"\r\n\r\ndata: [DONE]\r\n\r\n"

    async def handler(req, reader, writer):
        writer.write(sse_head())
        for i in range(0, len(body), 5):
            writer.write(http_chunk(body[i:i + 5]))
            await writer.drain()
            await asyncio.sleep(0.001)  # separate TCP segments, so the reader sees the cuts
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async with raw_server(handler) as (url, _):
        events = await collect(provider(url))
    assert text_of(events) == "".join(parts)
    assert [ev.text for ev in events if type(ev) is TextDelta] == parts
    assert events[-1].finish_reason == "stop"


# ---------------------------------------------------------------------------------------------
# 2. reasoning


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_deltas_are_not_text(field):
    # DeepSeek / vLLM / llama-server send delta.reasoning_content; OpenRouter, Ollama and
    # Groq send delta.reasoning. Either way it is thought, not answer.
    thoughts = ["The user wants ", "a terse fix. ", "Check the range."]
    out = [sse(chunk(role="assistant", content=""))]
    out += [sse(chunk(**{field: t, "content": None})) for t in thoughts]
    out += [sse(chunk(content="Use ")), sse(chunk(content="`range(len(items))`."))]
    out += [sse(chunk(finish="stop")), sse("[DONE]")]
    async with raw_server(sse_reply(out)) as (url, _):
        events = await collect(provider(url))
    assert reasoning_of(events) == "".join(thoughts)
    assert text_of(events) == "Use `range(len(items))`."
    assert "user wants" not in text_of(events)
    kinds = [type(ev).__name__ for ev in events]
    assert kinds.index("ReasoningDelta") < kinds.index("TextDelta")
    assert events[-1].finish_reason == "stop"


async def test_a_chunk_carrying_both_reasoning_fields_is_not_doubled():
    # some servers (vLLM, OpenRouter) send the same thought under both names
    out = [sse(chunk(reasoning="thinking", reasoning_content="thinking")),
           sse(chunk(content="ok", finish="stop")), sse("[DONE]")]
    async with raw_server(sse_reply(out)) as (url, _):
        events = await collect(provider(url))
    assert reasoning_of(events) == "thinking"
    assert text_of(events) == "ok"


# ---------------------------------------------------------------------------------------------
# 3. server speed fields


async def test_llama_server_timings_give_the_server_speed():
    final = chunk({"timings": {"prompt_n": 42, "prompt_ms": 61.2, "prompt_per_token_ms": 1.457,
                               "prompt_per_second": 686.3, "predicted_n": 3,
                               "predicted_ms": 24.5, "predicted_per_token_ms": 8.17,
                               "predicted_per_second": 122.45}}, finish="stop")
    out = [sse(chunk(content=w)) for w in ("a", "b", "c")] + [sse(final), sse("[DONE]")]
    async with raw_server(sse_reply(out)) as (url, _):
        events = await collect(provider(url))
    assert text_of(events) == "abc"
    assert events[-1].server_tokens_per_s == pytest.approx(122.45)


async def test_groq_x_groq_usage_gives_usage_and_server_speed():
    final = chunk({"x_groq": {"id": "req_01jbd6g2qdfw2adyrt2az8hz4w", "usage": {
        "queue_time": 0.017, "prompt_tokens": 24, "prompt_time": 0.0008,
        "completion_tokens": 50, "completion_time": 0.2, "total_tokens": 74,
        "total_time": 0.2008}}}, finish="stop")
    out = [sse(chunk(role="assistant", content="")), sse(chunk(content="fast"))]
    out += [sse(final), sse("[DONE]")]
    async with raw_server(sse_reply(out)) as (url, _):
        events = await collect(provider(url))
    assert one(events, Usage) == Usage(24, 50)
    done = events[-1]
    assert done.finish_reason == "stop"
    assert done.server_tokens_per_s == pytest.approx(250.0)


async def test_cerebras_time_info_gives_the_server_speed():
    final = {"id": "chatcmpl-c1", "object": "chat.completion.chunk", "created": 1,
             "model": "gpt-oss-120b", "choices": [],
             "usage": {"prompt_tokens": 12, "completion_tokens": 300, "total_tokens": 312},
             "time_info": {"queue_time": 0.0001, "prompt_time": 0.002,
                           "completion_time": 0.1, "total_time": 0.104, "created": 1}}
    out = [sse(chunk(content="x")), sse(chunk(finish="stop")), sse(final), sse("[DONE]")]
    async with raw_server(sse_reply(out)) as (url, _):
        events = await collect(provider(url))
    assert one(events, Usage) == Usage(12, 300)
    assert events[-1].server_tokens_per_s == pytest.approx(3000.0)


# ---------------------------------------------------------------------------------------------
# 4-5. dropped and stalled streams


async def test_dropped_connection_mid_answer_is_a_network_error():
    async with chat_server(replay=ANSWER, faults=Faults(drop_after=7)) as server:
        events = await collect(provider(server.base_url))
    assert text_of(events) == "".join(TOKENS[:7])
    err = assert_ends_with_error(events, "network")
    assert err.retryable
    assert "incomplete" in err.message or "dropped" in err.message
    assert not any(type(ev) is Done and ev.finish_reason == "stop" for ev in events)
    assert len(server.stats.requests) == 1  # text was shown: no silent re-request


async def test_stream_that_ends_without_finish_or_done_is_incomplete():
    # a clean end of body but no finish_reason and no [DONE]: the answer was cut short
    out = [sse(chunk(content="half an ans"))]
    async with raw_server(sse_reply(out)) as (url, _):
        events = await collect(provider(url))
    assert text_of(events) == "half an ans"
    err = assert_ends_with_error(events, "network")
    assert "incomplete" in err.message


async def test_stall_mid_answer_is_a_stall_error_after_the_timeout():
    faults = Faults(stall_after=5, stall_seconds=60)
    async with chat_server(replay=ANSWER, faults=faults) as server:
        events = await collect(provider(server.base_url, stall_timeout=0.3))
    assert text_of(events) == "".join(TOKENS[:5])
    err = assert_ends_with_error(events, "stall")
    assert err.retryable
    assert "no data" in err.message and "0.3 s" in err.message


async def test_stall_before_the_response_headers_is_a_stall_error():
    async def handler(req, reader, writer):
        await asyncio.sleep(30)  # accepted, read the request, never answers

    async with raw_server(handler) as (url, _):
        events = await collect(provider(url, stall_timeout=0.3))
    assert text_of(events) == ""
    assert_ends_with_error(events, "stall")


# ---------------------------------------------------------------------------------------------
# 6. rate limits and HTTP errors


async def test_429_with_retry_after_is_retried_and_the_full_answer_arrives():
    faults = Faults(status=429, retry_after=0, fail_first=1)
    async with chat_server(replay=ANSWER, faults=faults) as server:
        events = await collect(provider(server.base_url))
        assert len(server.stats.requests) == 2
    assert text_of(events) == ANSWER
    assert not any(type(ev) is Error for ev in events)  # a recovered retry is not an error
    assert events[-1].finish_reason == "stop"


async def test_429_forever_is_a_retryable_rate_limit_error_after_the_retries():
    async with chat_server(replay=ANSWER, faults=Faults(status=429, retry_after=0)) as server:
        events = await collect(provider(server.base_url, retries=2))
        assert len(server.stats.requests) == 3  # first try + 2 retries, then give up
    assert text_of(events) == ""
    err = assert_ends_with_error(events, "rate_limit")
    assert err.retryable
    assert "429" in err.message and "injected failure" in err.message


async def test_429_with_an_openai_rate_limit_body_is_retried():
    # an OpenAI-shaped 429 (Retry-After: 0) from a raw server, then success
    calls = 0

    async def handler(req, reader, writer):
        nonlocal calls
        calls += 1
        if calls == 1:
            await json_reply(429, "Too Many Requests",
                             {"error": {"message": "Rate limit reached for requests",
                                        "type": "requests", "code": "rate_limit_exceeded"}},
                             Retry_After="0")(req, reader, writer)
        else:
            await sse_reply([sse(chunk(content="ok", finish="stop")), sse("[DONE]")])(
                req, reader, writer)

    async with raw_server(handler) as (url, seen):
        events = await collect(provider(url))
    assert len(seen) == 2
    assert text_of(events) == "ok" and events[-1].finish_reason == "stop"


async def test_503_once_is_retried():
    faults = Faults(status=503, fail_first=1)
    async with chat_server(replay=ANSWER, faults=faults) as server:
        events = await collect(provider(server.base_url, retries=1))
        assert len(server.stats.requests) == 2
    assert text_of(events) == ANSWER
    assert events[-1].finish_reason == "stop"


async def test_400_is_not_retried_and_carries_the_server_message():
    async with chat_server(replay=ANSWER, faults=Faults(status=400)) as server:
        events = await collect(provider(server.base_url, retries=2))
        assert len(server.stats.requests) == 1
    err = assert_ends_with_error(events, "http")
    assert not err.retryable
    assert "400" in err.message and "injected failure" in err.message


# ---------------------------------------------------------------------------------------------
# 7. authentication and the key


def assert_key_hidden(events: list[Event], key: str = KEY) -> None:
    for ev in events:
        assert key not in repr(ev) and key not in str(ev), ev
        if type(ev) is Error:
            assert key not in ev.message


async def test_401_is_an_auth_error_not_retried_and_the_key_never_shows():
    async with chat_server(replay=ANSWER, faults=Faults(status=401)) as server:
        events = await collect(provider(server.base_url, retries=2))
        assert len(server.stats.requests) == 1
    err = assert_ends_with_error(events, "auth")
    assert not err.retryable
    assert "401" in err.message and "API key" in err.message
    assert_key_hidden(events)


async def test_an_auth_error_body_that_echoes_the_key_is_redacted():
    # OpenAI echoes short/unknown keys verbatim: "Incorrect API key provided: <key>. ..."
    body = {"error": {"message": f"Incorrect API key provided: {KEY}. You can find your API "
                                 "key at https://platform.openai.com/account/api-keys.",
                      "type": "invalid_request_error", "param": None,
                      "code": "invalid_api_key"}}
    async with raw_server(json_reply(401, "Unauthorized", body)) as (url, seen):
        events = await collect(provider(url))
    assert seen[0].headers["authorization"] == f"Bearer {KEY}"  # it was really sent
    err = assert_ends_with_error(events, "auth")
    assert "Incorrect API key provided" in err.message  # the server's reason is kept
    assert_key_hidden(events)


async def test_403_is_an_auth_error():
    body = {"error": {"message": "Project does not have access to model `o3`",
                      "type": "invalid_request_error", "code": "model_not_found"}}
    async with raw_server(json_reply(403, "Forbidden", body)) as (url, seen):
        events = await collect(provider(url))
    err = assert_ends_with_error(events, "auth")
    assert "does not have access" in err.message
    assert len(seen) == 1


# ---------------------------------------------------------------------------------------------
# 8. protocol errors


async def test_malformed_json_chunk_is_a_protocol_error():
    async with chat_server(replay=ANSWER, faults=Faults(malformed_after=4)) as server:
        events = await collect(provider(server.base_url))
    assert text_of(events) == "".join(TOKENS[:4])
    err = assert_ends_with_error(events, "protocol")
    assert "malformed JSON" in err.message
    assert '{"choices"' in err.message  # shows what it got
    assert not any(type(ev) is Done and ev.finish_reason == "stop" for ev in events)


async def test_an_error_object_in_the_stream_is_reported():
    # OpenRouter and vLLM report failures mid-stream as a data event with "error"
    out = [sse(chunk(content="Part")),
           sse({"error": {"message": f"upstream provider overloaded (key {KEY})", "code": 502}})]
    async with raw_server(sse_reply(out)) as (url, _):
        events = await collect(provider(url))
    assert text_of(events) == "Part"
    err = assert_ends_with_error(events, "model")
    assert "upstream provider overloaded" in err.message
    assert_key_hidden(events)


ERROR_EVENT = b'event: error\ndata: {"message": "the model overloaded (key ' + KEY.encode() \
    + b')"}\n\n'


@pytest.mark.parametrize("event", [ERROR_EVENT, b"event: error\ndata: plain words\n\n",
                                   b'event:error\r\ndata: {"error": {"message": "nested"}}\r\n\r\n'],
                         ids=["message", "text", "nested"])
async def test_an_sse_error_event_ends_the_answer_with_its_message(event):
    # the server goes on as if nothing happened: the answer must still end with the error
    out = [sse(chunk(content="Part")), event, sse(chunk(finish="stop")), sse("[DONE]")]
    async with raw_server(sse_reply(out)) as (url, _):
        events = await collect(provider(url))
    assert text_of(events) == "Part"
    err = assert_ends_with_error(events, "model")
    want = {ERROR_EVENT: "the model overloaded (key ***)"}.get(event, "plain words"
                                                               if b"plain" in event else "nested")
    assert err.message == f"127.0.0.1 reported an error mid-answer: {want}"
    assert_key_hidden(events)


async def test_an_sse_error_event_ends_a_responses_answer_too():
    from app.providers.openai_responses import OpenAIResponses

    def ev(kind: str, **fields: object) -> bytes:
        return (f"event: {kind}\ndata: ".encode()
                + json.dumps({"type": kind, **fields}).encode() + b"\n\n")

    out = [ev("response.created", response={"id": "resp_1", "status": "in_progress"}),
           ev("response.output_text.delta", item_id="msg_1", delta="Part", output_index=0,
              content_index=0),
           ERROR_EVENT,
           ev("response.completed", response={"id": "resp_1", "status": "completed"})]
    async with raw_server(sse_reply(out)) as (url, seen):
        p = OpenAIResponses(url, "m", KEY, transport="sse", stall_timeout=5.0)
        events = [e async for e in p.stream(Request(MESSAGES))]
        await p.aclose()
    assert seen[0].path == "/v1/responses"
    assert text_of(events) == "Part"
    err = assert_ends_with_error(events, "model")
    assert err.message == "127.0.0.1 reported an error mid-answer: the model overloaded (key ***)"
    assert_key_hidden(events)


# ---------------------------------------------------------------------------------------------
# 9. nobody listening


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


async def test_connection_refused_is_a_clear_network_error():
    url = f"http://127.0.0.1:{closed_port()}/v1"
    events = await collect(provider(url, retries=0))
    assert text_of(events) == ""
    err = assert_ends_with_error(events, "network")
    assert err.retryable
    assert "cannot connect" in err.message and url in err.message
    assert_key_hidden(events)


# ---------------------------------------------------------------------------------------------
# 10. cancellation reaches the server


async def test_consumer_that_stops_iterating_closes_the_connection():
    eof = asyncio.Event()
    timed_out = False

    async def handler(req, reader, writer):
        nonlocal timed_out
        writer.write(sse_head())
        for i in range(5):
            writer.write(http_chunk(sse(chunk(content=f"t{i} "))))
        await writer.drain()
        # the answer goes on (slowly); the client hanging up must be seen as EOF
        try:
            got = await asyncio.wait_for(reader.read(), 10)
        except TimeoutError:
            timed_out = True
            return
        if got == b"":
            eof.set()

    async with raw_server(handler) as (url, _):
        p = provider(url)
        gen = p.stream(Request(MESSAGES))
        seen = []
        async for ev in gen:
            seen.append(ev)
            if len(seen) == 3:
                break
        await gen.aclose()  # what `async with aclosing(...)` / the finalizer does
        await asyncio.wait_for(eof.wait(), 5)
        await p.aclose()
    assert not timed_out
    assert [type(ev) for ev in seen] == [Connected, TextDelta, TextDelta]


async def test_cancelling_the_task_closes_the_connection_to_the_server():
    async with chat_server(replay=LONG_ANSWER, rate=200) as server:
        p = provider(server.base_url)
        got: list[Event] = []
        three = asyncio.Event()

        async def consume() -> None:
            async for ev in p.stream(Request(MESSAGES)):
                got.append(ev)
                if len(got) >= 3:
                    three.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(three.wait(), 10)
        await eventually(lambda: len(server.http._connections) == 1, what="the connection")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # the server notices the hang-up and ends its side long before the ~15 s answer
        await eventually(lambda: not server.http._connections, timeout=5,
                         what="the server to see the connection closed")
        await p.aclose()
    assert not any(type(ev) is Done for ev in got)  # no Done after a cancel
    assert len(server.stats.requests) == 1


# ---------------------------------------------------------------------------------------------
# 11. what goes on the wire


def recording(server: ChatServer) -> list[HttpRequest]:
    """Wrap the real server's handler to keep each request as it arrived (headers too)."""
    seen: list[HttpRequest] = []
    inner = server.http.handler

    async def handler(req: HttpRequest) -> HttpResponse:
        seen.append(req)
        return await inner(req)

    server.http.handler = handler
    return seen


async def test_request_body_and_bearer_header():
    async with chat_server(replay="ok") as server:
        seen = recording(server)
        events = await collect(provider(server.base_url, key=KEY))
    assert text_of(events) == "ok"
    req = seen[0]
    assert req.method == "POST" and req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert "text/event-stream" in req.headers["accept"]
    assert req.headers["content-type"].startswith("application/json")
    body = json.loads(req.body)
    assert body == {"model": "test-model", "messages": MESSAGES, "stream": True,
                    "stream_options": {"include_usage": True}}
    assert server.stats.bodies == [body]


@pytest.mark.parametrize("key", [None, ""])
async def test_no_authorization_header_without_a_key(key):
    async with chat_server(replay="ok") as server:
        seen = recording(server)
        events = await collect(provider(server.base_url, key=key))
    assert text_of(events) == "ok"
    assert "authorization" not in seen[0].headers


async def test_request_options_reach_the_body():
    req = Request(MESSAGES, model="other-model", max_tokens=64, temperature=0.2,
                  prediction="def total(items):\n")
    async with chat_server(replay="ok") as server:
        events = await collect(provider(server.base_url.rstrip("/") + "/"), req)
    assert text_of(events) == "ok"
    body = server.stats.bodies[0]
    assert body["model"] == "other-model"
    assert body["max_tokens"] == 64 and body["temperature"] == 0.2
    assert body["prediction"] == {"type": "content", "content": "def total(items):\n"}
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


async def test_one_provider_serves_several_requests():
    async with chat_server(replay=["first answer", "second answer"]) as server:
        p = provider(server.base_url)
        a = [ev async for ev in p.stream(Request(MESSAGES))]
        b = [ev async for ev in p.stream(Request(MESSAGES + [{"role": "user", "content": "more"}]))]
        await p.aclose()
    assert text_of(a) == "first answer" and text_of(b) == "second answer"
    assert a[-1].finish_reason == b[-1].finish_reason == "stop"
    assert len(server.stats.bodies[1]["messages"]) == 3


# ---------------------------------------------------------------------------------------------
# 12. the embedded model


@pytest.mark.model
def test_local_model_streams_text_and_is_loaded_once():
    """The in-process back-end `steer serve` runs (providers/local.py), driven in a child
    process: the events a stream yields, and the model loaded once per process."""
    facts, _ = run_isolated(r"""
import asyncio, json
from app.core.events import Connected, Done, Error, TextDelta, Usage
from app.core.provider import Request
from app.providers import local

path = local.default_model_path()
p = local.LocalModel()
async def go():
    return [ev async for ev in p.stream(Request([{"role": "user", "content": "Say hello."}],
                                                max_tokens=4))]
events = asyncio.run(go())
kinds = [type(ev).__name__ for ev in events]
usage = next(ev for ev in events if type(ev) is Usage)
cached = local._models[(path, p.n_ctx)]
print(json.dumps({
    "path_ok": p.model_path == path, "kinds": kinds,
    "deltas": sum(type(ev) is TextDelta for ev in events),
    "text": "".join(ev.text for ev in events if type(ev) is TextDelta),
    "usage": [usage.prompt, usage.completion], "finish": events[-1].finish_reason,
    "same_instance": local.load(path, p.n_ctx) is cached,
    "second_path_ok": local.LocalModel().model_path == path}))
""")
    kinds = facts["kinds"]
    assert "Error" not in kinds, facts
    assert 1 <= facts["deltas"] <= 4 and facts["text"], facts
    prompt, completion = facts["usage"]
    assert prompt > 0 and completion == facts["deltas"]
    assert kinds[-1] == "Done" and facts["finish"] in ("stop", "length")
    assert kinds.index("Connected") < kinds.index("TextDelta")
    # the loaded model is cached per process: loading again (a second provider, `steer
    # serve`'s warm-up) returns the very same Llama instead of reading the GGUF again
    assert facts["same_instance"] and facts["path_ok"] and facts["second_path_ok"]


@pytest.mark.model
def test_loading_the_model_never_redirects_the_terminal():
    """llama-cpp-python silences a load by pointing fds 1 and 2 at /dev/null, process-wide:
    the TUI drawing from another thread meanwhile would lose its output. steer's load
    neither redirects nor prints llama.cpp's loader chatter (checked in a child process:
    its own stdout and stderr are what would reach the terminal)."""
    facts, output = run_isolated(r"""
import json, os, sys
from app.providers import local

calls = []
real_dup2 = os.dup2
os.dup2 = lambda *a, **k: (calls.append(a), real_dup2(*a, **k))[1]
stdout, stderr = sys.stdout, sys.stderr
llm, _, _ = local.load(local.default_model_path(), n_ctx=512)
same = sys.stdout is stdout and sys.stderr is stderr
llm.close()
sys.stdout.flush()
print(json.dumps({"dup2_calls": len(calls), "same_streams": same}))
""")
    assert facts == {"dup2_calls": 0, "same_streams": True}
    assert "llama_model_loader" not in output and "print_info" not in output, output[:2000]
