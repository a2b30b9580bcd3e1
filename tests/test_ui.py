"""The app's key flows, driven with Pilot against a real loopback server streaming real
Chat Completions SSE, in real git repositories."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from pilot import SIZE, STALL, Rig, ask, disk, reviewing, until

from app.bench.demo import CALC, CALC_ANSWER, SUB_ANSWER
from app.core.edits.hunks import HunkState
from app.providers.openai_chat import OpenAIChat
from app.server.generation import Faults
from app.ui.app import SteerApp
from app.ui.dialogs.help import HelpScreen
from app.ui.dialogs.hunk_editor import HunkEditor
from app.ui.widgets.diff_view import DiffView
from app.ui.widgets.prompt import PromptInput


async def test_interrupt_keeps_complete_hunks_and_marks_the_unfinished_one(demo):
    async with Rig(demo, CALC_ANSWER, faults=Faults(stall_after=STALL)) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await until(pilot, lambda: len(rig.hunks()) == 2 and app.session.turn.deltas >= STALL)
            h1, h2 = rig.hunks()
            assert h1.state == HunkState.PENDING and h2.state == HunkState.STREAMING
            await pilot.press("escape")  # stopped by the time the key is handled: no wait
            turn = app.session.turn  # (how soon: `steer bench tui`, esc_to_stopped_ms)
            assert turn.state == "interrupted" and not app.session.streaming
            assert h1.state == HunkState.PENDING and not h1.incomplete
            assert h2.state == HunkState.PENDING and h2.incomplete
            assert h2.new[-1] == "    if b == 0:"
            assert disk(demo) == CALC  # nothing written
            assert "interrupted" in app.query_one("#stream").text
            await pilot.pause(0.2)
            assert app.focused is app.query_one(PromptInput)  # stopping moves no key (rule 8)


async def test_accept_while_streaming_then_redirect_keeps_the_decision(demo):
    faults = Faults(stall_after=STALL, only_first=1)
    async with Rig(demo, [CALC_ANSWER, SUB_ANSWER], faults=faults) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await until(pilot, lambda: len(rig.hunks()) == 2 and app.session.turn.deltas >= STALL)
            await pilot.press("tab")  # empty prompt: to the diff, without stopping the model
            assert app.focused is app.query_one(DiffView) and app.session.streaming
            app.query_one(DiffView).select(rig.hunks()[0].id)
            await pilot.press("y")
            await until(pilot, lambda: rig.hunks()[0].state == HunkState.ACCEPTED)
            assert app.session.streaming  # accepted while the answer still streams
            written = disk(demo)
            assert "def add(a: float, b: float) -> float:" in written and "def div(a, b):" in written
            h1 = rig.hunks()[0]
            await pilot.press("i")
            await ask(pilot, "stop there and do sub instead")
            await until(pilot, lambda: len(app.session.turns) == 2 and app.session.turn.state == "done")
            first, second = app.session.turns
            assert first.state == "interrupted" and second.kind == "redirect"
            assert h1.state == HunkState.ACCEPTED and disk(demo) == written
            messages = rig.server.stats.bodies[1]["messages"]
            assert messages[-2] == {"role": "assistant", "content": first.text}
            assert "accepted" in messages[-1]["content"] and "calc.py line 4" in messages[-1]["content"]
            assert "stop there and do sub instead" in messages[-1]["content"]
            news = [h.new for h in rig.hunks()]
            assert ["def sub(a: float, b: float) -> float:"] in news
            assert ["def add(a: float, b: float) -> float:"] in news


async def test_line_mode_accepts_exactly_the_picked_lines(demo):
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            diff = app.query_one(DiffView)
            assert diff.hunk.id == rig.hunks()[0].id  # review starts at the top
            await pilot.press("j")
            h2 = rig.hunks()[1]
            assert diff.hunk is h2 and h2.old == ["def div(a, b):"] and len(h2.new) == 3
            # rows: 0 "-def div(a, b):", 1 "+def div(...) -> float:", 2 "+    if b == 0:", 3 "+raise"
            await pilot.press("v", "j", "j", "space", "space", "y")
            await until(pilot, lambda: h2.state == HunkState.ACCEPTED)
            assert disk(demo) == CALC.replace(
                "def div(a, b):\n",
                "def div(a, b):\n    if b == 0:\n        raise ZeroDivisionError(\"b must not be zero\")\n")
            assert "partly accepted" in h2.note


async def test_reject_accept_file_and_undo(demo):
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            h1, h2, h3 = rig.hunks()
            await pilot.press("n")
            assert h1.state == HunkState.REJECTED and app.query_one(DiffView).hunk is h2
            await pilot.press("Y")
            await until(pilot, lambda: h3.state == HunkState.ACCEPTED)
            assert h2.state == HunkState.ACCEPTED
            text = disk(demo)
            assert "def add(a, b):" in text and "def main() -> None:" in text and "ZeroDivisionError" in text
            await pilot.press("u")
            await until(pilot, lambda: h2.state == HunkState.PENDING)
            assert disk(demo) == CALC and h1.state == HunkState.REJECTED


async def test_edit_a_hunk_inline_before_accepting(demo, monkeypatch):
    monkeypatch.delenv("EDITOR", raising=False)
    monkeypatch.delenv("VISUAL", raising=False)
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            h1 = rig.hunks()[0]
            await pilot.press("e")
            await until(pilot, lambda: isinstance(app.screen, HunkEditor))
            app.screen.query_one("#editor-area").text = "def add(a: int, b: int) -> int:"
            await pilot.press("ctrl+s")
            await until(pilot, lambda: h1.state == HunkState.ACCEPTED)
            assert disk(demo) == CALC.replace("def add(a, b):", "def add(a: int, b: int) -> int:")


async def test_an_inline_edit_that_does_not_parse_is_not_written_at_the_first_ctrl_s(
        demo, monkeypatch):
    monkeypatch.delenv("EDITOR", raising=False)
    monkeypatch.delenv("VISUAL", raising=False)
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            h1 = rig.hunks()[0]
            await pilot.press("e")
            await until(pilot, lambda: isinstance(app.screen, HunkEditor))
            area = app.screen.query_one("#editor-area")
            area.text = "   )(" + area.text
            await pilot.press("ctrl+s")
            await pilot.pause(0.2)
            assert isinstance(app.screen, HunkEditor)  # still editing: it says why
            warning = app.screen.query_one("#editor-warning")
            assert warning.display and "calc.py would no longer parse" in str(warning.render())
            assert disk(demo) == CALC and h1.state == HunkState.PENDING
            area.text = "def add(a: int, b: int) -> int:"  # fixed: written at once
            await pilot.press("ctrl+s")
            await until(pilot, lambda: h1.state == HunkState.ACCEPTED)
            assert disk(demo) == CALC.replace("def add(a, b):", "def add(a: int, b: int) -> int:")
            # a broken one, twice on purpose: the second Ctrl+S writes it as it is
            h2 = rig.hunks()[1]
            await pilot.press("e")
            await until(pilot, lambda: isinstance(app.screen, HunkEditor) and app.screen.hunk is h2)
            app.screen.query_one("#editor-area").text = "def oops(:"
            await pilot.press("ctrl+s")
            await pilot.pause(0.2)
            assert isinstance(app.screen, HunkEditor) and h2.state == HunkState.PENDING
            await pilot.press("ctrl+s")
            await until(pilot, lambda: h2.state == HunkState.ACCEPTED)
            assert "def oops(:" in disk(demo)


async def test_queued_follow_up_runs_when_the_answer_ends(demo):
    go_on = asyncio.Event()  # the answer ends once the follow-up is queued, however long that took
    faults = Faults(stall_after=STALL, resume=go_on, only_first=1)
    async with Rig(demo, [CALC_ANSWER, SUB_ANSWER], faults=faults) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await until(pilot, lambda: app.session.streaming and app.session.turn.deltas >= STALL)
            app.query_one(PromptInput).value = "then sub too"
            await pilot.press("tab")
            assert app.session.queue == ["then sub too"] and app.query_one("#queue").display
            go_on.set()
            await until(pilot, lambda: len(app.session.turns) == 2 and app.session.turn.state == "done")
            assert app.session.turns[0].state == "done" and app.session.turns[1].kind == "follow-up"
            assert "then sub too" in rig.server.stats.bodies[1]["messages"][-1]["content"]
            assert len(rig.hunks()) == 4 and not app.session.queue


async def test_queued_messages_can_be_edited_and_dropped(demo):
    async with Rig(demo, CALC_ANSWER, faults=Faults(stall_after=STALL)) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await until(pilot, lambda: app.session.streaming and app.session.turn.deltas >= STALL)
            for text in ("first", "second"):
                app.query_one(PromptInput).value = text
                await pilot.press("tab")
            queue = app.query_one("#queue")
            queue.focus()
            queue.index = 0
            await pilot.press("d")
            assert app.session.queue == ["second"]
            await pilot.press("e")
            assert app.session.queue == [] and app.query_one(PromptInput).value == "second"
            assert app.focused is app.query_one(PromptInput)


async def test_esc_never_moves_keys_between_typing_and_reviewing(demo):
    """The focus model: Tab switches between the prompt and the review, Esc never does (a
    review key must not land in the prompt as text, nor a letter in the diff as a decision);
    a printable key that is no review key starts a message; the context line says where
    keys go."""
    seen = []
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
            prompt, diff = app.query_one(PromptInput), app.query_one(DiffView)
            keys = app.query_one("#keys")  # the key bar says where keys go
            assert app.focused is prompt and keys.plain.startswith(" ✎ typing")
            await pilot.press("escape")
            assert app.focused is prompt
            await pilot.press("tab")  # empty prompt: to the review
            assert app.focused is diff and keys.plain.startswith(" ◆ reviewing")
            assert "y Accept" not in keys.plain and "j Next" in keys.plain  # nothing to accept yet
            await pilot.press("escape")
            assert app.focused is diff
            await pilot.press("x")  # not a review key: a message starts, with that letter
            assert app.focused is prompt and prompt.value == "x"
            assert any(isinstance(m, DiffView.StartMessage) and m.text == "x" for m in seen)
            prompt.value = ""
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            await pilot.press("v")  # line mode; Esc leaves it and stays in the review
            assert diff.line_mode and "LINES" in app.query_one("#diff-title").text
            await pilot.press("escape")
            assert not diff.line_mode and app.focused is diff
            await pilot.press("y")  # a review key in the review decides, never types
            await until(pilot, lambda: rig.hunks()[0].state == HunkState.ACCEPTED)
            assert prompt.value == ""
            await pilot.press("tab")
            assert app.focused is prompt


async def test_at_path_completion_adds_context(demo):
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "README.md" in app.main.files_pane.files)
            await pilot.press(*"explain @RDM")
            prompt = app.query_one(PromptInput)
            assert prompt.completion == "README.md"
            assert "README.md" in app.query_one("#context").text
            await pilot.press("tab")
            assert prompt.value == "explain @README.md "
            await pilot.press("enter")
            assert app.session.context == ["calc.py", "README.md"]
            await until(pilot, lambda: rig.server.stats.bodies)
            assert "README.md\n```markdown\n# Demo" in rig.server.stats.bodies[0]["messages"][1]["content"]


async def test_help_screen_lists_rebound_keys(demo, tmp_path):
    cfg = Path(os.environ["XDG_CONFIG_HOME"]) / "steer"
    cfg.mkdir(parents=True)
    (cfg / "config.toml").write_text('[keys]\naccept_hunk = "a"\n')
    from app.config import load_settings

    async with Rig(demo, CALC_ANSWER) as rig:
        rig.app = SteerApp(demo, OpenAIChat(rig.server.base_url, "r"), load_settings(), watch_files=False)
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("f1")
            assert isinstance(app.screen, HelpScreen)
            assert app.screen.keys["accept_hunk"] == "a"
            await pilot.press("escape")
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            await pilot.press("a")  # the rebound accept key
            await until(pilot, lambda: rig.hunks()[0].state == HunkState.ACCEPTED)


async def test_theme_switch_is_remembered(demo):
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            assert app.theme == "steer-dark"
            app.query_one(DiffView).focus()
            await pilot.press("t")
            assert app.theme == "steer-light"
    state = json.loads((Path(os.environ["XDG_STATE_HOME"]) / "steer" / "ui.json").read_text())
    assert state["theme"] == "steer-light"
    async with Rig(demo, CALC_ANSWER) as rig:
        async with rig.app.run_test(size=SIZE):
            assert rig.app.theme == "steer-light"


async def test_user_themes_load_and_broken_ones_are_reported(demo):
    themes = Path(os.environ["XDG_CONFIG_HOME"]) / "steer" / "themes"
    themes.mkdir(parents=True)
    (themes / "mine.toml").write_text('name = "mine"\nprimary = "#ff0000"\ndark = true\n')
    (themes / "broken.toml").write_text('name = "broken"\ncolour = 3\n')
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            assert "mine" in app.theme_names and "broken" not in app.theme_names
            app.theme = "mine"
            await pilot.pause()
            assert app.theme_variables["diff-added-bg"]  # defaults filled in


async def test_a_change_on_disk_in_a_hunk_makes_it_a_conflict(demo):
    async with Rig(demo, CALC_ANSWER, watch=True) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await until(pilot, lambda: app.session.turn.state == "done")
            h1, h2, h3 = rig.hunks()
            await asyncio.sleep(0.3)  # let the watcher settle
            (demo / "calc.py").write_text(CALC.replace("    return a / b", "    return a / b  # mine"))
            await until(pilot, lambda: h2.state == HunkState.CONFLICT)
            assert any("# mine" in line for line in h2.old)  # both sides: yours and the proposal
            assert any("ZeroDivisionError" in line for line in h2.new)
            assert h1.state == HunkState.PENDING and h3.state == HunkState.PENDING
            await reviewing(pilot)
            app.query_one(DiffView).select(h2.id)
            await pilot.press("y")  # a plain accept does not write over the user's line
            await pilot.pause(0.2)
            assert h2.state == HunkState.CONFLICT
            assert "# mine" in disk(demo) and "ZeroDivisionError" not in disk(demo)
            await until(pilot, lambda: " M" in app.query_one("#tree").label("calc.py"))


@pytest.mark.parametrize("rate", [0])
async def test_unthrottled_stream_renders_completely(demo, rate):
    """At full speed the UI must not lose or reorder text."""
    big = CALC_ANSWER * 3
    async with Rig(demo, big, rate=rate) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "go")
            await until(pilot, lambda: app.session.turn.state == "done")
            await pilot.pause(0.05)
            # the conversation: every prose line, in order, and a card per block of edits
            shown = app.query_one("#stream").text
            prose = [line for line in app.session.pending.prose if line.strip()]
            at = 0
            for line in prose:
                at = shown.index(line, at) + len(line)
            assert "✎ calc.py  #1 #2 #3  pending  +5 −3" in shown and "<<<<<<< SEARCH" not in shown
            # the answer repeats its blocks: those cannot apply twice, each says so on a line
            assert shown.count("⚠ calc.py: the lines to replace were not found") == 6
            # the raw view: exactly what the model sent, nothing lost or reordered
            await pilot.press("ctrl+o", "w")  # to the conversation; w shows the raw text
            await until(pilot, lambda: big.rstrip("\n") in app.query_one("#stream").text)


async def test_the_app_completes_an_interrupted_accept_when_it_starts(demo):
    """A torn journal step (a crash between files) is completed as the app opens, and said."""
    from app.core.disk.journal import Journal
    from app.core.disk.workspace import Content, Workspace

    ws = Workspace(demo)
    journal = Journal.for_workspace(ws)
    journal.begin("accept", "accept: hunks #1 in calc.py",
                  [("calc.py", Content(data=CALC.encode()), Content(data=b"done = True\n"))])
    assert journal.torn()
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        notes: list[str] = []
        app.notify = lambda message, **kw: notes.append(str(message))  # type: ignore[method-assign]
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: not journal.torn() and notes)
    assert disk(demo) == "done = True\n"
    assert any("completed an interrupted accept" in n for n in notes)
