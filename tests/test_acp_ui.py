"""An ACP agent in the app: its thoughts, plan and tool calls in the answer pane, its
permission request answered with a key, its write a pending hunk that the agent waits on
until the user decides in the review."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import init_repo
from pilot import SIZE, ask, until
from test_acp import SRC, logged, script

from app.core.edits.hunks import HunkState
from app.providers.acp import AcpAgent
from app.ui.app import SteerApp
from app.ui.dialogs.permission import PermissionScreen
from app.ui.widgets.diff_view import DiffView
from app.ui.widgets.prompt import PromptInput


@pytest.fixture
def agent_log(tmp_path: Path, monkeypatch) -> Path:
    path = tmp_path / "agent.log"
    monkeypatch.setenv("STEER_TEST_AGENT_LOG", str(path))
    return path


async def test_an_agents_write_is_a_hunk_it_waits_on_until_the_user_accepts(tmp_path, agent_log):
    repo = init_repo(tmp_path / "r", {"f.txt": SRC})
    cmd = script(tmp_path, [
        {"think": "the third line needs a word"},
        {"plan": [["change line 3", "in_progress"], ["say so", "pending"]]},
        {"permission": {"id": "p1", "title": "Edit f.txt"}},
        {"write": {"path": "f.txt", "content": SRC.replace("line 3\n", "line three\n")}},
        {"say": "Changed line 3."}])
    app = SteerApp(repo, AcpAgent(cmd, str(repo)), watch_files=False, blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ask(pilot, "spell out line 3")
        await until(pilot, lambda: app.session.agent.permissions, timeout=30)
        await pilot.press("ctrl+g")  # the key bar said the agent asks: the user opens it
        await until(pilot, lambda: isinstance(app.screen, PermissionScreen)
                    and app.screen.query("#permission-title"), timeout=30)
        assert "Edit f.txt" in str(app.screen.query_one("#permission-title").render())
        await pilot.press("1")  # allow once
        pending = lambda: app.session.pending  # noqa: E731
        await until(pilot, lambda: pending() and pending().hunks
                    and pending().hunks[0].state == HunkState.PENDING, timeout=30)
        stream = app.query_one("#stream").text
        assert "thinking… the third line needs a word" in stream
        assert "▸ plan: 0/2 done · now: change line 3" in stream
        assert app.session.streaming  # the agent waits on its write
        assert (repo / "f.txt").read_text() == SRC
        diff = app.query_one(DiffView)
        diff.focus()
        await pilot.pause(0.1)
        await pilot.press("y")
        await until(pilot, lambda: app.session.turn.state == "done", timeout=30)
        assert (repo / "f.txt").read_text() == SRC.replace("line 3\n", "line three\n")
        assert "Changed line 3." in app.query_one("#stream").text
    writes = logged(agent_log, "write")
    assert writes and writes[0].get("ok")  # the agent's write returned once it was accepted
    perms = logged(agent_log, "permission")
    assert perms and perms[0]["outcome"] == {"optionId": "yes", "outcome": "selected"}  # option 1


async def test_an_edit_permission_is_steers_to_answer_and_its_write_is_a_hunk(tmp_path, agent_log):
    """An edit's permission asks nothing: the write lands in the pending diff anyway, and
    the user decides there. No dialog, no key."""
    repo = init_repo(tmp_path / "r", {"f.txt": SRC})
    cmd = script(tmp_path, [
        {"permission": {"id": "p1", "title": "Edit f.txt", "kind": "edit"}},
        {"write": {"path": "f.txt", "content": SRC.replace("line 3\n", "line three\n")}},
        {"say": "Changed line 3."}])
    app = SteerApp(repo, AcpAgent(cmd, str(repo)), watch_files=False, blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ask(pilot, "spell out line 3")
        pending = lambda: app.session.pending  # noqa: E731
        await until(pilot, lambda: pending() and pending().hunks
                    and pending().hunks[0].state == HunkState.PENDING, timeout=30)
        assert not isinstance(app.screen, PermissionScreen) and not app.session.agent.permissions
        assert (repo / "f.txt").read_text() == SRC  # allowed to propose, not written
        await pilot.press("tab", "y")  # to the review, accept
        await until(pilot, lambda: app.session.turn.state == "done", timeout=30)
        assert (repo / "f.txt").read_text() == SRC.replace("line 3\n", "line three\n")
    perms = logged(agent_log, "permission")
    assert perms[0]["outcome"] == {"optionId": "yes", "outcome": "selected"}


ALWAYS = [["once", "Allow once", "allow_once"], ["always", "Always allow", "allow_always"],
          ["no", "Reject", "reject_once"]]


async def test_a_command_permission_waits_for_the_user_and_typing_never_answers_it(tmp_path, agent_log):
    repo = init_repo(tmp_path / "r", {"f.txt": SRC})
    cmd = script(tmp_path, [
        {"permission": {"id": "p1", "title": "Run make test", "kind": "execute", "options": ALWAYS}},
        {"permission": {"id": "p2", "title": "Run make lint", "kind": "execute", "options": ALWAYS}},
        {"say": "Ran them."}])
    app = SteerApp(repo, AcpAgent(cmd, str(repo)), watch_files=False, blink=False)
    async with app.run_test(size=SIZE) as pilot:
        prompt = app.query_one(PromptInput)
        await ask(pilot, "run the tests")
        await until(pilot, lambda: app.session.agent.permissions, timeout=30)
        await pilot.pause(0.2)
        bar = app.query_one("#keys").plain
        assert "the agent asks: Ctrl+G" in bar and "✎ typing" in bar, bar
        assert "the agent asks" in app.query_one("#stream-title").text
        for ch in "yes and always no":  # letters meant for the prompt answer nothing
            await pilot.press(ch if ch != " " else "space")
        assert prompt.value == "yes and always no" and app.focused is prompt
        assert not isinstance(app.screen, PermissionScreen) and not logged(agent_log, "permission")
        await pilot.press("ctrl+g")
        await until(pilot, lambda: isinstance(app.screen, PermissionScreen))
        foot = str(app.screen.query_one("#permission-foot").render())
        assert "y allows once" in foot and "a always (this session)" in foot and "Esc refuses" in foot
        await pilot.press("a")  # always: the agent's allow_always option
        await until(pilot, lambda: len(logged(agent_log, "permission")) == 1, timeout=30)
        assert app.focused is prompt  # the dialog closed: the keys are where they were
        await until(pilot, lambda: app.session.agent.permissions, timeout=30)
        await pilot.press("ctrl+g")
        await until(pilot, lambda: isinstance(app.screen, PermissionScreen))
        await pilot.press("escape")  # Esc: the agent's reject
        await until(pilot, lambda: app.session.turn.state == "done", timeout=30)
        assert prompt.value == "yes and always no"
    perms = logged(agent_log, "permission")
    assert [p["outcome"] for p in perms] == [{"optionId": "always", "outcome": "selected"},
                                             {"optionId": "no", "outcome": "selected"}]
