"""A failed request loses nothing, in the app: driven with Pilot against the real loopback
server with injected faults (401, 500, a refused connection, a stall), in a real git
repository. The instruction comes back to the prompt (never over a draft), Up and Down
recall what was sent, one key sends the failed request again, retries and stalls show."""

from __future__ import annotations

import io
import socket

from conftest import init_repo
from pilot import SIZE, STALL, Rig, ask, until
from rich.console import Console
from test_acp import SRC, script
from textual.widgets import Static

from app.bench.demo import CALC_ANSWER
from app.providers.acp import AcpAgent
from app.providers.openai_chat import OpenAIChat
from app.server.generation import Faults
from app.ui import actions
from app.ui.app import SteerApp
from app.ui.dialogs.help import HelpScreen
from app.ui.widgets.key_bar import KeyBar
from app.ui.widgets.line import Line
from app.ui.widgets.prompt import PromptInput
from app.view.status import STALL_SHOWN


def stream_text(app) -> str:
    return app.query_one("#stream").text


def keys(app) -> str:
    return app.query_one(KeyBar).plain


def failed_and_settled(app):
    return lambda: app.session.failed is not None and "f5 Retry" in keys(app)


async def test_after_a_401_the_prompt_holds_it_up_recalls_the_one_before_and_f5_sends_it_once(demo):
    async with Rig(demo, CALC_ANSWER, faults=Faults(status=401, fail_first=2)) as rig:
        app, stats = rig.app, rig.server.stats
        async with app.run_test(size=SIZE) as pilot:
            prompt = app.query_one(PromptInput)
            await ask(pilot, "add type hints")
            await until(pilot, failed_and_settled(app))
            assert prompt.value == "add type hints"  # back, to edit or send again
            prompt.value = ""
            await ask(pilot, "add docstrings")
            await until(pilot, lambda: len(app.session.turns) == 2 and app.session.failed)
            await until(pilot, lambda: prompt.value == "add docstrings")
            assert app.focused is prompt  # nothing moved the keys
            text = stream_text(app)
            assert "✗ HTTP 401 from 127.0.0.1" in text and "injected failure" in text
            assert "API key" in text and "F5 sends it again" in text
            await pilot.press("up")
            assert prompt.value == "add type hints"  # the one before the failed one
            await pilot.press("up")
            assert prompt.value == "add type hints"  # nothing older
            await pilot.press("down")
            assert prompt.value == "add docstrings"  # past the newest: the draft
            assert len(stats.requests) == 2
            await pilot.press("f5")
            await until(pilot, lambda: app.session.turn.state == "done")
            assert len(stats.requests) == 3  # exactly one new request, and it succeeded
            turn = app.session.turn
            assert turn.instruction == "add docstrings" and turn.complete and turn.retries == []
            assert stats.bodies[2]["messages"] == stats.bodies[1]["messages"]  # the same request
            assert prompt.value == ""  # it was sent: not left behind as a draft
            assert app.session.failed is None
            await until(pilot, lambda: "f5 Retry" not in keys(app))
            await pilot.press("f5")  # nothing failed now: nothing is sent
            await pilot.pause(0.2)
            assert len(stats.requests) == 3


async def test_a_draft_typed_while_it_retried_is_kept_and_each_retry_showed(demo):
    async with Rig(demo, CALC_ANSWER, faults=Faults(status=500)) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            prompt = app.query_one(PromptInput)
            await ask(pilot, "add type hints")
            title = app.query_one("#stream-title", Line)
            await until(pilot, lambda: "retrying 2/3 in" in title.text)
            assert title.text.startswith("Conversation · retrying 2/3 in 0.")
            assert " s · Esc to stop · HTTP 500 · 0 tok · " in title.text
            await pilot.press(*"my own draft")  # typed while steer waits to retry
            await until(pilot, failed_and_settled(app))
            assert len(rig.server.stats.requests) == 3  # 1 + 2 retries, each one visible
            text = stream_text(app)
            assert "↻ HTTP 500: retrying 2/3 in 0.5 s" in text
            assert "↻ HTTP 500: retrying 3/3 in 1 s" in text
            assert "(3 attempts)" in text and "The server failed" in text
            assert prompt.value == "my own draft"  # never overwritten
            await pilot.press("up")
            assert prompt.value == "add type hints"  # the failed instruction is a recall away
            await pilot.press("down")
            assert prompt.value == "my own draft"


async def test_a_refused_connection_puts_the_instruction_back_with_what_to_do(demo):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nobody listens there once the block ends
    app = SteerApp(demo, OpenAIChat(f"http://127.0.0.1:{port}/v1", "m", retries=0),
                   context=["calc.py"], watch_files=False, blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ask(pilot, "add type hints")
        await until(pilot, failed_and_settled(app))
        assert app.query_one(PromptInput).value == "add type hints"
        text = stream_text(app)
        assert "connection refused. Is the server running? Check --base-url" in text
        assert "F5 sends it again" in text
        app.query_one(PromptInput).value = ""
        await pilot.press("f5")  # a new request, refused again
        await until(pilot, lambda: len(app.session.turns) == 2 and app.session.failed)
        await until(pilot, lambda: app.query_one(PromptInput).value == "add type hints")


async def test_a_stall_shows_no_data_for_n_seconds_and_esc_stops_it(demo):
    faults = Faults(stall_after=STALL, stall_seconds=30)
    async with Rig(demo, CALC_ANSWER, faults=faults) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            title = app.query_one("#stream-title", Line)
            await until(pilot, lambda: "no data for 3 s" in title.text)
            assert title.text.startswith("Conversation · no data for 3 s · Esc to stop · ")
            await until(pilot, lambda: "no data for 4 s" in title.text)  # counts up, no token
            assert app.session.turn.deltas == STALL
            await pilot.press("escape")
            assert app.session.turn.state == "interrupted"
            await until(pilot, lambda: "no data" not in title.text)
            assert app.session.failed is None  # it said something: not a failed request


async def test_the_retry_key_is_in_the_help_and_in_the_palette_only_when_a_request_failed(demo):
    async with Rig(demo, CALC_ANSWER, faults=Faults(status=401, fail_first=1)) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            titles = lambda: [a.palette for a in actions.palette(app.main.availability)]  # noqa: E731
            assert "Retry the failed request" not in titles() and "f5" not in keys(app)
            await ask(pilot, "add type hints")
            await until(pilot, failed_and_settled(app))
            assert "Retry the failed request" in titles()
            await pilot.press("f1")
            help_screen = app.screen
            assert isinstance(help_screen, HelpScreen)
            console = Console(record=True, width=200, file=io.StringIO())
            for static in help_screen.query(Static):
                console.print(static.content)  # what the help screen was given to draw
            shown = console.export_text()
            assert "F5" in shown and "send the request that failed again" in shown


async def test_an_agent_waiting_for_the_users_decision_is_not_a_stall(tmp_path, monkeypatch):
    monkeypatch.setenv("STEER_TEST_AGENT_LOG", str(tmp_path / "agent.log"))
    repo = init_repo(tmp_path / "r", {"f.txt": SRC})
    cmd = script(tmp_path, [
        {"write": {"path": "f.txt", "content": SRC.replace("line 3\n", "line three\n")}},
        {"say": "Changed line 3."}])
    app = SteerApp(repo, AcpAgent(cmd, str(repo)), watch_files=False, blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ask(pilot, "spell out line 3")
        await until(pilot, lambda: app.session.agent.waiting_for_user, timeout=30)
        title = app.query_one("#stream-title", Line)
        await pilot.pause(STALL_SHOWN + 1)  # silent, but waiting on the user's accept
        assert app.session.streaming and "no data" not in title.text
        app.session.turn.last_data = app.session.turn.started  # (the same, as a stall would be)
        app.session.agent.writes.clear()  # nobody asks the user anything now
        await until(pilot, lambda: "no data for" in title.text)
