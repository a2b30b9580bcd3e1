"""The app with saved sessions (Pilot, a real loopback server, a real repository): a resumed
session looks as it did, a reject can say why and the model hears it, rewind from the app."""

from __future__ import annotations

from pilot import SIZE, ask, disk, reviewing, until

from app.bench.demo import CALC, CALC_ANSWER, SUB_ANSWER
from app.core.edits.hunks import HunkState
from app.providers.openai_chat import OpenAIChat
from app.server.chat_server import ChatServer
from app.ui.app import SteerApp
from app.ui.dialogs.reject_reason import RejectReason
from app.ui.dialogs.rewind import RewindScreen
from app.ui.widgets.diff_view import DiffView
from app.ui.widgets.stream_view import StreamView


def app_for(demo, server, **saving) -> SteerApp:
    return SteerApp(demo, OpenAIChat(server.base_url, "replay"), context=["calc.py"],
                    watch_files=False, blink=False, saving=saving)


def screen_text(app) -> dict[str, str]:
    return {"answer": app.query_one("#stream", StreamView).text,
            "status": str(app.query_one("#status").text)}


async def test_a_resumed_session_looks_as_it_did(demo):
    # streamed at a human pace, as a user sees it
    server = ChatServer(replay=[CALC_ANSWER, SUB_ANSWER], rate=600)
    await server.start()
    try:
        first = app_for(demo, server)
        async with first.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            await pilot.press("n")  # reject #1
            await until(pilot, lambda: first.session.pending.hunks[0].state == HunkState.REJECTED)
            await pilot.press("tab")
            await ask(pilot, "and sub")
            await until(pilot, lambda: len(first.session.turns) == 2
                        and first.session.turn.state == "done")
            await pilot.pause(0.3)
            before = screen_text(first)
            hunks = [(h.id, h.state) for h in first.session.pending.hunks]
        again = app_for(demo, server, resume_it=True)
        async with again.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "and sub" in screen_text(again)["answer"])
            await pilot.pause(0.3)
            after = screen_text(again)
            # both turns: their prose, their edit cards and where each hunk stands, their marks
            assert after["answer"] == before["answer"]
            assert "✎ calc.py" in after["answer"]
            assert after["status"] == before["status"]
            assert [(h.id, h.state) for h in again.session.pending.hunks] == hunks
            diff = again.query_one(DiffView)
            assert diff.fd is not None and diff.fd.path == "calc.py"
    finally:
        await server.close()


async def test_reject_with_a_reason_and_the_model_hears_it(demo):
    server = ChatServer(replay=[CALC_ANSWER, SUB_ANSWER])
    await server.start()
    try:
        app = app_for(demo, server)
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            first = app.query_one(DiffView).hunk
            await pilot.press("R")
            await until(pilot, lambda: isinstance(app.screen, RejectReason))
            await pilot.press(*"keep add untyped")
            await pilot.press("enter")
            await until(pilot, lambda: first.state == HunkState.REJECTED)
            assert first.reason == "keep add untyped"
            await pilot.press("tab")
            await ask(pilot, "and sub")
            await until(pilot, lambda: len(server.stats.bodies) == 2)
            msg = server.stats.bodies[1]["messages"][-1]["content"]
            assert "(reason: keep add untyped)" in msg
            # Esc in the reason box rejects nothing
            await until(pilot, lambda: app.session.turn.state == "done")
            await reviewing(pilot)
            h = app.query_one(DiffView).hunk
            await pilot.press("R")
            await until(pilot, lambda: isinstance(app.screen, RejectReason))
            await pilot.press("escape")
            await pilot.pause(0.1)
            assert h.state != HunkState.REJECTED
    finally:
        await server.close()


async def test_rewind_files_and_conversation_from_the_app_then_redo(demo):
    server = ChatServer(replay=[CALC_ANSWER, SUB_ANSWER])
    await server.start()
    try:
        app = app_for(demo, server)
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            await pilot.press("y")  # turn 1 writes add()
            await until(pilot, lambda: disk(demo) != CALC)
            after_first = disk(demo)
            await pilot.press("tab")
            await ask(pilot, "and sub")
            await until(pilot, lambda: len(app.session.turns) == 2
                        and app.session.turn.state == "done")
            await reviewing(pilot)
            await pilot.press("A")  # turn 2 writes the rest
            await until(pilot, lambda: "def sub(a: float" in disk(demo))
            await pilot.press("ctrl+b")
            await until(pilot, lambda: isinstance(app.screen, RewindScreen))
            await pilot.press("b")  # both, to before turn 2 (the last one is highlighted)
            await until(pilot, lambda: len(app.session.turns) == 1)
            await until(pilot, lambda: disk(demo) == after_first)
            await pilot.pause(0.3)
            text = screen_text(app)["answer"]
            assert "add type hints" in text and "and sub" not in text
            await pilot.press("ctrl+b")
            await until(pilot, lambda: isinstance(app.screen, RewindScreen))
            await pilot.press("r")  # redo: the files of turn 2 come back
            await until(pilot, lambda: "def sub(a: float" in disk(demo))
    finally:
        await server.close()
