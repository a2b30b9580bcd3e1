"""The Responses API over a persistent WebSocket, end to end: the openai-responses provider
against the project's own `steer serve` (ChatServer) on 127.0.0.1 speaking the real protocol,
with injected faults; native steering through the Session; the SSE fallback; every frame
checked against the event models of the official `openai` package."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from conftest import init_repo

from app.core.conversation.session import Session
from app.core.disk.workspace import Workspace
from app.core.events import Connected, Done, Error, Event, Retrying, TextDelta, Usage
from app.core.provider import Capabilities, Request
from app.providers import ws_pool
from app.providers.openai_responses import OpenAIResponses, ws_url
from app.server.chat_server import ChatServer, ServerThread
from app.server.generation import Faults, split_tokens

KEY = "sk-test-9d2c4e6f8a0b1c3d5e7f"
MESSAGES = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Fix the off-by-one in total()."}]
ANSWER = ("The loop stops one item early.\n\ncalc.py\n<<<<<<< SEARCH\n"
          "    for i in range(len(items) - 1):\n=======\n    for i in range(len(items)):\n"
          ">>>>>>> REPLACE\n\nNow the last item counts (naïve ✓).\n")
TOKENS = split_tokens(ANSWER)
LONG = "word " * 3000


@contextlib.asynccontextmanager
async def serve(**kw: object) -> AsyncIterator[ChatServer]:
    kw.setdefault("replay", ANSWER)
    kw.setdefault("token", KEY)
    server = ChatServer(**kw)  # type: ignore[arg-type]
    await server.start()
    try:
        yield server
    finally:
        await server.close()


def provider(server: ChatServer, key: str | None = KEY, **kw: object) -> OpenAIResponses:
    kw.setdefault("stall_timeout", 5.0)
    kw.setdefault("connect_timeout", 5.0)
    return OpenAIResponses(server.base_url, "test-model", key, **kw)  # type: ignore[arg-type]


async def collect(p: OpenAIResponses, req: Request | None = None, *, close: bool = True) -> list[Event]:
    events = [ev async for ev in p.stream(req or Request(MESSAGES))]
    if close:
        await p.aclose()
    return events


def text_of(events: list[Event]) -> str:
    return "".join(ev.text for ev in events if type(ev) is TextDelta)


def ends_with_error(events: list[Event], kind: str) -> Error:
    err, done = events[-2], events[-1]
    assert type(err) is Error and err.kind == kind, events[-3:]
    assert type(done) is Done and done.finish_reason == "error"
    assert sum(type(ev) is Done for ev in events) == 1
    assert err.message.strip()
    return err


def creates(server: ChatServer) -> list[dict]:
    return [b for b in server.stats.bodies if b.get("type") == "response.create"]


async def eventually(cond, timeout: float = 5.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or cond}")
        await asyncio.sleep(0.005)


# ---------------------------------------------------------------------------------------------
# the normal path


def test_ws_url():
    assert ws_url("https://api.openai.com/v1") == "wss://api.openai.com/v1/responses"
    assert ws_url("http://127.0.0.1:8765/v1/") == "ws://127.0.0.1:8765/v1/responses"


async def test_a_warm_socket_carries_the_request_and_the_answer_is_exact():
    async with serve() as server:
        p = provider(server)
        await p.warm()
        assert server.stats.upgrades == 1 and server.stats.requests == []  # opened, nothing sent
        events = await collect(p)
    assert text_of(events) == ANSWER
    assert [ev.text for ev in events if type(ev) is TextDelta] == TOKENS
    assert events[0] == Connected() and sum(type(ev) is Connected for ev in events) == 1
    assert [ev for ev in events if type(ev) is Usage] == [Usage(0, len(TOKENS))]
    assert events[-1] == Done("stop")
    body = creates(server)[0]
    assert "stream" not in body and "previous_response_id" not in body
    assert body["instructions"] == "You are terse." and body["model"] == "test-model"
    assert body["input"] == [{"type": "message", "role": "user", "content": MESSAGES[1]["content"]}]
    assert server.stats.headers[0]["authorization"] == f"Bearer {KEY}"


async def test_a_follow_up_sends_only_the_new_input_with_previous_response_id():
    async with serve(replay=["first answer", "second answer", "third", "fourth"]) as server:
        p = provider(server)
        a = await collect(p, close=False)
        follow = [*MESSAGES, {"role": "assistant", "content": "first answer"},
                  {"role": "user", "content": "and the tests?"}]
        b = await collect(p, Request(follow), close=False)
        # a history the model did not write (an edited answer): the full context again
        edited = [*MESSAGES, {"role": "assistant", "content": "first answer, edited"},
                  {"role": "user", "content": "go on"}]
        c = await collect(p, Request(edited), close=False)
        # other instructions: full context (they are never carried over)
        other = [{"role": "system", "content": "Be verbose."}, *follow[1:]]
        d = await collect(p, Request(other))
        bodies = creates(server)
    assert [text_of(x) for x in (a, b, c, d)] == ["first answer", "second answer", "third", "fourth"]
    assert "previous_response_id" not in bodies[0]
    assert bodies[1]["previous_response_id"].startswith("resp_")
    assert bodies[1]["input"] == [{"type": "message", "role": "user", "content": "and the tests?"}]
    assert "previous_response_id" not in bodies[2] and len(bodies[2]["input"]) == 3
    assert "previous_response_id" not in bodies[3] and len(bodies[3]["input"]) == 3


async def test_previous_response_not_found_resends_in_full_without_the_id():
    async with serve(replay=["one", "two"], faults=Faults(forget_previous=True)) as server:
        p = provider(server)
        await collect(p, close=False)
        follow = [*MESSAGES, {"role": "assistant", "content": "one"},
                  {"role": "user", "content": "more"}]
        events = await collect(p, Request(follow))
        bodies = creates(server)
    assert text_of(events) == "two" and events[-1] == Done("stop")
    assert not any(type(ev) is Error for ev in events)
    assert len(bodies) == 3
    assert "previous_response_id" in bodies[1] and len(bodies[1]["input"]) == 1
    assert "previous_response_id" not in bodies[2] and len(bodies[2]["input"]) == 3


async def test_the_connection_limit_error_opens_a_new_socket_and_continues():
    async with serve(replay=["one", "two"], faults=Faults(connection_limit=1)) as server:
        p = provider(server)
        await collect(p, close=False)
        follow = [*MESSAGES, {"role": "assistant", "content": "one"},
                  {"role": "user", "content": "more"}]
        events = await collect(p, Request(follow))
        bodies = creates(server)
    assert text_of(events) == "two" and events[-1] == Done("stop")
    assert "previous_response_id" not in bodies[-1] and len(bodies[-1]["input"]) == 3


async def test_a_socket_is_retired_before_the_servers_60_minute_limit(monkeypatch):
    async with serve(replay=["one", "two"]) as server:
        p = provider(server)
        await collect(p, close=False)
        await eventually(lambda: len(p.pool.idle) == 2, what="the spare socket")
        opened = server.stats.upgrades
        monkeypatch.setattr(ws_pool, "MAX_SOCKET_AGE", 0.0)  # every socket is too old
        events = await collect(p)
        assert server.stats.upgrades > opened
    assert text_of(events) == "two"


async def test_two_answers_at_once_never_share_a_socket():
    async with serve(replay=LONG, rate=3000) as server:
        p = provider(server)
        a, b = await asyncio.gather(collect(p, close=False), collect(p, close=False))
        await p.aclose()
    assert text_of(a) == text_of(b) == LONG
    assert server.stats.upgrades >= 2


# ---------------------------------------------------------------------------------------------
# the SSE fallback


@pytest.mark.parametrize("key", [KEY, None])
async def test_a_refused_upgrade_426_falls_back_to_sse(key):
    async with serve(websocket=False, token=key) as server:
        p = provider(server, key=key)
        await p.warm()  # the upgrade fails quietly; the request finds out
        events = await collect(p, close=False)
        again = await collect(p)
        assert server.stats.upgrades == 0
    assert p.use_sse
    assert text_of(events) == text_of(again) == ANSWER
    assert events[-1] == Done("stop") and events[0] == Connected()


async def test_sse_fallback_reports_a_drop_as_incomplete():
    async with serve(websocket=False, faults=Faults(drop_after=5)) as server:
        events = await collect(provider(server))
    assert text_of(events) == "".join(TOKENS[:5])
    ends_with_error(events, "network")


# ---------------------------------------------------------------------------------------------
# faults


async def test_a_drop_mid_answer_is_a_network_error_and_not_retried():
    async with serve(faults=Faults(drop_after=7)) as server:
        events = await collect(provider(server))
        assert len(creates(server)) == 1  # tokens were shown: no silent resend
    assert text_of(events) == "".join(TOKENS[:7])
    err = ends_with_error(events, "network")
    assert err.retryable and "incomplete" in err.message and "1006" in err.message


async def test_a_stall_is_a_stall_error_after_the_idle_timeout():
    async with serve(faults=Faults(stall_after=4, stall_seconds=60)) as server:
        events = await collect(provider(server, stall_timeout=0.3))
    assert text_of(events) == "".join(TOKENS[:4])
    err = ends_with_error(events, "stall")
    assert "0.3 s" in err.message


@pytest.mark.parametrize("code,reason_word", [(1011, "internal server error"),
                                              (1001, "going away"), (4000, "closed")])
async def test_the_server_closing_with_a_code_says_which(code, reason_word):
    async with serve(faults=Faults(close_after=3, close_code=code)) as server:
        events = await collect(provider(server))
    assert text_of(events) == "".join(TOKENS[:3])
    err = ends_with_error(events, "network")
    assert f"code {code}" in err.message and reason_word in err.message
    assert "injected close" in err.message


async def test_a_malformed_frame_is_a_protocol_error():
    async with serve(faults=Faults(malformed_after=4)) as server:
        events = await collect(provider(server))
    assert text_of(events) == "".join(TOKENS[:4])
    err = ends_with_error(events, "protocol")
    assert "malformed" in err.message and "response.output_text.delta" in err.message


@pytest.mark.parametrize("status,kind", [(401, "auth"), (403, "auth")])
async def test_an_auth_refusal_of_the_upgrade_is_not_retried(status, kind):
    async with serve(faults=Faults(status=status)) as server:
        events = await collect(provider(server, retries=2))
        assert len(server.stats.headers) == 1
    err = ends_with_error(events, kind)
    assert str(status) in err.message and not err.retryable
    assert KEY not in err.message


async def test_a_wrong_token_is_refused_with_401_and_the_key_is_never_logged(caplog):
    caplog.set_level(logging.DEBUG)  # even with every logger at DEBUG
    async with serve(token="the-right-token-0123456789abcdefghij") as server:
        events = await collect(provider(server))
        refused = server.stats.refused[0]  # refused by the HTTP server, before the rest
        assert refused["status"] == 401 and refused["headers"]["authorization"] == f"Bearer {KEY}"
        assert server.stats.headers == []  # nothing past the token was stored
    err = ends_with_error(events, "auth")
    assert "401" in err.message
    assert KEY not in caplog.text and KEY not in repr(events)


def requests_seen(server: ChatServer) -> int:
    """Upgrades refused plus `response.create` frames (a spare socket asks for nothing)."""
    return len(server.stats.headers) - server.stats.upgrades + len(creates(server))


async def test_429_on_the_upgrade_honours_retry_after_then_succeeds(waits):
    async with serve(faults=Faults(status=429, retry_after=0.4, fail_first=1)) as server:
        waits.seen = lambda: requests_seen(server)
        events = await collect(provider(server))
        assert requests_seen(server) == 2
    assert text_of(events) == ANSWER and not any(type(ev) is Error for ev in events)
    assert waits == [(0.4, 1)]  # as the server asked: after its refusal, before the retry


async def test_503_on_the_upgrade_is_retried():
    async with serve(faults=Faults(status=503, fail_first=1)) as server:
        events = await collect(provider(server, retries=1))
    assert text_of(events) == ANSWER


async def test_429_forever_is_a_rate_limit_error():
    async with serve(faults=Faults(status=429, retry_after=0)) as server:
        events = await collect(provider(server, retries=1))
    err = ends_with_error(events, "rate_limit")
    assert err.retryable and "429" in err.message


async def test_a_429_error_event_honours_its_retry_after_header_then_succeeds(waits):
    async with serve(faults=Faults(error_event=429, retry_after=0.3, fail_first=1)) as server:
        waits.seen = lambda: len(creates(server))
        events = await collect(provider(server))
        assert len(creates(server)) == 2
    assert text_of(events) == ANSWER
    assert waits == [(0.3, 1)]  # after the refused answer, before it is asked again


@pytest.mark.parametrize("status,kind", [(401, "auth"), (500, "http")])
async def test_an_error_event_is_reported(status, kind):
    async with serve(faults=Faults(error_event=status)) as server:
        events = await collect(provider(server, retries=1))
    err = ends_with_error(events, kind)
    assert "injected failure" in err.message


async def test_a_stale_socket_closed_by_the_server_is_replaced_without_losing_the_request():
    async with serve(replay=["one", "two"]) as server:
        p = provider(server)
        await collect(p, close=False)
        await eventually(lambda: len(p.pool.idle) == 2, what="the spare socket")
        await server.http.close()  # the server restarts: every open socket is dropped
        await server.http.start()
        events = await collect(p)
    assert text_of(events) == "two" and events[-1] == Done("stop")


async def test_cancelling_closes_the_socket_and_the_server_stops_generating():
    async with serve(replay=LONG, rate=500) as server:
        p = provider(server)
        got: list[Event] = []
        three = asyncio.Event()

        async def consume() -> None:
            async for ev in p.stream(Request(MESSAGES)):
                got.append(ev)
                if len(got) >= 3:
                    three.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(three.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await eventually(lambda: server.stats.stopped, what="the server to stop generating")
        await p.aclose()
    assert not any(type(ev) is Done for ev in got)


# ---------------------------------------------------------------------------------------------
# the Session: native steering, its fallback, Esc


def calc_repo(tmp_path: Path) -> Workspace:
    root = init_repo(tmp_path / "r", {"calc.py": "def total(items):\n    return 0\n"})
    return Workspace(root)


async def test_native_steer_cuts_the_answer_and_the_successor_streams_on_the_same_socket(tmp_path):
    second = ("Sure, changing course.\n\ncalc.py\n<<<<<<< SEARCH\n    return 0\n=======\n"
              "    return sum(items)\n>>>>>>> REPLACE\n")  # an open hunk: the next is a follow-up
    async with serve(replay=[LONG, second, "third"], rate=400, record_frames=True) as server:
        p = provider(server)
        await p.warm()
        session = Session(calc_repo(tmp_path), p, fmt="search_replace", context=["calc.py"])
        old = session.start("annotate everything")
        await eventually(lambda: old.deltas >= 5, what="the answer to stream")
        upgrades = server.stats.upgrades
        turn = session.redirect("stop, just fix total()")
        assert turn.kind == "redirect"
        await session.wait()
        assert server.stats.upgrades == upgrades  # no new connection
        assert len(creates(server)) == 1  # the successor needed no request
        steers = [json.loads(t) for d, t in server.stats.frames
                  if d == "in" and json.loads(t)["type"] == "response.steer"]
        # a follow-up continues from the successor with only the new input
        follow = session.start("thanks")
        await session.wait()
        bodies = creates(server)
        out = [json.loads(t) for d, t in server.stats.frames if d == "out"]
        await p.aclose()
    assert old.state == "interrupted" and old.finish_reason == "steered"
    assert 5 <= old.deltas < len(split_tokens(LONG))
    assert session.turns == [old, turn, follow]
    assert turn.text == second and turn.complete
    assert turn.steered_at == old.size == len(old.text)
    assert len(steers) == 1
    assert steers[0]["input"][0]["role"] == "user" and "stop, just fix total()" in \
        steers[0]["input"][0]["content"]
    # the steered answer ended incomplete/steered; its successor points back at it
    incomplete = [e for e in out if e["type"] == "response.incomplete"]
    assert incomplete[0]["response"]["incomplete_details"]["reason"] == "steered"
    created = [e["response"] for e in out if e["type"] == "response.created"]
    assert created[1]["previous_response_id"] == steers[0]["previous_response_id"] == created[0]["id"]
    assert follow.text == "third"
    assert bodies[1]["previous_response_id"] == created[1]["id"]
    assert [m["content"] for m in bodies[1]["input"]][-1].endswith("thanks")
    # the model saw exactly what the user saw: the cut answer, then the steer
    assert session.sent.history[1]["content"] == old.text


async def test_a_refused_steer_falls_back_to_resending_on_the_spare_socket(tmp_path):
    async with serve(replay=[LONG, "resent answer"], rate=400, steering=False) as server:
        p = provider(server)
        await p.warm()
        session = Session(calc_repo(tmp_path), p, fmt="search_replace", context=["calc.py"])
        old = session.start("annotate everything")
        await eventually(lambda: old.deltas >= 5, what="the answer to stream")
        await eventually(lambda: len(p.pool.idle) == 1, what="the spare socket")
        upgrades = server.stats.upgrades
        turn = session.redirect("stop")
        await session.wait()
        bodies = creates(server)
        await eventually(lambda: server.stats.stopped, what="the old generation to stop")
        spare_used = server.stats.upgrades == upgrades or len(bodies) == 2
        await p.aclose()
    assert spare_used
    assert old.state == "interrupted" and old.finish_reason == "cancelled"
    assert turn.text == "resent answer" and turn.steered_at is None
    assert len(bodies) == 2 and "previous_response_id" not in bodies[1]
    assert bodies[1]["input"][-2] == {"type": "message", "role": "assistant", "content": old.text}


async def test_esc_closes_the_socket_and_keeps_the_partial_answer(tmp_path):
    edit = ("calc.py\n<<<<<<< SEARCH\n    return 0\n=======\n    return sum(items)\n"
            ">>>>>>> REPLACE\n\n")
    async with serve(replay=edit + LONG, rate=400) as server:
        p = provider(server)
        await p.warm()
        session = Session(calc_repo(tmp_path), p, fmt="search_replace", context=["calc.py"])
        turn = session.start("fix it")
        await eventually(lambda: "REPLACE" in turn.text and turn.size > len(edit) + 10,
                         what="a complete edit")
        assert session.interrupt()
        assert turn.state == "interrupted"  # at once, not at the next tick
        await eventually(lambda: server.stats.stopped, what="the server to stop generating")
        await session.wait()
        await p.aclose()
    assert session.pending is not None and session.pending.hunks  # reviewable


# ---------------------------------------------------------------------------------------------
# the protocol, validated by the official openai package


async def test_every_frame_both_ways_matches_the_openai_models(tmp_path):
    pydantic = pytest.importorskip("pydantic")
    from openai.types.responses import ResponsesClientEvent, ResponsesServerEvent

    server_events = pydantic.TypeAdapter(ResponsesServerEvent)
    client_events = pydantic.TypeAdapter(ResponsesClientEvent)
    async with serve(replay=[LONG, "after the steer", "third"], rate=400, record_frames=True,
                     faults=Faults()) as server:
        p = provider(server)
        session = Session(calc_repo(tmp_path), p, fmt="search_replace", context=["calc.py"])
        old = session.start("go")
        await eventually(lambda: old.deltas >= 3)
        session.redirect("steer it")
        await session.wait()
        session.start("and a follow-up")
        await session.wait()
        await p.aclose()
        frames = list(server.stats.frames)
    async with serve(replay="x", record_frames=True, faults=Faults(forget_previous=True)) as s2:
        p = provider(s2)
        await collect(p, close=False)
        await collect(p, Request([*MESSAGES, {"role": "assistant", "content": "x"},
                                  {"role": "user", "content": "y"}]))
        frames += s2.stats.frames
    async with serve(replay="abc " * 20, record_frames=True, faults=Faults(error_event=429)) as s3:
        await collect(provider(s3, retries=0))
        frames += s3.stats.frames
    kinds = set()
    for direction, text in frames:
        obj = json.loads(text)
        kinds.add((direction, obj["type"]))
        adapter = server_events if direction == "out" else client_events
        adapter.validate_python(obj)  # raises on any shape the openai package rejects
    for needed in ("response.created", "response.in_progress", "response.output_text.delta",
                   "response.completed", "response.incomplete", "response.steer.accepted",
                   "error"):
        assert ("out", needed) in kinds, needed
    assert ("in", "response.create") in kinds and ("in", "response.steer") in kinds


async def test_the_client_accepts_what_the_openai_models_describe():
    """Events built by the openai package itself (not by steer's server) parse to the right
    provider events: the client does not merely agree with its own server."""
    from openai.types.responses import (
        Response,
        ResponseCompletedEvent,
        ResponseCreatedEvent,
        ResponseTextDeltaEvent,
    )

    resp = Response(id="resp_1", created_at=1.0, model="m", object="response", output=[],
                    parallel_tool_calls=True, tool_choice="auto", tools=[])
    frames = [ResponseCreatedEvent(response=resp, sequence_number=0, type="response.created"),
              ResponseTextDeltaEvent(content_index=0, delta="héllo", item_id="msg_1", logprobs=[],
                                     output_index=0, sequence_number=1,
                                     type="response.output_text.delta"),
              ResponseCompletedEvent(response=resp.model_copy(update={"status": "completed"}),
                                     sequence_number=2, type="response.completed")]
    p = OpenAIResponses("http://127.0.0.1:9/v1", "m")
    from app.providers.responses_answer import Answer as _Answer

    ans = _Answer()
    out: list[Event] = []
    for f in frames:
        events, done = p._on_event(json.loads(f.model_dump_json()), ans)
        out += events
    assert out == [Connected(), TextDelta("héllo")] and done and ans.finish == "stop"


# ---------------------------------------------------------------------------------------------
# steer serve as a process: the token, the registry, steer run over the WebSocket

STEER = [sys.executable, "-m", "app"]
SRC = "".join(f"line {i}\n" for i in range(1, 11))
RUN_ANSWER = "f.txt\n```\n<<<<<<< SEARCH\nline 3\n=======\nline three\n>>>>>>> REPLACE\n```\n"


def steer(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    e = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), **(env or {})}
    return subprocess.run([*STEER, *args], cwd=root, env=e, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("fault,code", [({}, 0), ({"drop_after": 5}, 3), ({"close_after": 5}, 3),
                                        ({"status": 401}, 3), ({"malformed_after": 3}, 3)])
def test_steer_run_with_openai_responses_end_to_end(tmp_path, fault, code):
    root = init_repo(tmp_path / "r", {"f.txt": SRC})
    with ServerThread(replay=RUN_ANSWER, token=KEY, faults=Faults(**fault)) as server:
        out = steer(root, "run", "edit it", "-f", "f.txt", "--provider", "openai-responses",
                    "--base-url", server.base_url, "--model", "m", "--format", "search_replace",
                    "--accept", "all", env={"STEER_API_KEY": KEY})
        assert server.stats.headers  # it went over the WebSocket upgrade
        assert not any(b.get("stream") for b in server.stats.bodies)
    assert out.returncode == code, out.stderr
    assert KEY not in out.stdout + out.stderr
    text = (root / "f.txt").read_text()
    assert text == (SRC.replace("line 3\n", "line three\n") if code == 0 else SRC)


def test_steer_serve_makes_a_private_token_and_refuses_requests_without_it(tmp_path):
    import httpx

    from app.providers import serve_registry

    proc = subprocess.Popen([*STEER, "serve", "--port", "0", "--replay", "/dev/stdin",
                             "--require-token"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    try:
        proc.stdin.write("ok")
        proc.stdin.close()
        line = proc.stdout.readline()
        url = line.strip().rsplit(" ", 1)[-1]
        state = serve_registry.state_file()
        assert stat.S_IMODE(state.stat().st_mode) == 0o600
        token = serve_registry.read()["token"]
        assert len(token) >= 32
        assert httpx.get(f"{url}/models").status_code == 401
        assert httpx.get(f"{url}/models", headers={"Authorization": "Bearer nope"}).status_code == 401
        ok = httpx.get(f"{url}/models", headers={"Authorization": f"Bearer {token}"})
        assert ok.status_code == 200
        assert serve_registry.token() == token  # kept, not remade
        os.chmod(state, 0o644)
        assert serve_registry.token() == token
        assert stat.S_IMODE(state.stat().st_mode) == 0o600  # narrowed again
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.model
async def test_local_goes_through_one_shared_steer_serve(tmp_path):
    from app.config import load_settings
    from app.providers import serve_registry
    from app.providers.factory import build_provider
    from app.providers.local_serve import ServedLocal

    a, b = build_provider(load_settings()), build_provider(load_settings())
    assert isinstance(a, ServedLocal) and a.capabilities.prefill
    assert a.capabilities.preferred_format == "whole"
    await asyncio.gather(a.warm(), b.warm())  # two at once start one server
    servers = serve_registry.read()["servers"]
    assert len(servers) == 1
    pid = next(iter(servers.values()))["pid"]
    req = Request([{"role": "user", "content": "Say hi."}], max_tokens=5, prefill="Hi")
    ev_a = [ev async for ev in a.stream(req)]
    ev_b = [ev async for ev in b.stream(req)]
    await a.aclose()
    await b.aclose()
    assert ev_a[-1].finish_reason in ("stop", "length") and text_of(ev_a)
    assert text_of(ev_a) == text_of(ev_b)  # greedy, same model, same prompt
    assert serve_registry.read()["servers"][a.model_path]["pid"] == pid
    # a third steer later finds it running (no new process)
    c = build_provider(load_settings())
    await c.warm()
    assert serve_registry.read()["servers"][a.model_path]["pid"] == pid
    await c.aclose()


@pytest.mark.model
async def test_native_steer_with_the_embedded_model(tmp_path, model_server):
    p = OpenAIResponses(model_server.base_url, "smollm2", model_server.token, stall_timeout=60,
                        capabilities=Capabilities(warm_up=True, prefill=True, native_steer=True,
                                                  cancel="close", preferred_format="whole"))
    session = Session(calc_repo(tmp_path), p, fmt="whole", context=["calc.py"], max_tokens=120)
    old = session.start("Rewrite total to sum the items, with a long docstring.")
    # (a loaded 2-core machine evaluates this prompt slowly: be patient, say what was seen)
    try:
        await eventually(lambda: old.deltas >= 3 or not old.live, timeout=240)
    except AssertionError:
        raise AssertionError(f"no tokens: {old.state} {old.text!r}") from None
    assert old.live, f"the answer ended before the redirect: {old.text!r}"
    turn = session.redirect("Actually, just return the length of items.")
    await session.wait()
    await p.aclose()
    assert old.finish_reason in ("steered", "stop")
    assert turn.steered_at == len(old.text)
    assert turn.error is None and turn.text.startswith("calc.py\n```python\n")


# ---------------------------------------------------------------------------------------------
# the TUI over the WebSocket


async def test_the_app_opens_the_socket_at_start_and_enter_while_streaming_steers(demo):
    from app.bench.demo import CALC_ANSWER, SUB_ANSWER
    from app.ui.app import SteerApp
    from app.ui.widgets.prompt import PromptInput

    async def until(pilot, cond, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            assert time.monotonic() < deadline, "timed out waiting for the app"
            await pilot.pause(0.02)

    async with serve(replay=[CALC_ANSWER + LONG, SUB_ANSWER], rate=400) as server:
        app = SteerApp(demo, provider(server), context=["calc.py"], watch_files=False, blink=False)
        async with app.run_test(size=(160, 48)) as pilot:
            await until(pilot, lambda: server.stats.upgrades >= 1)  # warm before any request
            assert server.stats.requests == []
            prompt = app.query_one(PromptInput)
            prompt.value = "add type hints"
            await pilot.press("enter")
            await until(pilot, lambda: app.session.turn.size > len(CALC_ANSWER) + 20)
            prompt.focus()
            prompt.value = "do sub instead"
            await pilot.press("enter")  # Enter while streaming: a redirect
            await until(pilot, lambda: len(app.session.turns) == 2
                        and app.session.turn.state == "done")
            first, second = app.session.turns
            stream_text = app.query_one("#stream").text
            await app.session.provider.aclose()
    assert first.finish_reason == "steered" and second.kind == "redirect"
    assert second.steered_at == len(first.text) and second.text == SUB_ANSWER
    assert len(creates(server)) == 1  # steered on the open socket, no second request
    assert "do sub instead" in stream_text
    assert "(steered: the model continues from where it was)" in stream_text  # where it landed


@pytest.mark.model
async def test_clients_of_the_model_are_served_in_arrival_order(model_server):
    """One generation at a time (one llama.cpp context), first come first served: a client
    that asks again right after its answer does not jump ahead of one already waiting."""
    ask = [{"role": "user", "content": "List ten fruits."}]
    a, b = (OpenAIResponses(model_server.base_url, "smollm2", model_server.token,
                            stall_timeout=300) for _ in range(2))
    await asyncio.gather(a.warm(), b.warm())
    first_token: dict[str, float] = {}

    async def run(p: OpenAIResponses, name: str) -> list[Event]:
        events = []
        async for ev in p.stream(Request(ask, max_tokens=12)):
            if type(ev) is TextDelta and name not in first_token:
                first_token[name] = time.perf_counter()
            events.append(ev)
        return events

    async def client_a() -> list[list[Event]]:
        one = await run(a, "a1")
        return [one, await run(a, "a2")]  # asks again at once

    async def client_b() -> list[Event]:
        await eventually(lambda: "a1" in first_token, timeout=240)  # a1 is generating
        return await run(b, "b")

    (a1, a2), b1 = await asyncio.gather(client_a(), client_b())
    await a.aclose()
    await b.aclose()
    for events in (a1, a2, b1):
        assert type(events[-1]) is Done and events[-1].finish_reason in ("stop", "length"), events[-2:]
    assert first_token["a1"] < first_token["b"] < first_token["a2"]


def test_local_with_a_broken_model_says_why_and_exits_3(tmp_path):
    root = init_repo(tmp_path / "r", {"f.txt": SRC})
    bad = tmp_path / "bad.gguf"
    bad.write_text("not a model")
    out = steer(root, "run", "edit it", "-f", "f.txt", "--model-path", str(bad), "-q")
    assert out.returncode == 3, out.stderr
    assert "cannot start" in out.stderr and "bad.gguf" in out.stderr
    assert "Traceback" not in out.stderr
    assert (root / "f.txt").read_text() == SRC


async def test_the_server_refuses_bad_events_and_the_connection_stays_usable():
    from websockets.asyncio.client import connect

    async def until_terminal(ws) -> list[dict]:
        got = []
        while True:
            got.append(json.loads(await asyncio.wait_for(ws.recv(), 5)))
            if got[-1]["type"] in ("error", "response.completed", "response.incomplete",
                                   "response.steer.failed", "response.steer.accepted"):
                return got

    async with serve(replay=[LONG, "ok"], rate=500) as server:
        url = ws_url(server.base_url)
        async with connect(url, additional_headers={"Authorization": f"Bearer {KEY}"}) as ws:
            await ws.send("{not json")
            assert (await until_terminal(ws))[-1]["error"]["code"] == "invalid_json"
            await ws.send(json.dumps({"type": "response.cancel"}))
            assert (await until_terminal(ws))[-1]["error"]["param"] == "type"
            await ws.send(json.dumps({"type": "response.create", "input": [{"type": "image"}]}))
            assert (await until_terminal(ws))[-1]["error"]["code"] == "invalid_value"
            await ws.send(json.dumps({"type": "response.steer", "previous_response_id": "resp_x",
                                      "input": "hello"}))
            failed = (await until_terminal(ws))[-1]
            assert failed["type"] == "response.steer.failed"
            assert failed["error"]["code"] == "response_not_found"
            await ws.send(json.dumps({"type": "response.create", "input": "go"}))
            created = json.loads(await ws.recv())
            assert created["type"] == "response.created"
            await ws.send(json.dumps({"type": "response.create", "input": "again"}))  # one at a time
            frames = await until_terminal(ws)
            assert frames[-1]["error"]["code"] == "conversation_already_has_active_response"
            await ws.send(json.dumps({"type": "response.steer", "input": [
                {"type": "message", "role": "assistant", "content": "x"}],
                "previous_response_id": created["response"]["id"]}))
            frames = await until_terminal(ws)
            assert frames[-1]["error"]["code"] == "invalid_input"  # user messages only
            await ws.send(json.dumps({"type": "response.steer", "input": "shorter please",
                                      "previous_response_id": created["response"]["id"]}))
            frames = await until_terminal(ws)
            assert frames[-1]["type"] == "response.steer.accepted"
            frames = await until_terminal(ws)
            assert frames[-1]["type"] == "response.incomplete"
            frames = await until_terminal(ws)  # the successor, with the next answer
            assert frames[0]["type"] == "response.created"
            assert frames[0]["response"]["previous_response_id"] == created["response"]["id"]
            assert "".join(f.get("delta", "") for f in frames) == "ok"


async def test_the_stall_timeout_counts_from_the_request_even_while_connecting():
    """A server that takes the TCP connection and never answers the upgrade (a hung `steer
    serve`): the request ends as a stall within the stall timeout of being sent, not after
    a connect timeout per retry."""
    import socket as sockets

    listener = sockets.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # the kernel completes the handshake; nobody ever reads
    port = listener.getsockname()[1]
    p = OpenAIResponses(f"http://127.0.0.1:{port}/v1", "m", KEY, stall_timeout=1.0,
                        connect_timeout=5.0)
    try:
        events = await collect(p)
        listener.setblocking(False)
        attempts = 0  # the connections the kernel completed for it, one per attempt
        with contextlib.suppress(BlockingIOError):
            while True:
                listener.accept()[0].close()
                attempts += 1
    finally:
        listener.close()
    err = ends_with_error(events, "stall")
    # the stall timer ended it, not the connect timeout (5 s, which fires after it) of each
    # of three attempts, as before: one connection, no retry announced
    assert "within 1 s of the request" in err.message
    assert attempts == 1 and not any(type(ev) is Retrying for ev in events), events
