"""Retries are never silent, and an error says what to do: the three HTTP transports (Chat
Completions SSE, the Responses WebSocket, its SSE fallback) against the project's own
loopback server with injected faults, then the session and the texts both front-ends show
(a retry's countdown, a stall's "no data for N s")."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import time
from collections.abc import AsyncIterator
from email.utils import formatdate

import pytest
from conftest import init_repo

from app.core.conversation import retries
from app.core.conversation.session import Session
from app.core.disk.workspace import Workspace
from app.core.events import Done, Error, Event, Retrying, TextDelta
from app.core.provider import Provider, Request
from app.providers import http_stream
from app.providers.openai_chat import OpenAIChat
from app.providers.openai_responses import OpenAIResponses
from app.server.chat_server import ChatServer
from app.server.generation import Faults, split_tokens
from app.view.frames import FrameSync
from app.view.status import STALL_SHOWN, answer_title, status_text

KEY = "sk-test-4c1f0e9d8b7a6f5e4d3c"
MESSAGES = [{"role": "user", "content": "Fix the off-by-one in total()."}]
ANSWER = "The loop stops one item early.\n\nNothing else changes.\n"
TRANSPORTS = ["chat", "responses-ws", "responses-sse"]


@contextlib.asynccontextmanager
async def serve(**kw: object) -> AsyncIterator[ChatServer]:
    kw.setdefault("replay", ANSWER)
    server = ChatServer(**kw)  # type: ignore[arg-type]
    await server.start()
    try:
        yield server
    finally:
        await server.close()


def provider(transport: str, base_url: str, **kw: object) -> Provider:
    kw.setdefault("stall_timeout", 5.0)
    kw.setdefault("connect_timeout", 5.0)
    if transport == "chat":
        p: Provider = OpenAIChat(base_url, "m", KEY, **kw)  # type: ignore[arg-type]
    else:
        p = OpenAIResponses(base_url, "m", KEY, transport=transport.split("-")[1], **kw)  # type: ignore[arg-type]
    p.key_env = "MY_GATEWAY_KEY"
    return p


def sent(server: ChatServer, transport: str) -> int:
    """Requests the server saw: over the WebSocket, the upgrades it refused plus the
    `response.create` frames (a spare socket opened meanwhile asks for nothing)."""
    if transport == "responses-ws":
        creates = [b for b in server.stats.bodies if b.get("type") == "response.create"]
        return len(server.stats.headers) - server.stats.upgrades + len(creates)
    return len(server.stats.headers)


async def collect(p: Provider, server: ChatServer | None = None, transport: str = "chat"
                  ) -> tuple[list[Event], list[int]]:
    """The events, and for each Retrying the number of requests the server had seen when it
    arrived, so a retry is proven announced before the request it announces."""
    events: list[Event] = []
    seen: list[int] = []
    async for ev in p.stream(Request(MESSAGES)):
        events.append(ev)
        if type(ev) is Retrying and server is not None:
            seen.append(sent(server, transport))
    await p.aclose()
    return events, seen


def retries_of(events: list[Event]) -> list[Retrying]:
    return [ev for ev in events if type(ev) is Retrying]


def error_of(events: list[Event]) -> Error:
    err, done = events[-2], events[-1]
    assert type(err) is Error and type(done) is Done and done.finish_reason == "error", events[-3:]
    return err


# -- the providers ---------------------------------------------------------------------------
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_500_is_retried_at_most_retries_times_and_each_retry_is_announced_first(
        transport, waits):
    async with serve(faults=Faults(status=500)) as server:
        waits.seen = lambda: sent(server, transport)
        events, seen = await collect(provider(transport, server.base_url, retries=2), server,
                                     transport)
        assert sent(server, transport) == 3  # the first request and 2 retries, no more
    rs = retries_of(events)
    assert [(r.attempt, r.attempts, r.reason) for r in rs] == [(2, 3, "HTTP 500"), (3, 3, "HTTP 500")]
    assert [r.delay for r in rs] == [0.5, 1.0]  # backoff: the server gave no Retry-After
    assert seen == [1, 2]  # announced before the request it announces
    # and before its wait, not after it: each wait (as announced) began with the same
    # requests sent, and the request it delays came after it
    assert waits == [(0.5, 1), (1.0, 2)]
    err = error_of(events)
    assert err.kind == "http" and err.retryable
    assert "HTTP 500" in err.message and "(3 attempts)" in err.message
    assert "injected failure" in err.message and "retry" in err.message


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_500_that_passes_is_one_announced_retry_and_the_whole_answer(transport):
    async with serve(faults=Faults(status=500, fail_first=1)) as server:
        events, seen = await collect(provider(transport, server.base_url), server, transport)
        assert sent(server, transport) == 2
    assert [(r.attempt, r.reason) for r in retries_of(events)] == [(2, "HTTP 500")]
    assert seen == [1]
    assert "".join(ev.text for ev in events if type(ev) is TextDelta) == ANSWER
    assert events[-1] == Done("stop") and not any(type(ev) is Error for ev in events)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_retry_after_is_the_announced_wait_and_is_waited(transport, waits):
    async with serve(faults=Faults(status=429, retry_after=0.4, fail_first=1)) as server:
        waits.seen = lambda: sent(server, transport)
        events, _ = await collect(provider(transport, server.base_url), server, transport)
        assert sent(server, transport) == 2
    [r] = retries_of(events)
    assert (r.reason, r.delay) == ("HTTP 429", 0.4)  # the server's wish, not the backoff
    assert waits == [(0.4, 1)]  # waited so, after the refusal and before the request again
    assert events[-1] == Done("stop")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_server_asking_for_a_long_wait_is_not_retried_and_says_how_long(transport):
    async with serve(faults=Faults(status=429, retry_after=60)) as server:
        events, _ = await collect(provider(transport, server.base_url, retries=2), server,
                                  transport)
        assert sent(server, transport) == 1  # no automatic retry into a 60 s wait
    assert retries_of(events) == []
    err = error_of(events)
    assert err.kind == "rate_limit" and "Rate limited: wait 60 s, then retry" in err.message


async def test_an_error_event_on_the_socket_is_retried_visibly():
    async with serve(faults=Faults(error_event=500, fail_first=1)) as server:
        events, _ = await collect(provider("responses-ws", server.base_url), server)
        creates = [b for b in server.stats.bodies if b.get("type") == "response.create"]
        assert len(creates) == 2
    assert [(r.attempt, r.reason) for r in retries_of(events)] == [(2, "HTTP 500")]
    assert events[-1] == Done("stop")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_refused_key_is_not_retried_and_names_the_variable_to_check(transport):
    async with serve(faults=Faults(status=401)) as server:
        events, _ = await collect(provider(transport, server.base_url, retries=2), server,
                                  transport)
        assert sent(server, transport) == 1
    assert retries_of(events) == []
    err = error_of(events)
    assert err.kind == "auth" and not err.retryable
    assert "HTTP 401" in err.message and "Check the API key in $MY_GATEWAY_KEY" in err.message
    assert KEY not in err.message


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_refused_connection_is_retried_visibly_then_says_what_to_do(transport):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nobody listens there once the block ends
    events, _ = await collect(provider(transport, f"http://127.0.0.1:{port}/v1", retries=1))
    assert [(r.attempt, r.attempts, r.reason) for r in retries_of(events)] == [
        (2, 2, "connection refused")]
    err = error_of(events)
    assert err.kind == "network" and "connection refused" in err.message
    assert "(2 attempts)" in err.message and "Is the server running?" in err.message


def test_retry_after_in_seconds_an_http_date_or_milliseconds():
    assert http_stream.server_wait({"Retry-After": "7"}) == 7.0
    assert http_stream.server_wait({"retry-after-ms": "250"}) == 0.25
    assert http_stream.server_wait({"Retry-After": "-3"}) == 0.0
    assert http_stream.server_wait({}) is None and http_stream.server_wait({"Retry-After": "soon"}) is None
    later = http_stream.server_wait({"Retry-After": formatdate(time.time() + 30, usegmt=True)})
    assert later is not None and 27 < later <= 30
    assert http_stream.delay(None, 2) == 2.0 and http_stream.delay(3.0, 0) == 3.0
    assert http_stream.delay(http_stream.MAX_WAIT + 1, 0) is None


# -- the session and the texts ---------------------------------------------------------------
@pytest.fixture
def ws(tmp_path) -> Workspace:
    return Workspace(init_repo(tmp_path / "r", {"f.txt": "one\ntwo\n"}))


async def test_the_turn_shows_each_retry_counting_down_then_how_many_there_were(ws):
    async with serve(faults=Faults(status=503, fail_first=2)) as server:
        session = Session(ws, provider("chat", server.base_url, retries=2), fmt="search_replace")
        sync = FrameSync(session)
        turn = session.start("fix it")
        titles, lines = [], []
        while session.streaming:
            f = sync.take()
            lines += [p.text for p in f.answer if p.line]
            titles.append(answer_title(turn, session))
            await asyncio.sleep(0.05)
        f = sync.take(force_status=True)
        lines += [p.text for p in f.answer if p.line]
        assert len(server.stats.requests) == 3
    assert turn.complete and [r.reason for r in turn.retries] == ["HTTP 503", "HTTP 503"]
    assert any(re.search(r"^Conversation · retrying 2/3 in [\d.]+ s · Esc to stop · HTTP 503 · ", t)
               for t in titles)
    assert any("retrying 3/3 in " in t for t in titles)
    # every retry stays in the conversation, where it happened, before the answer
    assert lines[1:3] == ["↻ HTTP 503: retrying 2/3 in 0.5 s", "↻ HTTP 503: retrying 3/3 in 1 s"]
    assert "2 retries (HTTP 503)" in answer_title(turn, session)
    assert "retrying" not in answer_title(turn, session)


async def test_a_stall_shows_no_data_for_n_seconds_counting_up_then_goes_away(ws):
    # paced from the start: 6 s in all, so text still streams for a while after the stall
    answer = "word " * 300
    faults = Faults(stall_after=3, stall_seconds=STALL_SHOWN + 1.6)
    async with serve(replay=answer, faults=faults, rate=50) as server:
        p = provider("chat", server.base_url)
        session = Session(ws, p, fmt="search_replace")
        turn = session.start("fix it")
        seen: list[str] = []
        while session.streaming:
            seen.append(answer_title(turn, session))
            seen.append(status_text(p, turn))
            await asyncio.sleep(0.1)
    stalled = [t for t in seen if "no data for" in t]
    assert any(t.startswith("Conversation · no data for 3 s · Esc to stop · ") for t in stalled)
    assert any(t.startswith("openai-chat:m · streaming · no data for ") for t in stalled)  # steer run
    assert any("no data for 4 s" in t for t in stalled)  # it counts up
    last = max(i for i, t in enumerate(seen) if "no data for" in t)
    assert any("streaming" in t and "no data" not in t for t in seen[last + 1:])  # data again
    assert turn.complete and turn.deltas == len(split_tokens(answer))
    assert "no data" not in answer_title(turn, session)  # an ended answer waits for nothing


async def test_a_failed_request_is_kept_out_of_the_conversation_and_a_retry_resends_it(ws):
    async with serve(faults=Faults(status=401, fail_first=1)) as server:
        session = Session(ws, provider("chat", server.base_url, retries=0), fmt="search_replace",
                          context=["f.txt"])
        failed = await session.ask("add a line")
        assert failed.state == "error" and failed.failed and session.failed is failed
        assert session.sent.history == []  # the model never saw it
        again = retries.retry_failed(session)
        assert again is not None and again is not failed and again.instruction == "add a line"
        await session.wait()
        assert again.complete and session.failed is None
        assert retries.retry_failed(session) is None  # nothing failed: nothing to resend
        bodies = server.stats.bodies
    assert len(bodies) == 2 and bodies[0]["messages"] == bodies[1]["messages"]


async def test_an_answer_that_failed_mid_way_is_not_a_failed_request(ws):
    async with serve(replay="word " * 50, faults=Faults(drop_after=10)) as server:
        session = Session(ws, provider("chat", server.base_url), fmt="search_replace")
        turn = await session.ask("explain")
    assert turn.state == "error" and turn.deltas == 10
    assert not turn.failed and session.failed is None and retries.retry_failed(session) is None


def test_the_factory_names_the_variable_the_key_comes_from(monkeypatch):
    from app.config import Settings
    from app.providers.factory import build_provider

    monkeypatch.delenv("STEER_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    p = build_provider(Settings(provider="openai", model="gpt-5"))
    assert p.key_env == "OPENAI_API_KEY"
    monkeypatch.setenv("STEER_API_KEY", KEY)  # it overrides the preset's: name that one
    assert build_provider(Settings(provider="openai", model="gpt-5")).key_env == "STEER_API_KEY"
    monkeypatch.delenv("STEER_API_KEY")
    p = build_provider(Settings(base_url="http://127.0.0.1:9/v1", model="m",
                                api_key_env="MY_GATEWAY_KEY"))
    assert p.key_env == "MY_GATEWAY_KEY"
