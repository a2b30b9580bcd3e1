"""The model knows the repository (issue 24), end to end: a session with a started Knowledge
asks a real loopback server, and the tests read what the server received: the map item,
the files the instruction names, the look-ups' round trips (tool calls and their results),
and the edit that follows, accepted to disk."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import init_repo, run_isolated, sr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core.conversation.session import Session
from app.core.disk.workspace import Workspace
from app.core.knowledge import tools
from app.core.knowledge.lookup import Lookup
from app.core.knowledge.render import HEADER, HEADER_PATHS
from app.core.knowledge.service import Knowledge, Policy
from app.providers import openai_chat
from app.providers.openai_chat import OpenAIChat
from app.server.chat_server import ChatServer, ServerThread
from app.server.generation import Faults

CLI = '''import argparse


def build_parser():
    p = argparse.ArgumentParser()
    p.add_argument("--quiet", action="store_true")
    return p


def main():
    return build_parser().parse_args()
'''
UTIL = '''def greet(name):
    return "hi " + name
'''
FILES = {"pkg/cli.py": CLI, "pkg/util.py": UTIL, "pkg/__init__.py": "",
         "README.md": "# demo\n", ".env": "SECRET_TOKEN=hunter2-do-not-leak\n",
         **{f"lib/mod{i}.py": f"def helper_{i}(x):\n    return x + {i}\n" for i in range(30)}}
VERBOSE = sr("pkg/cli.py", '    p.add_argument("--quiet", action="store_true")\n',
             '    p.add_argument("--quiet", action="store_true")\n'
             '    p.add_argument("--verbose", action="store_true")\n')


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "repo", FILES)


@pytest.fixture
async def rig(tree):
    made: list = []

    async def make(answers, *, tool_calls=None, faults=None, policy=None, ready=True,
                   context=()):
        server = ChatServer(replay=answers, tool_calls=tool_calls, faults=faults)
        await server.start()
        know = Knowledge(tree, policy or Policy(), cache=False, workers=0)
        if ready:
            know.start()
            assert await asyncio.to_thread(know.builder.wait, 60)
        session = Session(Workspace(tree), OpenAIChat(server.base_url, "replay"),
                          fmt="search_replace", context=list(context))
        session.knowledge = know
        made.append((server, know, session))
        return session, server, know

    yield make
    for server, know, session in made:
        await session.aclose()
        know.close()
        await server.close()


def _texts(body: dict) -> list[str]:
    return [m.get("content") or "" for m in body["messages"]]


async def test_an_instruction_naming_a_function_carries_its_file_and_definition(rig):
    session, server, _ = await rig([VERBOSE])
    turn = await session.ask("add a --verbose flag next to --quiet in build_parser")
    assert turn.complete
    body = server.stats.bodies[0]
    msgs = body["messages"]
    # system, the map as an item of its own, then the instruction
    assert [m["role"] for m in msgs] == ["system", "user", "user"]
    repo_map = msgs[1]["content"]
    assert repo_map.startswith(HEADER)
    assert "pkg/cli.py:\n4: def build_parser():" in repo_map
    assert msgs[2]["content"].endswith("add a --verbose flag next to --quiet in build_parser")
    assert "hunter2" not in json.dumps(body)
    # ... and the edit that follows lands like any other
    assert [h.path for h in session.pending.hunks] == ["pkg/cli.py"]
    session.review.accept_all()
    assert '"--verbose"' in (Path(session.ws.root) / "pkg/cli.py").read_text()


async def test_the_map_is_the_same_bytes_for_the_same_repository_and_request(rig):
    session, server, know = await rig([VERBOSE, VERBOSE])
    await session.ask("add a --verbose flag in build_parser")
    session.review.reject_all()
    await session.ask("add a --verbose flag in build_parser")
    a, b = server.stats.bodies[0]["messages"], server.stats.bodies[1]["messages"]
    assert a[1] == b[1]


async def test_a_follow_up_appends_what_changed_and_never_edits_an_earlier_item(rig, tree):
    session, server, know = await rig([VERBOSE, "ok, nothing more.\n", "fine.\n"])
    await session.ask("add a --verbose flag in build_parser")
    await session.ask("also explain it")  # hunks still open: a follow-up
    first, second = server.stats.bodies[0]["messages"], server.stats.bodies[1]["messages"]
    assert second[:len(first)] == first  # the conversation only grows
    assert second[len(first)]["role"] == "assistant"
    assert len(second) == len(first) + 2  # unchanged repository: no new map item
    (tree / "pkg/extra.py").write_text("def brand_new_function():\n    pass\n")
    know.saw(["pkg/extra.py"])
    assert await asyncio.to_thread(know.builder.wait, 30)
    await session.ask("and one more thing")
    third = server.stats.bodies[2]["messages"]
    assert third[:len(second)] == second
    update = third[-2]["content"]
    assert update.startswith("Repository map update") and "brand_new_function" in update
    assert third[-1]["content"].endswith("and one more thing")


async def test_while_the_first_build_runs_the_request_carries_paths_then_the_full_map(rig):
    gate = threading.Event()
    session, server, know = await rig([VERBOSE, "explained.\n"], ready=False)
    parse = know.builder._parse

    def held(todo, known):  # the build cannot finish before the test says so
        gate.wait(60)
        return parse(todo, known)

    know.builder._parse = held  # type: ignore[method-assign]
    know.start()
    for _ in range(500):  # until the file list is published (no tags yet)
        if know.builder.files():
            break
        await asyncio.sleep(0.01)
    await session.ask("add a --verbose flag in build_parser")
    paths_only = server.stats.bodies[0]["messages"][1]["content"]
    assert paths_only.startswith(HEADER_PATHS) and "pkg/cli.py" in paths_only
    assert "def build_parser" not in paths_only
    gate.set()
    assert await asyncio.to_thread(know.builder.wait, 60)
    await session.ask("explain it")
    msgs = server.stats.bodies[1]["messages"]
    assert msgs[1]["content"] == paths_only  # kept as it was sent
    assert msgs[-2]["content"].startswith(HEADER) and "def build_parser" in msgs[-2]["content"]


async def test_a_model_that_reads_gets_the_exact_lines_and_a_refusal_for_secrets(rig, tree):
    calls = {1: [{"name": "read", "arguments": {"path": "pkg/cli.py", "start": 4, "end": 6}},
                 {"name": "read", "arguments": {"path": ".env"}},
                 {"name": "read", "arguments": {"path": "../x"}},
                 {"name": "grep", "arguments": {"pattern": "SECRET|def greet"}},
                 {"name": "list", "arguments": {"path": "pkg"}}]}
    (tree.parent / "x").write_text("outside the workspace\n")
    session, server, _ = await rig(["", VERBOSE, "noted.\n"], tool_calls=calls)
    turn = await session.ask("add a --verbose flag next to --quiet")
    assert turn.complete, turn.error
    assert len(server.stats.bodies) == 2
    first, second = server.stats.bodies
    assert [t["function"]["name"] for t in first["tools"]] == ["read", "grep", "list"]
    msgs = second["messages"]
    assert msgs[:len(first["messages"])] == first["messages"]
    call = msgs[len(first["messages"])]
    assert call["role"] == "assistant" and len(call["tool_calls"]) == 5
    results = {m["tool_call_id"]: m["content"] for m in msgs if m["role"] == "tool"}
    read, env, out, grep, listing = (results[c["id"]] for c in call["tool_calls"])
    lines = CLI.splitlines()
    assert read == ("pkg/cli.py lines 4-6 of 11:\n" +
                    "".join(f"{n}: {lines[n - 1]}\n" for n in (4, 5, 6)))
    assert env.startswith("refused .env: its name looks like a secret")
    assert out.startswith("refused ../x: '..' leads outside the workspace")
    assert "pkg/util.py:1: def greet(name):" in grep and "hunter2" not in grep
    assert "cli.py" in listing and "util.py" in listing
    assert "hunter2" not in json.dumps(list(server.stats.bodies))
    cards = [t.title for t in turn.tools.values() if t.kind == "lookup"]
    assert cards[0] == f"read pkg/cli.py 4–6 · {tools.tok(tools.estimate_tokens(read))}"
    assert cards[1].startswith("read .env · refused: its name looks like a secret")
    assert cards[2].startswith("read ../x · refused:")
    # a follow-up carries the look-ups as they were sent, then the answer
    await session.ask("thanks")
    third = server.stats.bodies[2]["messages"]
    assert third[:len(msgs)] == msgs and third[len(msgs)]["content"] == VERBOSE
    # the edit that follows lands like any other
    assert [h.path for h in session.pending.hunks] == ["pkg/cli.py"]
    session.review.accept_all()
    assert '"--verbose"' in (tree / "pkg/cli.py").read_text()


async def test_a_file_the_user_added_can_be_read_even_if_it_looks_secret(rig, tree):
    calls = {1: [{"name": "read", "arguments": {"path": ".env"}}]}
    session, server, _ = await rig(["", "ok.\n"], tool_calls=calls, context=[".env"])
    await session.ask("what is in the env file?")
    tool = [m for m in server.stats.bodies[1]["messages"] if m["role"] == "tool"]
    assert "SECRET_TOKEN=hunter2" in tool[0]["content"]


async def test_the_turns_look_up_budget_refuses_past_its_tokens(rig):
    calls = {1: [{"name": "read", "arguments": {"path": "pkg/cli.py"}}],
             2: [{"name": "read", "arguments": {"path": "pkg/util.py"}}]}
    session, server, _ = await rig(["", "", "done.\n"], tool_calls=calls,
                                   policy=Policy(tool_tokens=10))
    turn = await session.ask("look around")
    assert turn.complete
    last = [m for m in server.stats.bodies[2]["messages"] if m["role"] == "tool"][-1]
    assert "used their 10 tokens" in last["content"]


async def test_past_the_round_limit_the_model_is_told_to_answer(rig):
    calls = {n: [{"name": "list", "arguments": {}}] for n in (1, 2, 3)}
    session, server, _ = await rig(["", "", "answered.\n"], tool_calls=calls,
                                   policy=Policy(tool_rounds=2))
    turn = await session.ask("look around")
    assert turn.complete and turn.text == "answered.\n"
    choices = [b.get("tool_choice") for b in server.stats.bodies]
    assert choices == ["auto", "auto", "none"]


async def test_a_server_that_refuses_tools_gets_the_map_alone_said_once_and_remembered(rig):
    session, server, _ = await rig([VERBOSE, VERBOSE], faults=Faults(refuse_tools=True))
    turn = await session.ask("add a --verbose flag in build_parser")
    assert turn.complete and session.pending.hunks
    notes = [t.title for t in turn.tools.values() if t.kind == "steer"]
    assert len(notes) == 1 and "refused look-up tools" in notes[0]
    assert "tools" not in server.stats.bodies[-1]
    assert server.stats.bodies[-1]["messages"][1]["content"].startswith(HEADER)
    session.review.reject_all()
    turn = await session.ask("again, please")  # remembered: not offered, nothing said
    assert not [t for t in turn.tools.values() if t.kind == "steer"]
    assert "tools" not in server.stats.bodies[-1]
    openai_chat.NO_TOOLS.discard(server.base_url)


@pytest.fixture
def held_look_up(monkeypatch) -> tuple[threading.Event, threading.Event]:
    """Look-ups wait: `started` is set when one begins, and it runs once `release` is set."""
    started, release = threading.Event(), threading.Event()
    real = tools.run

    def slow(*a, **kw):
        started.set()
        release.wait(30)
        return real(*a, **kw)

    monkeypatch.setattr(tools, "run", slow)
    return started, release


async def test_esc_stops_a_look_up_round(rig, held_look_up):
    started, release = held_look_up
    calls = {1: [{"name": "read", "arguments": {"path": "pkg/cli.py"}}]}
    session, server, _ = await rig(["", VERBOSE], tool_calls=calls)
    turn = session.start("look first")
    await asyncio.to_thread(started.wait, 30)
    assert session.streaming and turn.tools  # the look-up card is up, in progress
    assert session.interrupt()
    assert turn.state == "interrupted"
    release.set()
    await session.wait()
    await asyncio.sleep(0.05)
    assert len(server.stats.bodies) == 1  # no round after Esc
    assert not session.pending.hunks


async def test_files_the_instruction_names_join_that_turn_and_one_key_drops_them(rig):
    session, server, know = await rig(["ok\n", "ok\n", "ok\n"])
    assert know.named("add a docstring to greet in util.py") == ["pkg/util.py"]
    assert know.named("fix mod3.py, pkg/cli.py and README.md.") == [
        "lib/mod3.py", "pkg/cli.py", "README.md"]
    assert know.named("edit __init__.py or .env") == ["pkg/__init__.py"]  # never a secret
    await session.ask("add a docstring to greet in util.py")
    user = server.stats.bodies[0]["messages"][-1]["content"]
    assert user.startswith("pkg/util.py\n```python\n" + UTIL)
    assert session.context == []  # for that turn only
    session.review.reject_all()
    know.drop("pkg/util.py")
    assert know.named("add a docstring to greet in util.py") == []
    await session.ask("add a docstring to greet in util.py")
    assert "def greet" not in server.stats.bodies[1]["messages"][-1]["content"]
    session.review.reject_all()
    await session.ask("now util.py again")  # dropped for one request only
    assert "def greet" in server.stats.bodies[2]["messages"][-1]["content"]
    # a named file is no context file the user took away: each question goes on with the
    # conversation (the same prefix), and the title says nothing of "sent in full"
    bodies = [b["messages"] for b in server.stats.bodies]
    for before, now in zip(bodies, bodies[1:], strict=False):
        assert now[:len(before)] == before and now[len(before)]["role"] == "assistant"
    assert session.sent.full == ""


@pytest.mark.parametrize("transport", ["websocket", "sse"])
async def test_look_ups_over_the_responses_api(tree, transport):
    """The same round trip over the Responses API: function calls in, function_call_output
    items back, then the edit; every WebSocket frame as the openai package models it."""
    pydantic = pytest.importorskip("pydantic")
    from openai.types.responses import ResponsesClientEvent, ResponsesServerEvent

    from app.providers.openai_responses import OpenAIResponses

    calls = {1: [{"name": "read", "arguments": {"path": "pkg/cli.py", "start": 4, "end": 5}},
                 {"name": "read", "arguments": {"path": "../x"}}]}
    server = ChatServer(replay=["", VERBOSE], tool_calls=calls, record_frames=True)
    await server.start()
    know = Knowledge(tree, cache=False, workers=0).start()
    assert await asyncio.to_thread(know.builder.wait, 60)
    provider = OpenAIResponses(server.base_url, "replay", transport=transport)
    session = Session(Workspace(tree), provider, fmt="search_replace")
    session.knowledge = know
    try:
        turn = await session.ask("add a --verbose flag next to --quiet")
        assert turn.complete, turn.error
        first, second = server.stats.bodies[0], server.stats.bodies[1]
        assert [t["name"] for t in first["tools"]] == ["read", "grep", "list"]
        assert first["tool_choice"] == "auto"
        inp = second["input"]
        outputs = [i for i in inp if i.get("type") == "function_call_output"]
        kinds = [i["type"] for i in inp if i.get("type", "message") != "message"]
        if transport == "websocket":  # the round continues the response that made the calls
            assert second["previous_response_id"] == list(server.responses.kept)[0]
            assert kinds == ["function_call_output", "function_call_output"] == \
                [i["type"] for i in inp]
        else:  # every request carries everything
            assert kinds == ["function_call", "function_call", "function_call_output",
                             "function_call_output"]
        lines = CLI.splitlines()
        assert outputs[0]["output"] == (f"pkg/cli.py lines 4-5 of 11:\n4: {lines[3]}\n"
                                        f"5: {lines[4]}\n")
        assert outputs[0]["call_id"] == "call_1_0"
        assert outputs[1]["output"].startswith("refused ../x:")
        assert [h.path for h in session.pending.hunks] == ["pkg/cli.py"]
        session.review.accept_all()
        assert '"--verbose"' in (tree / "pkg/cli.py").read_text()
        if transport == "websocket":
            out, inn = (pydantic.TypeAdapter(ResponsesServerEvent),
                        pydantic.TypeAdapter(ResponsesClientEvent))
            kinds = set()
            for direction, text in server.stats.frames:
                obj = json.loads(text)
                kinds.add(obj["type"])
                (out if direction == "out" else inn).validate_python(obj)
            assert {"response.function_call_arguments.delta",
                    "response.output_item.done"} <= kinds
    finally:
        await session.aclose()
        know.close()
        await server.close()


def _steer_run(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run([sys.executable, "-m", "app", "run", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=180)


def test_steer_run_with_no_file_picked_sends_the_map_and_answers_look_ups(tree):
    """`steer run` end to end: no -f, the function's file and definition in the request, a
    read the model makes answered with the exact lines (its card on stderr), the edit
    written by --accept all."""
    calls = {1: [{"name": "read", "arguments": {"path": "pkg/cli.py", "start": 4, "end": 6}},
                 {"name": "read", "arguments": {"path": ".env"}}]}
    with ServerThread(replay=["", VERBOSE], tool_calls=calls) as server:
        out = _steer_run(tree, "add a --verbose flag next to --quiet in build_parser",
                         "--base-url", server.base_url, "--model", "replay", "--accept", "all",
                         "--no-save")
        bodies = list(server.stats.bodies)
    assert out.returncode == 0, out.stderr
    first = bodies[0]["messages"]
    assert first[1]["content"].startswith(HEADER)
    assert "pkg/cli.py:\n4: def build_parser():" in first[1]["content"]
    tool = [m["content"] for m in bodies[1]["messages"] if m["role"] == "tool"]
    assert tool[0].startswith("pkg/cli.py lines 4-6 of 11:\n4: def build_parser():\n")
    assert tool[1].startswith("refused .env")
    assert "steer: read pkg/cli.py 4–6 · " in out.stderr
    assert "steer: read .env · refused: its name looks like a secret" in out.stderr
    assert '"--verbose"' in (tree / "pkg/cli.py").read_text()
    assert (tree / ".env").read_text() == FILES[".env"]


def test_steer_run_no_tools_offers_none_and_the_map_still_goes(tree):
    with ServerThread(replay=[VERBOSE]) as server:
        out = _steer_run(tree, "add a --verbose flag in build_parser", "--no-tools",
                         "--base-url", server.base_url, "--model", "replay", "--no-save",
                         "--json")
        body = server.stats.bodies[0]
    assert out.returncode == 0, out.stderr
    assert "tools" not in body
    assert body["messages"][1]["content"].startswith(HEADER)
    report = json.loads(out.stdout)
    assert report["map"].startswith("map: 35 files") and "look-ups off" in report["map"]


async def test_a_redirect_during_a_look_up_round_starts_over(rig, held_look_up):
    started, release = held_look_up
    calls = {1: [{"name": "read", "arguments": {"path": "pkg/cli.py"}}]}
    session, server, _ = await rig(["", VERBOSE], tool_calls=calls)
    first = session.start("look first")
    await asyncio.to_thread(started.wait, 30)
    second = session.start("no, just add --verbose")  # streaming: a redirect
    release.set()
    await session.wait()
    assert first.state == "interrupted" and second.kind == "redirect" and second.complete
    assert server.stats.bodies[-1]["messages"][-1]["content"].endswith("no, just add --verbose")
    assert [h.path for h in session.pending.hunks] == ["pkg/cli.py"]


def test_named_files_are_only_files_of_the_tree(tree):
    know = Knowledge(tree, cache=False, workers=0).start()
    try:
        assert know.builder.wait(60)
        (tree.parent / "x.py").write_text("outside\n")
        assert know.named("edit ../x.py, /etc/passwd, ~/.ssh/id_rsa and .git/config") == []
        assert know.named("mod1.py or lib/mod1.py") == ["lib/mod1.py"]
        assert know.named("__init__.py") == ["pkg/__init__.py"]
    finally:
        know.close()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["read", "grep", "list", "write", ""]),
       raw=st.one_of(st.text(max_size=80), st.dictionaries(
           st.sampled_from(["path", "start", "end", "pattern", "glob"]),
           st.one_of(st.text(max_size=30), st.integers(-5, 10**6), st.none(), st.booleans()),
       ).map(json.dumps)))
def test_any_call_a_model_makes_gets_an_answer_and_a_one_line_card(tree, name, raw):
    with Lookup(tree, files=lambda: sorted(FILES)) as lookup:
        done = tools.run(lookup, name, raw)
    assert isinstance(done.text, str) and done.text
    assert "\n" not in done.card and len(done.card) <= 200
    assert "hunter2" not in done.text  # .env is never shown unless the user added it


@pytest.mark.parametrize("transport", ["websocket", "chat_sse"])
async def test_a_turn_after_a_look_up_round_continues_the_conversation_on_the_wire(tree, transport):
    """Three turns, the second with a look-up round: every request continues the one before
    (over the WebSocket, previous_response_id with only the new items; over Chat Completions,
    the earlier request's messages byte for byte, then what is new)."""
    from app.providers.openai_responses import OpenAIResponses

    calls = {2: [{"name": "read", "arguments": {"path": "pkg/util.py"}}]}
    server = ChatServer(replay=["first.\n", "", "second.\n", "third.\n"], tool_calls=calls)
    await server.start()
    know = Knowledge(tree, cache=False, workers=0).start()
    assert await asyncio.to_thread(know.builder.wait, 60)
    provider = (OpenAIResponses(server.base_url, "replay") if transport == "websocket"
                else OpenAIChat(server.base_url, "replay"))
    session = Session(Workspace(tree), provider, fmt="search_replace")
    session.knowledge = know
    try:
        for words in ("what does build_parser do?", "and greet?", "thanks"):
            turn = await session.ask(words)
            assert turn.complete, turn.error
        bodies, kept = list(server.stats.bodies), list(server.responses.kept)
        # the status line's budget reads the look-up items too (a call has no "content")
        assert session.budget("").used > sum(len(json.dumps(b)) for b in bodies[-1:]) / 8
    finally:
        await session.aclose()
        know.close()
        await server.close()
    assert len(bodies) == 4  # turn 2 took two requests: the look-up, then the answer
    if transport == "websocket":
        assert "previous_response_id" not in bodies[0]
        for i in (1, 2, 3):
            assert bodies[i].get("previous_response_id") == kept[i - 1], i
        # the look-up's answer goes after the call the server kept; the next question after
        # the answer it kept: nothing is sent twice
        assert [i["type"] for i in bodies[2]["input"]] == ["function_call_output"]
        assert bodies[2]["input"][0]["output"].startswith("pkg/util.py lines 1-2 of 2:")
        assert [(i["type"], i["role"]) for i in bodies[3]["input"]] == [("message", "user")]
        assert bodies[3]["input"][0]["content"].endswith("thanks")
    else:
        for i in (1, 2, 3):
            before, now = bodies[i - 1]["messages"], bodies[i]["messages"]
            grown = json.dumps(now[:len(before)], ensure_ascii=False)
            assert grown == json.dumps(before, ensure_ascii=False), i
            assert len(now) > len(before) + (0 if i == 2 else 1), i
        three = bodies[3]["messages"]
        assert [m["role"] for m in three[len(bodies[2]["messages"]):]] == ["assistant", "user"]
        assert three[len(bodies[2]["messages"])]["content"] == "second.\n"


async def test_the_budget_counts_the_map_then_the_conversation_with_its_look_ups(rig):
    from app.core.conversation.context_budget import estimate_tokens

    calls = {1: [{"name": "read", "arguments": {"path": "pkg/cli.py"}}]}
    session, server, know = await rig(["", "it parses.\n"], tool_calls=calls)
    before = session.budget("what does build_parser do?").used
    session.knowledge = None
    bare = session.budget("what does build_parser do?").used
    session.knowledge = know
    assert before - bare == know.budget(session.provider) > 0  # a first question: the map
    turn = await session.ask("what does build_parser do?")
    assert turn.complete, turn.error
    sent = server.stats.bodies[1]["messages"]  # with the call and the file it read
    assert any(m["role"] == "tool" and "def build_parser" in m["content"] for m in sent)
    texts = [m["content"] for m in sent if isinstance(m.get("content"), str)]
    after = session.budget("").used  # the conversation so far: the map is in it once
    assert after >= sum(map(estimate_tokens, texts)) + estimate_tokens("it parses.\n")
    assert after < sum(map(estimate_tokens, texts)) + know.budget(session.provider) + 200


async def test_a_steer_after_the_map_changed_sends_its_words_only_and_the_next_continues(tree):
    """A native steer (WebSocket) sends the user's words only: the map's update waits for the
    next request, so the conversation kept is what the server has, and the next continues."""
    from app.providers.openai_responses import OpenAIResponses

    long = "word " * 4000
    server = ChatServer(replay=[long, "changed course.\n", "ok.\n"], rate=400, record_frames=True)
    await server.start()
    know = Knowledge(tree, cache=False, workers=0).start()
    assert await asyncio.to_thread(know.builder.wait, 60)
    provider = OpenAIResponses(server.base_url, "replay")
    session = Session(Workspace(tree), provider, fmt="search_replace")
    session.knowledge = know
    try:
        await provider.warm()
        old = session.start("annotate everything")
        while old.deltas < 5:
            await asyncio.sleep(0.01)
        (tree / "pkg/extra.py").write_text("def brand_new_function():\n    pass\n")
        know.saw(["pkg/extra.py"])
        assert await asyncio.to_thread(know.builder.wait, 30)
        assert old.live  # still streaming: the redirect steers it
        turn = session.redirect("stop, list the files instead")
        await session.wait()
        assert turn.complete and old.finish_reason == "steered"
        await session.ask("thanks")
        bodies = list(server.stats.bodies)
        out = [json.loads(t) for d, t in server.stats.frames if d == "out"]
    finally:
        await session.aclose()
        know.close()
        await server.close()
    created = [e["response"]["id"] for e in out if e["type"] == "response.created"]
    assert len(bodies) == 2 and len(created) == 3  # the steer needed no request
    assert bodies[1]["previous_response_id"] == created[1]  # the successor, continued
    texts = [i["content"] for i in bodies[1]["input"]]
    assert texts[-1].endswith("thanks")
    # the update goes with the request after the steer, once
    assert sum("brand_new_function" in t for t in texts) == 1


@pytest.mark.parametrize("transport", ["websocket", "chat_sse"])
async def test_a_resumed_session_keeps_the_look_ups_and_goes_on_where_it_was(tree, transport):
    """The look-up round's items are in the session log: a session resumed in a new process
    sends the conversation the server has (Chat: the same prefix, calls and outputs included;
    WebSocket: only the new question after the response the server kept)."""
    from app.core.conversation import resume
    from app.core.storage.store import SessionStore
    from app.providers.openai_responses import OpenAIResponses

    def provider():
        return (OpenAIResponses(server.base_url, "replay") if transport == "websocket"
                else OpenAIChat(server.base_url, "replay"))

    calls = {1: [{"name": "read", "arguments": {"path": "pkg/util.py"}}]}
    server = ChatServer(replay=["", "it greets.\n", "ok.\n"], tool_calls=calls)
    await server.start()
    know = Knowledge(tree, cache=False, workers=0).start()
    assert await asyncio.to_thread(know.builder.wait, 60)
    store = SessionStore(tree)
    try:
        a = Session(Workspace(tree), provider(), fmt="search_replace")
        a.knowledge = know
        resume.start(a, store)
        assert (await a.ask("what does greet do?")).complete
        await a.aclose()
        b = Session(Workspace(tree), provider(), fmt="search_replace")
        b.knowledge = know
        resume.resume(b, store)
        assert b.sent.history == a.sent.history  # the look-ups too, as they were sent
        assert (await b.ask("thanks")).complete
        await b.aclose()
        bodies, kept = list(server.stats.bodies), list(server.responses.kept)
    finally:
        know.close()
        await server.close()
    assert len(bodies) == 3
    if transport == "websocket":
        assert bodies[2]["previous_response_id"] == kept[1]
        assert [i["role"] for i in bodies[2]["input"]] == ["user"]
    else:
        before = [*bodies[1]["messages"], {"role": "assistant", "content": "it greets.\n"}]
        assert bodies[2]["messages"][:len(before)] == before
        assert [m["role"] for m in before].count("tool") == 1


# -- a model that loops, or is hostile: every look-up ends, and the turn goes on -----------------
# 40,000 characters: `(a+)+$` backtracks over each run of a's (with Python's re, for ever)
LONG_LINE = ("a" * 3_999 + "!") * 10
DEEP = "pkg/util.py" + "/x" * 3000  # 6,011 bytes


def test_steer_run_answers_hostile_look_ups_and_finishes(tree):
    """A grep that backtracks for ever and a read 3,000 levels deep: the one times out, the
    other is refused by the path's limit, and the run goes on to write the edit."""
    (tree / "data").mkdir()
    (tree / "data" / "long.txt").write_text(LONG_LINE + "\n")
    calls = {1: [{"name": "grep", "arguments": {"pattern": "(a+)+$"}},
                 {"name": "read", "arguments": {"path": DEEP}}]}
    with ServerThread(replay=["", VERBOSE], tool_calls=calls) as server:
        out = _steer_run(tree, "add a --verbose flag next to --quiet in build_parser",
                         "--base-url", server.base_url, "--model", "replay", "--accept", "all",
                         "--no-save")
        bodies = list(server.stats.bodies)
    assert out.returncode == 0, out.stderr
    grep, read = [m["content"] for m in bodies[1]["messages"] if m["role"] == "tool"]
    assert grep.startswith("timed out: one search ran past 1 s in data/long.txt. "), grep
    assert read.startswith("refused pkg/util.py/x/x/x") and "it is 6,011 bytes long" in read
    assert len(read) < 300
    assert "steer: grep '(a+)+$' · timed out: one search ran past 1 s in data/long.txt" in out.stderr
    assert "· refused: it is 6,011 bytes long" in out.stderr, out.stderr
    assert '"--verbose"' in (tree / "pkg/cli.py").read_text()


def test_esc_stops_a_turn_while_its_grep_backtracks(tree):
    """Python's re held the GIL while it backtracked, so the event loop (and Esc with it)
    waited on a grep that never ended. In a process of its own: a regression fails here
    instead of hanging the suite."""
    (tree / "long.txt").write_text(LONG_LINE + "\n")
    got, _ = run_isolated(f"""
import asyncio, json
from app.core.conversation.session import Session
from app.core.disk.workspace import Workspace
from app.core.knowledge.lookup import Limits
from app.core.knowledge.service import Knowledge, Policy
from app.providers.openai_chat import OpenAIChat
from app.server.chat_server import ChatServer

async def main():
    calls = {{1: [{{"name": "grep", "arguments": {{"pattern": "(a+)+$"}}}}]}}
    server = ChatServer(replay=["", "never asked for"], tool_calls=calls)
    await server.start()
    know = Knowledge({str(tree)!r}, Policy(lookup_seconds=60), cache=False, workers=0).start()
    await asyncio.to_thread(know.builder.wait, 60)
    know.lookup.limits = Limits(grep_search_seconds=5)  # the search runs while Esc comes
    session = Session(Workspace({str(tree)!r}), OpenAIChat(server.base_url, "replay"),
                      fmt="search_replace")
    session.knowledge = know
    turn = session.start("look first")
    while not any(t.status == "in_progress" for t in turn.tools.values()):
        await asyncio.sleep(0.01)
    stopped = session.interrupt()
    await session.wait()
    for _ in range(1000):  # the look-up's task ends on the loop's next turns
        if not any(t.status == "in_progress" for t in turn.tools.values()):
            break
        await asyncio.sleep(0.01)
    out = dict(stopped=stopped, state=turn.state, bodies=len(server.stats.bodies),
               hunks=len(session.pending.hunks), cards=[t.title for t in turn.tools.values()])
    await session.aclose()
    know.close()
    await server.close()
    return out

print(json.dumps(asyncio.run(main())))
""", timeout=180)
    assert got["stopped"] and got["state"] == "interrupted", got
    assert got["bodies"] == 1 and got["hunks"] == 0  # no round after Esc, nothing proposed
    assert got["cards"] == ["grep · stopped with the turn"]


async def test_a_look_up_still_running_when_its_time_is_up_is_answered(rig):
    """No time at all: the read is still running when its time is up; the model is told it
    timed out, and the turn goes on to its answer."""
    calls = {1: [{"name": "read", "arguments": {"path": "pkg/cli.py"}}]}
    session, server, _ = await rig(["", "answered.\n"], tool_calls=calls,
                                   policy=Policy(lookup_seconds=0, lookup_grace=0))
    turn = await asyncio.wait_for(session.ask("look first"), 60)
    assert turn.complete and turn.text == "answered.\n"
    tool = [m["content"] for m in server.stats.bodies[1]["messages"] if m["role"] == "tool"]
    assert tool == ["timed out after 0 s. Narrow the pattern or the path, or read fewer lines."]
    assert [(t.title, t.status) for t in turn.tools.values()] == \
        [("read · timed out after 0 s", "failed")]


async def test_a_look_up_that_breaks_is_answered_and_the_turn_goes_on(rig, monkeypatch):
    """A look-up that raised left its call unanswered, and the model's stream waited for
    ever: now the model reads that it failed."""
    def broken(*a, **kw):
        raise OSError(36, "File name too long")

    monkeypatch.setattr(tools, "run", broken)
    calls = {1: [{"name": "read", "arguments": {"path": "pkg/cli.py"}}]}
    session, server, _ = await rig(["", "answered.\n"], tool_calls=calls)
    turn = await asyncio.wait_for(session.ask("look first"), 60)
    assert turn.complete and turn.text == "answered.\n"
    tool = [m["content"] for m in server.stats.bodies[1]["messages"] if m["role"] == "tool"]
    assert tool == ["the look-up failed (OSError: [Errno 36] File name too long)."]
