"""Every finished proposal checked before any accept (app/core/variants/proposal_check.py):
the check starts when the answer ends, runs in a throwaway worktree off the event loop, and
its verdict lands on the answer (title, a line under it); F sends a failure back as the next
message and the fix's hunks replace the failing ones; ! checks what the disk would hold with
the marked hunks taken (none marked: what Accept all would leave). The
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
from app.ui.widgets.diff_view import DiffView
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
        fix = session.send_back(message)  # what F sends
        await session.wait()
        assert fix.kind == "redirect"  # its hunks take the place of the failing ones
        (hunk,) = [h for h in session.pending.hunks if h.state in OPEN]
        assert hunk.new[-1] == "    return a - b" and not hunk.warning  # in Accept all
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
    three = "Third.\n\n" + sr("test_calc.py", "def test_add():\n", "def test_add_more():\n")
    server = ChatServer(replay=[two, three])
    await server.start()
    session = Session(Workspace(root), OpenAIChat(server.base_url, "replay"),
                      fmt="search_replace", context=["calc.py", "notes.txt", "test_calc.py"])
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
        # a marked hunk: the check sees the accepted ones plus it, not every open one
        await session.ask("and rename a test")
        notes = next(h for h in session.pending.hunks if h.path == "notes.txt")
        assert session.review.mark(notes.id) and notes.marked
        held = would_hold(session.pending)
        assert set(held) == {"notes.txt"}  # test_calc.py's open hunk is not marked: left
        done.clear()
        assert "what you accepted plus the 1 marked hunk (1 file(s))" in check.recheck()
        await done.wait()
        assert not session.review.mark(notes.id) and not notes.marked  # Space again: unmarked
        assert set(would_hold(session.pending)) == {"notes.txt", "test_calc.py"}
        session.review.reject([h.id for h in session.pending.hunks if h.state in OPEN])
        assert not session.review.mark(notes.id)  # a decided hunk is never marked
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


async def test_in_the_app_space_marks_a_hunk_for_the_check_and_bang_checks_it(tmp_path):
    two = ("Two changes.\n\n" + sr("calc.py", CALC, CALC + "\n\ndef sub(a, b):\n    return a - b\n")
           + "\n" + sr("notes.txt", "old\n", "new\n"))
    root = init_repo(tmp_path / "r", {"calc.py": CALC, "test_calc.py": TESTS, "notes.txt": "old\n"})
    server = ChatServer(replay=[two])
    await server.start()
    app = SteerApp(root, OpenAIChat(server.base_url, "replay"),
                   Settings(format="search_replace", check=CHECK), context=["calc.py", "notes.txt"],
                   watch_files=False, blink=False)
    try:
        async with app.run_test(size=SIZE) as pilot:
            app.query_one(PromptInput).value = "both"
            await pilot.press("enter")
            await until(pilot, lambda: app.session.turn.check.startswith("✓"), timeout=180)
            await reviewing(pilot)
            diff = app.query_one(DiffView)
            h = diff.hunk
            assert h is not None and not h.marked
            await pilot.press("space")
            await until(pilot, lambda: h.marked)
            assert "◆ marked for the check" in diff.hunk_label(h)
            other = next(x for x in app.session.pending.hunks if x is not h)
            assert set(would_hold(app.session.pending)) == {h.path} != {other.path}
            app.session.turn.check = ""
            await pilot.press("exclamation_mark")
            await until(pilot, lambda: app.session.turn.check.startswith("✓"), timeout=180)
            await pilot.press("space")  # again: unmarked
            await until(pilot, lambda: not h.marked)
            await pilot.press("y")  # accepted: never marked after
            await until(pilot, lambda: h.state.value == "accepted")
            assert not h.marked and "◆" not in diff.hunk_label(h)
    finally:
        await server.close()
