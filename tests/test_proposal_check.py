"""Every finished proposal checked before any accept (app/core/variants/proposal_check.py):
the check starts when the answer ends, runs in a throwaway worktree off the event loop, and
its verdict lands on the answer (title, a line under it); F sends a failure back as the next
message and the fix is checked in turn; ! checks what Accept all would leave on disk. The
real Session and app (Pilot), real pytest as the check, a real server on 127.0.0.1."""

from __future__ import annotations

import asyncio

from calc_check import BROKEN, CALC, CHECK, FIXED, GOOD, TESTS
from conftest import git, init_repo, sr
from pilot import SIZE, reviewing, until

from app.config import Settings
from app.core.conversation.session import Session
from app.core.disk.workspace import Workspace
from app.core.edits.hunks import OPEN
from app.core.review.events import Checked
from app.core.variants.proposal_check import RUNNING, ProposalCheck, would_hold
from app.providers.openai_chat import OpenAIChat
from app.server.chat_server import ChatServer
from app.ui.app import SteerApp
from app.ui.widgets.prompt import PromptInput


def checked(session: Session) -> asyncio.Event:
    """Set when a check of the session's proposal ends (not when one starts)."""
    done = asyncio.Event()
    session.changes.subscribe(lambda ev: done.set() if type(ev) is Checked
                              and ev.turn.check != RUNNING else None)
    return done


async def test_a_finished_proposal_is_checked_and_its_failure_goes_back_in_one_message(tmp_path):
    root = init_repo(tmp_path / "r", {"calc.py": CALC, "test_calc.py": TESTS})
    head, index = git(root, "rev-parse", "HEAD"), git(root, "ls-files", "-s")
    server = ChatServer(replay=[BROKEN, FIXED])
    await server.start()
    session = Session(Workspace(root), OpenAIChat(server.base_url, "replay"),
                      fmt="search_replace", context=["calc.py"])
    check = ProposalCheck(session, CHECK, timeout=120)
    try:
        done = checked(session)
        turn = await session.ask("add sub")
        assert turn.check == RUNNING  # started as the answer ended, not awaited by it
        await done.wait()
        assert turn.check == "✗ check: 1 failed (test_sub)", turn.check_output
        assert "assert 3 == 1" in turn.check_output
        assert (root / "calc.py").read_text() == CALC  # the user's tree, index and refs:
        assert git(root, "ls-files", "-s") == index and git(root, "rev-parse", "HEAD") == head
        message = check.failure()
        assert message is not None and CHECK in message and "test_sub" in message
        done.clear()
        fix = await session.ask(message)  # what F sends
        assert fix.kind == "follow-up"  # the same change set: the fix goes onto the proposal
        first, second = server.stats.bodies
        assert second["messages"][:len(first["messages"])] == first["messages"]
        assert second["messages"][-1] == {"role": "user", "content": message}
        await done.wait()
        assert fix.check.startswith("✓ check") and check.failure() is None
        assert would_hold(session.pending)["calc.py"].decode() == GOOD
        session.review.accept_all()
        assert (root / "calc.py").read_text() == GOOD
        assert git(root, "worktree", "list").count("\n") == 1  # no worktree left
    finally:
        await check.aclose()
        await session.aclose()
        await server.close()


async def test_the_recheck_after_a_partial_accept_sees_the_accepted_and_the_open_hunks(tmp_path):
    two = ("Two changes.\n\n" + sr("calc.py", CALC, CALC + "\n\ndef sub(a, b):\n    return a - b\n")
           + "\n" + sr("notes.txt", "old\n", "new\n"))
    root = init_repo(tmp_path / "r", {"calc.py": CALC, "test_calc.py": TESTS, "notes.txt": "old\n"})
    server = ChatServer(replay=[two])
    await server.start()
    session = Session(Workspace(root), OpenAIChat(server.base_url, "replay"),
                      fmt="search_replace", context=["calc.py", "notes.txt"])
    check = ProposalCheck(session, CHECK, timeout=120)
    try:
        done = checked(session)
        await session.ask("both")
        await done.wait()
        calc = next(h for h in session.pending.hunks if h.path == "calc.py")
        session.review.accept([calc.id])  # on disk now; notes.txt still open
        held = would_hold(session.pending)
        assert set(held) == {"notes.txt"} and held["notes.txt"] == b"new\n"
        done.clear()
        said = check.recheck()
        assert "Accept all would write (1 file(s))" in said
        await done.wait()
        assert session.turn.check.startswith("✓ check")
        session.review.reject([h.id for h in session.pending.hunks if h.state in OPEN])
        assert check.recheck().startswith("no open hunks")
    finally:
        await check.aclose()
        await session.aclose()
        await server.close()


async def test_in_the_app_the_verdict_shows_under_the_answer_and_f_sends_the_failure(tmp_path):
    root = init_repo(tmp_path / "r", {"calc.py": CALC, "test_calc.py": TESTS})
    server = ChatServer(replay=[BROKEN, FIXED])
    await server.start()
    app = SteerApp(root, OpenAIChat(server.base_url, "replay"),
                   Settings(format="search_replace", check=CHECK), context=["calc.py"],
                   watch_files=False, blink=False)
    try:
        async with app.run_test(size=SIZE) as pilot:
            app.query_one(PromptInput).value = "add sub"
            await pilot.press("enter")
            await until(pilot, lambda: app.session.turn.check.startswith("✗"), timeout=180)
            await pilot.pause()
            shown = app.query_one("#stream").text
            assert "✗ check: 1 failed (test_sub) · F sends it back" in shown
            assert "✗ check: 1 failed (test_sub)" in app.main.conversation.heading.text
            await reviewing(pilot)  # F is the review's: in the prompt it is a letter typed
            await pilot.press("F")
            await until(pilot, lambda: len(server.stats.bodies) == 2)
            assert "test_sub" in server.stats.bodies[1]["messages"][-1]["content"]
            await until(pilot, lambda: app.session.turn.check.startswith("✓"), timeout=180)
            await pilot.press("A")
            await until(pilot, lambda: (root / "calc.py").read_text() == GOOD)
    finally:
        await server.close()
