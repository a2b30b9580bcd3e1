"""Dialogs show outside text and never obey it (DESIGN rule 12), and F1 opens the help from
inside every one of them, closing it goes back there with the focus where it was (Pilot: a
real ACP agent, a real loopback server, a real repository)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import git, init_repo
from outside import HOSTILE, obeyable, screen_lines
from pilot import SIZE, ask, reviewing, until
from test_acp import SRC, logged, script

from app.bench.demo import CALC, CALC_ANSWER
from app.providers.acp import AcpAgent
from app.providers.openai_chat import OpenAIChat
from app.server.chat_server import ChatServer
from app.ui.app import SteerApp
from app.ui.dialogs.commit import CommitScreen
from app.ui.dialogs.help import HelpScreen
from app.ui.dialogs.permission import PermissionScreen
from app.ui.dialogs.reject_reason import RejectReason
from app.ui.dialogs.rewind import RewindScreen
from app.ui.widgets.stream_view import StreamView
from app.view.outside_text import name, visible

TITLE = "[@click=app.quit]CLICK-HERE[/] Edit x.py \x1b]2;PWNED\x07 [/] \u202eevil"


@pytest.fixture
def agent_log(tmp_path: Path, monkeypatch) -> Path:
    path = tmp_path / "agent.log"
    monkeypatch.setenv("STEER_TEST_AGENT_LOG", str(path))
    return path


async def help_and_back(pilot, dialog_type) -> None:
    """F1 inside the dialog opens the help over it; Esc closes the help and the dialog is
    there again, its focus where it was."""
    app = pilot.app
    dialog = app.screen
    assert isinstance(dialog, dialog_type)
    focused = app.focused
    await pilot.press("f1")
    await until(pilot, lambda: isinstance(app.screen, HelpScreen))
    await pilot.press("escape")
    await until(pilot, lambda: app.screen is dialog)
    await pilot.pause(0.05)
    assert app.focused is focused


async def test_an_agents_titles_and_options_are_shown_never_obeyed(tmp_path, agent_log):
    repo = init_repo(tmp_path / "r", {"f.txt": SRC})
    cmd = script(tmp_path, [{"hostile": TITLE}])
    app = SteerApp(repo, AcpAgent(cmd, str(repo)), watch_files=False, blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ask(pilot, "look")
        await until(pilot, lambda: app.session.agent.permissions, timeout=30)
        await pilot.press("ctrl+g")  # the user opens the agent's question
        await until(pilot, lambda: isinstance(app.screen, PermissionScreen)
                    and app.screen.query("#permission-title"), timeout=30)
        dialog = app.screen
        title = dialog.query_one("#permission-title")
        assert str(title.render()) == name(f"The agent asks: ask {TITLE}")
        assert str(dialog.query_one("#permission-tool").render()).startswith(name(f"tool: ask {TITLE}"))
        assert str(dialog.query_one("#permission-options").render()) == (
            f"  1  {name('allow ' + TITLE)}\n  2  {name('reject ' + TITLE)}")
        assert obeyable(screen_lines(app)) == []
        # the words CLICK-HERE are text: a click on them runs nothing
        await pilot.click("#permission-title", offset=(len("The agent asks: ask [@click=app.quit]") + 2, 0))
        await pilot.pause(0.2)
        assert app.is_running and app.screen is dialog
        await help_and_back(pilot, PermissionScreen)
        await pilot.press("2")  # reject
        await until(pilot, lambda: app.session.turn.state == "done", timeout=30)
        await pilot.pause(0.2)
        text = app.query_one(StreamView).text
        for line in (f"thinking… thinking {visible(TITLE)}", f"▸ plan: 0/1 done · now: plan {visible(TITLE)}",
                     f"✓ tool {visible(TITLE)}", f"said {visible(TITLE)}"):
            assert line in text, line
        assert obeyable(screen_lines(app)) == []
    perms = logged(agent_log, "permission")
    assert perms and perms[0]["outcome"] == {"optionId": "no", "outcome": "selected"}


async def test_f1_opens_the_help_from_every_dialog_and_comes_back(demo):
    proposal = f"fix \x1b]2;PWNED\x07 the [/] thing\n\nbody \x1b[31mred {HOSTILE[:20]}"
    server = ChatServer(replay=[CALC_ANSWER, proposal])
    await server.start()
    try:
        app = SteerApp(demo, OpenAIChat(server.base_url, "replay"), context=["calc.py"],
                       watch_files=True, blink=False, saving={})
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            # the reject-reason prompt: F1 is help, `?` is text there
            await pilot.press("R")
            await until(pilot, lambda: isinstance(app.screen, RejectReason))
            await pilot.press("question_mark")
            assert app.screen.query_one("#reject-input").value == "?"
            await help_and_back(pilot, RejectReason)
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, RejectReason))
            # the commit dialog, with a message the model proposed
            await pilot.press("y")
            await until(pilot, lambda: CALC != (demo / "calc.py").read_text())
            git(demo, "add", "calc.py")
            await until(pilot, lambda: app.main.availability.in_git)
            app.main.review.action_commit()
            await until(pilot, lambda: isinstance(app.screen, CommitScreen))
            await pilot.press("ctrl+g")
            area = app.screen.query_one("#commit-message")
            await until(pilot, lambda: "PWNED" in area.text)
            assert area.text.startswith("fix \\x1b]2;PWNED\\x07 the [/] thing")
            assert "body \\x1b[31mred" in area.text and obeyable(screen_lines(app)) == []
            await help_and_back(pilot, CommitScreen)
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, CommitScreen))
            # the rewind list
            await pilot.press("ctrl+b")
            await until(pilot, lambda: isinstance(app.screen, RewindScreen))
            await help_and_back(pilot, RewindScreen)
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, RewindScreen))
    finally:
        await server.close()


async def test_the_rewind_list_shows_instructions_and_paths_as_written(tmp_path):
    slug = "app/[slug]/page.tsx"
    root = init_repo(tmp_path / "r", {slug: CALC})
    server = ChatServer(replay=CALC_ANSWER.replace("calc.py", slug))
    await server.start()
    try:
        app = SteerApp(root, OpenAIChat(server.base_url, "replay"), context=[slug],
                       watch_files=False, blink=False, saving={})
        async with app.run_test(size=SIZE) as pilot:
            said = "fix arr[i] [/] \x1b]2;PWNED\x07"
            await ask(pilot, said)
            await reviewing(pilot)
            await pilot.press("y")
            await until(pilot, lambda: CALC != (root / slug).read_text())
            await pilot.press("ctrl+b")
            await until(pilot, lambda: isinstance(app.screen, RewindScreen))
            await pilot.pause(0.1)
            lines = screen_lines(app)
            assert any(f"  1  {name(said)}" in line for line in lines)
            assert any(f"files: {slug}" in line for line in lines)
            assert obeyable(lines) == []
    finally:
        await server.close()
