"""File names are data (DESIGN rule 17): a name that is not valid UTF-8 (latin-1 `café.py`,
the bytes of a lone surrogate), or that holds a newline, a tab or a control character, is
carried escaped into every request and never stops one; an edit to it writes the exact
bytes; a new file of such a name is refused with its reason.

The real CLI in a subprocess, a real git repository holding the names, a real loopback
server replaying the answer and keeping what it was sent."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import git, init_repo, sr
from hypothesis import given
from hypothesis import strategies as st
from pilot import SIZE, ask, reviewing, until
from test_cli import served, steer

from app.core.disk.workspace import PathRefused, Workspace
from app.core.knowledge.render import HEADER, HEADER_PATHS
from app.core.knowledge.service import Knowledge
from app.core.text.names import carried, odd, unescape, wire
from app.providers.openai_chat import OpenAIChat
from app.server.chat_server import ChatServer
from app.ui.app import SteerApp
from app.ui.widgets.file_tree import FileTree

# byte names, and what a model reads for each (written out by hand, not by the code)
LATIN1 = b"caf\xe9.py"  # café.py in latin-1
CESU = b"\xed\xa0\x80x.py"  # a UTF-16 surrogate's bytes: never valid UTF-8
NEWLINE = b"two\nlines.py"
CONTROL = b"t\x1b]2;X\x07.py"
CARRIED = {LATIN1: "caf\\udce9.py", CESU: "\\udced\\udca0\\udc80x.py",
           NEWLINE: "two\\nlines.py", CONTROL: "t\\x1b]2;X\\x07.py"}
BODY = b"x = 1\n"
UTIL = "def greet_someone(name):\n    return 'hi ' + name\n"


# -- the notation ------------------------------------------------------------------------
# any text a file name can be in Python: every code point, lone surrogates included
names = st.text(st.characters(exclude_categories=()), max_size=40)


@given(names)
def test_a_carried_name_is_plain_utf8_text_and_stands_for_exactly_that_name(name):
    c = carried(name)
    c.encode("utf-8")  # never raises: no lone surrogate left
    assert "\n" not in c and "\t" not in c and "\x1b" not in c and "\u202e" not in c
    assert unescape(c) == name
    assert (c != name) == odd(name)


@given(st.text(st.characters(exclude_categories=()), max_size=40))
def test_unescape_takes_any_text(text):
    got = unescape(text)  # never raises
    if "\\" not in text:
        assert got == text
    elif got is not None:
        assert len(got) < len(text)  # each escape stands for one character


@pytest.mark.parametrize("raw, want", list(CARRIED.items()))
def test_the_notation_is_the_one_the_screen_shows(raw, want):
    assert carried(os.fsdecode(raw)) == want
    assert unescape(want) == os.fsdecode(raw)


def test_plain_names_pass_as_they_are_and_windows_paths_stand_for_nothing():
    for n in ("a.py", "données/été.py", "lib/[id].ts", "a (copy).py"):
        assert carried(n) == n and unescape(n) == n
    assert unescape("src\\app.py") is None  # a Windows path: \a is no escape steer writes
    assert carried("a\\b.py") == "a\\\\b.py" and unescape("a\\\\b.py") == "a\\b.py"


def test_wire_escapes_only_lone_surrogates():
    assert wire("plain") == "plain"
    assert wire("café ✓") == "café ✓"
    assert wire("x caf\udce9.py y") == "x caf\\udce9.py y"
    wire("caf\udce9 \ud800").encode("utf-8")


# -- the workspace maps a carried name back to the exact bytes ------------------------------
def _tree(tmp_path: Path) -> Path:
    root = init_repo(tmp_path / "r", {"util.py": UTIL})
    for raw in CARRIED:
        with open(os.path.join(os.fsencode(root), raw), "wb") as f:
            f.write(BODY)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "odd names")
    return root


def test_a_carried_name_resolves_to_the_file_and_a_new_one_is_refused(tmp_path):
    root = _tree(tmp_path)
    ws = Workspace(root)
    for raw, shown in CARRIED.items():
        assert ws.check_edit(shown) == os.fsdecode(raw)
        assert ws.read_bytes(ws.check_path(shown)) == BODY
    with pytest.raises(PathRefused, match="does not create a file whose name"):
        ws.check_edit("new\\udce9.py")
    with pytest.raises(PathRefused, match="starts no escape"):
        ws.check_edit("src\\app.py")
    with pytest.raises(PathRefused, match="not valid text"):
        ws.check_edit("\\ud800.py")  # a surrogate no file name holds (not surrogateescape's)


# -- steer run: the request goes, carried; the edit writes the exact bytes ------------------
def _sent(server) -> str:
    """The text of every message the server was sent."""
    return "\n".join(m["content"] for b in server.stats.bodies for m in b["messages"]
                     if isinstance(m.get("content"), str))


@pytest.mark.parametrize("raw", list(CARRIED))
def test_steer_run_in_a_tree_with_an_odd_name_sends_it_carried_and_edits_the_exact_file(
        tmp_path, raw):
    root = _tree(tmp_path)
    answer = "Done.\n\n" + sr(CARRIED[raw], "x = 1\n", "x = 2\n")
    with served(answer) as server:
        out = steer(root, "run", "set x to 2", "--base-url", server.base_url, "--model", "replay",
                    "--format", "search_replace", "--accept", "all", "--no-save")
        sent = _sent(server)
    assert out.returncode == 0, out.stderr
    assert "UnicodeEncodeError" not in out.stderr and "Traceback" not in out.stderr
    with open(os.path.join(os.fsencode(root), raw), "rb") as f:
        assert f.read() == b"x = 2\n"
    assert (root / "util.py").read_text() == UTIL
    assert HEADER in sent or HEADER_PATHS in sent  # the map went
    assert CARRIED[raw] in sent.splitlines()  # one line of the map (a newline would make two)
    assert os.fsdecode(raw) not in sent
    sent.encode("utf-8")


def test_a_new_file_of_an_odd_name_is_refused_with_its_reason_and_nothing_is_written(tmp_path):
    root = _tree(tmp_path)
    before = sorted(os.listdir(os.fsencode(root)))
    answer = "Here.\n\nnew\\x1bfile.py\n```python\n<<<<<<< SEARCH\n=======\nx = 3\n>>>>>>> REPLACE\n```\n"
    with served(answer) as server:
        out = steer(root, "run", "add a file", "--base-url", server.base_url, "--model", "replay",
                    "--format", "search_replace", "--accept", "all", "--no-save")
    assert out.returncode == 4, out.stderr
    assert "does not create a file whose name" in out.stderr
    assert sorted(os.listdir(os.fsencode(root))) == before
    assert git(root, "status", "--porcelain") == ""


@pytest.mark.parametrize("raw", list(CARRIED))
def test_the_printed_diff_of_an_odd_name_is_a_patch_git_applies(tmp_path, raw):
    """Without --accept, on a pipe, the diff names the file as git does (quoted C-style):
    git apply takes it and writes the exact file, and steer wrote nothing."""
    root = _tree(tmp_path)
    answer = sr(CARRIED[raw], "x = 1\n", "x = 2\n")
    with served(answer) as server:
        res = steer(root, "run", "set x to 2", "--base-url", server.base_url, "--model",
                    "replay", "--format", "search_replace", "--no-save")
    assert res.returncode == 0, res.stderr
    assert git(root, "status", "--porcelain") == ""
    patch = tmp_path / "p.diff"
    patch.write_bytes(os.fsencode(res.stdout))
    subprocess.run(["git", "apply", str(patch)], cwd=root, check=True, capture_output=True)
    with open(os.path.join(os.fsencode(root), raw), "rb") as f:
        assert f.read() == b"x = 2\n"
    assert git(root, "status", "--porcelain").count("\n") == 1  # that file alone


async def test_in_the_app_a_message_goes_and_its_hunk_for_the_odd_name_is_accepted(tmp_path):
    """The app on a tree holding every kind of odd name, with the map built: the tree shows
    them escaped, a message reaches the server (twice: F5's retry path is the same), and
    the hunk for the latin-1 file is accepted to its exact bytes."""
    root = _tree(tmp_path)
    server = ChatServer(replay=["Here.\n\n" + sr(CARRIED[LATIN1], "x = 1\n", "x = 2\n"),
                                "Nothing more.\n"])
    await server.start()
    know = Knowledge(root, cache=False, workers=0)
    app = SteerApp(root, OpenAIChat(server.base_url, "replay"), watch_files=False, blink=False,
                   knowledge=know)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: know.status().complete, timeout=30)
            tree = app.query_one(FileTree)
            await until(pilot, lambda: len(tree._by_path) > 4)
            labels = " ".join(str(n.label) for n in tree._by_path.values())
            for shown in CARRIED.values():
                assert shown in labels
            await ask(pilot, "set x to 2")
            await reviewing(pilot)
            assert app.session.failed is None
            assert CARRIED[LATIN1] in _sent(server)
            await pilot.press("y")
            await until(pilot, lambda: _read(root, LATIN1) == b"x = 2\n")
            await pilot.press("tab")
            await ask(pilot, "anything else?")
            await until(pilot, lambda: len(server.stats.bodies) == 2)
            await until(pilot, lambda: app.session.turn.state == "done")
            assert app.session.failed is None
            # the decision told names the file as it is carried
            assert f"{CARRIED[LATIN1]} line 1" in server.stats.bodies[1]["messages"][-1]["content"]
    finally:
        await server.close()
        await asyncio.to_thread(know.close)


def _read(root: Path, raw: bytes) -> bytes:
    with open(os.path.join(os.fsencode(root), raw), "rb") as f:
        return f.read()


# -- the model server says when the model fails, instead of going silent ---------------------
@pytest.mark.model
async def test_the_embedded_model_failing_on_a_prompt_is_reported_on_both_protocols():
    """A prompt the embedded model cannot take (a lone surrogate, sent as JSON's escape by a
    client that did not carry the name) used to kill the server's generation silently: the
    client waited out its 120 s stall. Now it is `response.failed` on the WebSocket and
    `event: error` on Chat Completions, at once."""
    import httpx

    from app.config import load_settings
    from app.core.events import Done, Error
    from app.core.provider import Request
    from app.providers import serve_registry
    from app.providers.factory import build_provider

    p = build_provider(load_settings())
    await p.warm()
    try:
        req = Request([{"role": "user", "content": "Rename caf\udce9.py"}], max_tokens=5)
        events = await asyncio.wait_for(_all(p.stream(req)), 60)  # the stall window is 120 s
        assert isinstance(events[-1], Done) and events[-1].finish_reason == "error"
        (err,) = [e for e in events if isinstance(e, Error)]
        assert "the model failed" in err.message and "surrogate" in err.message
        # the same model server, over Chat Completions (SSE)
        (srv,) = serve_registry.read()["servers"].values()
        body = json.dumps({"model": "m", "stream": True, "max_tokens": 5,
                           "messages": [{"role": "user", "content": "caf\udce9"}]})
        async with httpx.AsyncClient(timeout=60) as client:
            resp = await client.post(f"http://{srv['host']}:{srv['port']}/v1/chat/completions",
                                     content=body.encode("ascii"),
                                     headers={"Authorization": f"Bearer {serve_registry.token()}",
                                              "Content-Type": "application/json"})
        assert resp.status_code == 200
        assert "event: error" in resp.text and "surrogate" in resp.text
    finally:
        await p.aclose()


async def _all(it) -> list:
    return [ev async for ev in it]


def test_the_look_ups_name_odd_files_as_they_are_carried_and_read_them_by_that_name(tmp_path):
    from app.core.knowledge.lookup import Lookup

    root = _tree(tmp_path)
    with Lookup(root) as look:
        listed = look.list("")
        found = look.grep(r"x = 1")
        for shown in CARRIED.values():
            assert f"{shown} (6 B)" in listed.text.splitlines()
            assert f"{shown}:1: x = 1" in found.text.splitlines()
            got = look.read(shown)
            assert got.ok and got.lines == ("x = 1",) and got.text.startswith(f"{shown} lines 1-1")
        for text in (listed.text, found.text):
            text.encode("utf-8")
