"""Rewind in the app, as its keys go: the list stops at its ends (from the last turn, ↓ does
not land on the first, which rewinds everything), and after rewinding every turn Ctrl+B
still offers the redo."""

from __future__ import annotations

from pilot import SIZE, ask, disk, reviewing, until
from test_session_ui import app_for

from app.bench.demo import CALC, CALC_ANSWER, SUB_ANSWER
from app.server.chat_server import ChatServer
from app.ui.dialogs.rewind import RewindScreen


async def test_the_list_does_not_wrap_and_redo_survives_rewinding_everything(demo):
    server = ChatServer(replay=[CALC_ANSWER, SUB_ANSWER])
    await server.start()
    try:
        app = app_for(demo, server)
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            await pilot.press("y")
            await until(pilot, lambda: disk(demo) != CALC)
            written = disk(demo)
            await pilot.press("tab")
            await ask(pilot, "and sub")
            await until(pilot, lambda: len(app.session.turns) == 2 and app.session.turn.state == "done")
            await pilot.press("ctrl+b")
            await until(pilot, lambda: isinstance(app.screen, RewindScreen))
            turns = app.screen.turns
            assert turns.highlighted == 1  # the last turn
            await pilot.press("down", "down")
            assert turns.highlighted == 1  # stays: no wrap to turn 1
            await pilot.press("up", "up", "up")
            assert turns.highlighted == 0  # and no wrap the other way
            await pilot.press("b")  # both, to before turn 1: everything
            await until(pilot, lambda: not app.session.turns and disk(demo) == CALC)
            await pilot.press("ctrl+b")  # the redo is still there
            await until(pilot, lambda: isinstance(app.screen, RewindScreen))
            assert "r puts the files of the last rewind back" in str(
                app.screen.query_one("#rewind-title").render())
            await pilot.press("r")
            await until(pilot, lambda: disk(demo) == written)
    finally:
        await server.close()


async def test_u_says_what_it_would_undo_before_it_is_pressed(demo):
    server = ChatServer(replay=[CALC_ANSWER])
    await server.start()
    try:
        app = app_for(demo, server)
        async with app.run_test(size=(200, 40)) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            bar = app.query_one("#keys")
            assert "u Undo" not in bar.plain  # nothing to undo yet
            await pilot.press("y")
            await until(pilot, lambda: disk(demo) != CALC)
            await until(pilot, lambda: "u Undo hunk #1 in calc.py" in bar.plain)  # said first
            await pilot.press("u")
            await until(pilot, lambda: disk(demo) == CALC)
            await until(pilot, lambda: "u Undo" not in bar.plain)
    finally:
        await server.close()
