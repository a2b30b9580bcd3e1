"""Rebase at arrival (issue 20, part 1): what arrives is placed against the disk as it is when
it completes, with the request's snapshot as the common ancestor. A line the user changed
before its hunk arrived shows as a conflict with both sides at once, before any key, in every
format and for an agent's diffs; real files, a real loopback server, real watchfiles events,
and a second process writing the file while the answer streams."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from conftest import SRC, init_repo, sr
from diff_oracle import splice
from hypothesis import given
from hypothesis import strategies as st
from test_rebase import Feed, check_consistent, read, write
from test_sync import Watching, edit, tokens_until

from app.core.conversation.session import Session
from app.core.disk.workspace import Workspace
from app.core.edits.hunks import HunkState
from app.core.edits.placing import three_way
from app.providers.openai_chat import OpenAIChat
from app.server.chat_server import ChatServer
from app.server.generation import Faults

G = "".join(f"g {i}\n" for i in range(1, 13))
# the shape: the answer is still on an earlier file when the user edits the later one
ANSWER = ("Two files.\n\n" + sr("f.txt", "line 3\n", "three\n") + "\nAnd the other one:\n\n"
          + sr("g.txt", "g 8\n", "eight\n"))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "r", {"f.txt": SRC, "g.txt": G})


async def _session(root: Path, answer: str, fmt: str = "search_replace", **faults):
    server = ChatServer(replay=answer, rate=2000, faults=Faults(**faults))
    await server.start()
    session = Session(Workspace(root), OpenAIChat(server.base_url, "replay"), fmt=fmt,
                      context=["f.txt", "g.txt"])
    return session, server


async def _until(cond, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def _only(session: Session, path: str):
    [h] = session.pending.files[path].hunks
    return h


@pytest.mark.parametrize("fmt", ["search_replace", "apply_patch", "whole"])
async def test_a_line_edited_before_its_hunk_arrives_is_a_conflict_on_arrival(root, fmt):
    """No watcher (as in `steer run`): the file has no hunks yet when the user edits it, so
    only the check at arrival can see it. (On main the hunk came in as pending, its `−`
    line the stale base line, and only an accept found the conflict.)"""
    answers = {
        "search_replace": ANSWER,
        "apply_patch": ("*** Begin Patch\n*** Update File: f.txt\n@@\n line 2\n-line 3\n+three\n"
                        "*** Update File: g.txt\n@@\n g 7\n-g 8\n+eight\n g 9\n*** End Patch\n"),
        "whole": ("f.txt\n```\n" + SRC.replace("line 3\n", "three\n") + "```\n\ng.txt\n```\n"
                  + G.replace("g 8\n", "eight\n") + "```\n"),
    }
    answer = answers[fmt]
    marker = {"search_replace": "g.txt", "apply_patch": " g 7",
              "whole": "g 1\n"}[fmt]
    session, server = await _session(root, answer, fmt, stall_after=tokens_until(answer, marker),
                                      resume=(go_on := asyncio.Event()))
    try:
        session.start("edit both")
        await _until(lambda: session.pending is not None and "f.txt" in session.pending.files
                     and session.pending.files["f.txt"].hunks
                     and session.pending.files["f.txt"].hunks[0].state == HunkState.PENDING)
        g = session.pending.files.get("g.txt")
        assert g is None or not g.hunks  # the answer has not reached the user's line yet
        await edit(root / "g.txt", "g 8\n", "g 8 # MINE\n")  # another process, mid-answer
        go_on.set()  # the stall ends once the edit is made, however long that took
        await session.wait()
        h = _only(session, "g.txt")
        assert h.state == HunkState.CONFLICT  # before any key
        assert (h.old, h.new, h.ancestor) == (["g 8 # MINE"], ["eight"], ["g 8"])
        check_consistent(session.ws, session.pending, "g.txt")
        assert _only(session, "f.txt").state == HunkState.PENDING
        out = session.review.accept_all()  # a bulk accept leaves the conflict alone
        assert out.accepted == [_only(session, "f.txt").id]
        assert read(session.ws, "g.txt") == G.replace("g 8\n", "g 8 # MINE\n")
        session.review.take_mine(h.id)
        assert read(session.ws, "g.txt") == G.replace("g 8\n", "g 8 # MINE\n")
    finally:
        await session.aclose()
        await server.close()


async def test_an_edit_of_another_region_before_arrival_just_shifts_the_hunk(root):
    session, server = await _session(root, ANSWER, stall_after=tokens_until(ANSWER, "g.txt"),
                                     resume=(go_on := asyncio.Event()))
    try:
        session.start("edit both")
        await _until(lambda: session.pending is not None and "f.txt" in session.pending.files)
        await edit(root / "g.txt", "g 1\n", "g 0\ng 1\n")
        go_on.set()  # the stall ends once the edit is made, however long that took
        await session.wait()
        h = _only(session, "g.txt")
        assert (h.state, h.base_start, h.old, h.new) == (HunkState.PENDING, 8, ["g 8"], ["eight"])
        session.review.accept_all()
        assert read(session.ws, "g.txt") == "g 0\n" + G.replace("g 8\n", "eight\n")
    finally:
        await session.aclose()
        await server.close()


async def test_with_real_watch_events_a_later_block_for_the_users_lines_is_a_conflict(root):
    """The file already has a hunk, the watcher rebases it onto the user's save, then the
    answer goes on with a block quoting the lines the user changed (which are no longer in
    the file). On main that block was refused; it is a conflict with both sides."""
    answer = sr("g.txt", "g 2\n", "two\n") + "then\n\n" + sr("g.txt", "g 8\n", "eight\n")
    session, server = await _session(root, answer, stall_after=tokens_until(answer, "then"),
                                     resume=(go_on := asyncio.Event()))
    try:
        async with Watching(root, lambda: session.pending) as w:
            w.session = session
            session.start("edit g")
            await _until(lambda: session.pending is not None and "g.txt" in session.pending.files
                         and session.pending.files["g.txt"].hunks)
            await edit(root / "g.txt", "g 8\n", "g 8 # MINE\n")
            # the watcher's event moved the file's base onto the save
            await w.until(lambda: "g 8 # MINE" in session.pending.files["g.txt"].base.lines)
            assert session.turn.live
            go_on.set()  # the stall ends once the edit is seen, however long that took
            await session.wait()
            await w.quiet()
        assert session.pending.errors == []
        first, second = session.pending.files["g.txt"].hunks
        assert (first.state, first.new) == (HunkState.PENDING, ["two"])
        assert (second.state, second.old, second.new, second.ancestor) == (
            HunkState.CONFLICT, ["g 8 # MINE"], ["eight"], ["g 8"])
        check_consistent(session.ws, session.pending, "g.txt")
        out = await session.review.apply_async(session.review.plan_edited(second.id, ["eight # merged"]))
        assert out.accepted == [second.id]  # `e`: the merge the user wrote is saved
        assert read(session.ws, "g.txt") == G.replace("g 8\n", "eight # merged\n")
    finally:
        await session.aclose()
        await server.close()


# -- placing from the request's snapshot, without a server (every format) -------------------
@pytest.mark.parametrize("fmt,answer", [
    ("search_replace", sr("f.txt", "line 12\n", "twelve\n")),
    ("apply_patch", "*** Begin Patch\n*** Update File: f.txt\n@@\n line 11\n-line 12\n+twelve\n"
                    " line 13\n*** End Patch\n"),
    ("whole", "f.txt\n```\n" + SRC.replace("line 12\n", "twelve\n").replace("line 2\n", "two\n")
              + "```\n"),
])
def test_an_edit_written_against_the_old_lines_after_a_rebase_is_placed_3_way(tmp_path, fmt, answer):
    ws = Workspace(init_repo(tmp_path / "r", {"f.txt": SRC}))
    f = Feed(ws, fmt=fmt)
    f.pending.file("f.txt")  # the file has a diff (an earlier block of the answer made it)
    mine = SRC.replace("line 12\n", "line 12 (mine)\n").replace("line 18\n", "line 18\nadded\n")
    write(ws, mine)
    f.disk_changed()  # the live rebase moved its base onto the user's save
    f.feed(answer)
    f.finish()
    assert f.pending.errors == []
    hunks = f.pending.files["f.txt"].hunks
    conflict = next(h for h in hunks if h.state == HunkState.CONFLICT)
    assert (conflict.old, conflict.new, conflict.ancestor) == (["line 12 (mine)"], ["twelve"],
                                                               ["line 12"])
    others = [h for h in hunks if h is not conflict]
    assert all(h.state == HunkState.PENDING for h in others)
    # the user's other change (an added line) is never proposed for removal
    assert not any("added" in h.old for h in hunks)
    check_consistent(ws, f.pending)


# -- three_way, the placement itself ------------------------------------------------------
LINES = [f"l{i}" for i in range(30)]


@given(st.sets(st.integers(0, 29), max_size=6), st.sets(st.integers(0, 29), max_size=6))
def test_three_way_keeps_both_sides_apart_and_flags_what_touches(user, model):
    """Replace some lines on each side. Changes at least one line apart merge cleanly (the
    result has both); those adjacent or on the same line are conflicts holding the user's
    lines, the proposal and the ancestor, and nothing else of the user's is lost."""
    mine = [f"{t} mine" if i in user else t for i, t in enumerate(LINES)]
    theirs = [f"{t} model" if i in model else t for i, t in enumerate(LINES)]
    placed = three_way(LINES, mine, theirs)
    close = any(abs(u - m) <= 1 for u in user for m in model)
    conflicts = [p for p in placed if p.ancestor is not None]
    assert bool(conflicts) == close
    for p in placed:
        assert mine[p.start:p.end] == p.old
        if p.ancestor is not None:
            assert p.new != p.old and len(p.ancestor) == p.end - p.start  # (same-length edits)
            assert p.ancestor == LINES[p.start:p.end]
    taken = splice(mine, [(p.start, p.end, p.new) for p in placed])
    if not close:
        both = [f"{t} mine" if i in user else f"{t} model" if i in model else t
                for i, t in enumerate(LINES)]
        assert taken == both
    kept = splice(mine, [(p.start, p.end, p.new) for p in placed if p.ancestor is None])
    for i in user:  # "keep mine" on every conflict: every line the user wrote is still there
        assert f"l{i} mine" in kept


def test_three_way_drops_what_the_user_already_wrote():
    mine = LINES[:5] + ["same"] + LINES[6:]
    assert three_way(LINES, mine, list(mine)) == []
    assert three_way(LINES, LINES, LINES) == []


# -- a real race: a second process saves the file between the hunk and its placement --------
def test_steer_run_a_save_between_a_hunk_completing_and_its_check_is_a_conflict(root):
    from test_races import Child

    with ChatServerThread(ANSWER) as server:
        child = Child(root, "run", "edit", "--base-url", server.base_url, "--model", "replay",
                      "--format", "search_replace", "--accept", "all", "-q", "-f", "f.txt",
                      "-f", "g.txt", stop=["arrive:g.txt"])
        child.wait_stopped()  # g.txt's hunk is complete, not yet checked against the disk
        mine = G.replace("g 8\n", "g 8 # MINE\n")
        import subprocess
        subprocess.run([sys.executable, "-c", "import sys, pathlib; "
                        "pathlib.Path(sys.argv[1]).write_text(sys.argv[2])",
                        str(root / "g.txt"), mine], check=True)
        child.resume()
        rc, err = child.finish()
    assert rc == 4, err
    assert (root / "g.txt").read_text() == mine  # never overwritten
    assert (root / "f.txt").read_text() == SRC.replace("line 3\n", "three\n")
    assert "g.txt" in err and "conflict" in err


def ChatServerThread(answer: str):
    from app.server.chat_server import ServerThread

    return ServerThread(replay=answer)


# -- an accept meets a save no watch event has reported yet ------------------------------------
def test_an_edited_merge_the_disk_moved_under_is_kept_and_then_written(tmp_path):
    from conftest import stream

    from app.core.review.review import Review

    ws = Workspace(init_repo(tmp_path / "r", {"f.txt": SRC}))
    pending = stream(ws, sr("f.txt", "line 3\n", "three\n") + sr("f.txt", "line 15\n", "fifteen\n"),
                     context=["f.txt"])
    h1, h2 = pending.files["f.txt"].hunks
    review = Review(ws, pending)
    mine = SRC.replace("line 15\n", "line 15 (mine)\n")
    write(ws, mine)  # saved just before the user's Ctrl+S in the editor
    out = review.accept_edited(h2.id, ["fifteen, merged by hand"])
    assert out.accepted == [] and "look again" in " ".join(out.messages)
    assert read(ws) == mine  # nothing written unseen
    # a conflict with both sides, and the user's merge is not thrown away: it is the proposal
    assert (h2.state, h2.old, h2.new, h2.ancestor) == (
        HunkState.CONFLICT, ["line 15 (mine)"], ["fifteen, merged by hand"], ["line 15"])
    assert review.take_theirs(h2.id).accepted == [h2.id]
    assert read(ws) == SRC.replace("line 15\n", "fifteen, merged by hand\n")
    assert h1.state == HunkState.PENDING


# -- an ACP agent's diffs --------------------------------------------------------------------
@pytest.fixture
def agent_log(tmp_path: Path, monkeypatch) -> Path:
    path = tmp_path / "agent.log"  # what the scripted agent saw (tests/acp_agent.py)
    monkeypatch.setenv("STEER_TEST_AGENT_LOG", str(path))
    return path


async def test_an_agents_diff_over_a_line_the_user_changed_since_it_read_is_a_conflict(
        tmp_path, agent_log):
    from test_acp import logged, script, session_for

    repo = init_repo(tmp_path / "r", {"f.txt": SRC})
    """issue 20: an agent's diffs are placed against the disk as it is when they arrive, the
    file as the agent read it being the common ancestor."""
    cmd = script(tmp_path, [
        {"read": {"path": "f.txt"}},
        {"sleep": 2.0},  # the user saves the file meanwhile
        {"tool": {"id": "t1", "title": "Edit f.txt", "path": "f.txt", "old": "line 8\n",
                  "new": "eight\n"}},
        {"say": "done"}])
    session = session_for(repo, cmd)
    try:
        session.start("edit")
        await _until(lambda: logged(agent_log, "read"))
        mine = SRC.replace("line 8\n", "line 8 # MINE\n")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "import sys, pathlib; pathlib.Path(sys.argv[1]).write_text(sys.argv[2])",
            str(repo / "f.txt"), mine)
        assert await proc.wait() == 0
        await session.wait()
        assert session.turn.complete, session.turn.error
        [h] = session.pending.hunks
        assert (h.state, h.old, h.new, h.ancestor) == (
            HunkState.CONFLICT, ["line 8 # MINE"], ["eight"], ["line 8"])
        session.review.accept_all()
        assert (repo / "f.txt").read_text() == mine
    finally:
        await session.aclose()


# -- a saved session replays what arrival did ----------------------------------------------------
async def test_a_conflict_found_at_arrival_is_the_same_after_a_resume(demo):
    from test_arrival_ui import BEFORE_MAIN, MINE
    from test_sessions import state

    from app.bench.demo import CALC_ANSWER
    from app.core.conversation import resume
    from app.core.storage.store import SessionStore

    server = ChatServer(replay=CALC_ANSWER, rate=2000,
                        faults=Faults(stall_after=BEFORE_MAIN, resume=(go_on := asyncio.Event())))
    await server.start()
    store = SessionStore(demo)
    s = Session(Workspace(demo), OpenAIChat(server.base_url, "replay"), fmt="search_replace",
                context=["calc.py"])
    resume.start(s, store, branch="main")
    again = None
    try:
        s.start("add type hints")
        await _until(lambda: s.pending is not None and "calc.py" in s.pending.files
                     and len(s.pending.files["calc.py"].hunks) == 2
                     and all(h.state == HunkState.PENDING for h in s.pending.hunks))
        await edit(demo / "calc.py", "def main():\n", "def main():  # mine\n")
        go_on.set()  # the stall ends once the edit is made, however long that took
        await s.wait()
        assert (demo / "calc.py").read_text() == MINE
        main = s.pending.hunks[-1]
        assert main.state == HunkState.CONFLICT and main.ancestor == ["def main():"]
        s.review.accept([s.pending.hunks[0].id])  # a decision after the arrival rebase
        before = state(s)
        sid = s.log.id
        await s.aclose()
        again = Session(Workspace(demo), OpenAIChat(server.base_url, "replay"), fmt="search_replace")
        resume.resume(again, store, sid)
        assert state(again) == before
    finally:
        await s.aclose()
        if again is not None:
            await again.aclose()
        await server.close()


async def test_a_file_deleted_before_its_hunk_arrives_is_stale_with_the_reason(root):
    session, server = await _session(root, ANSWER, stall_after=tokens_until(ANSWER, "g.txt"),
                                     resume=(go_on := asyncio.Event()))
    try:
        session.start("edit both")
        await _until(lambda: session.pending is not None and "f.txt" in session.pending.files)
        proc = await asyncio.create_subprocess_exec("git", "rm", "-q", "g.txt", cwd=root)
        assert await proc.wait() == 0
        go_on.set()  # the stall ends once the edit is made, however long that took
        await session.wait()
        h = _only(session, "g.txt")
        assert h.state == HunkState.STALE and "g.txt was deleted outside steer" in h.note
        out = session.review.accept_all()
        assert out.accepted == [_only(session, "f.txt").id]
        assert not (root / "g.txt").exists()  # never brought back by an accept
    finally:
        await session.aclose()
        await server.close()


def test_steer_run_accept_none_names_a_conflict_found_at_arrival_and_exits_0(root):
    """--accept none writes nothing by choice (0), and still says which hunk needs a look."""
    from test_races import Child

    with ChatServerThread(ANSWER) as server:
        child = Child(root, "run", "edit", "--base-url", server.base_url, "--model", "replay",
                      "--format", "search_replace", "-q", "-f", "f.txt", "-f", "g.txt",
                      stop=["arrive:g.txt"])
        child.wait_stopped()
        (root / "g.txt").write_text(G.replace("g 8\n", "g 8 # MINE\n"))
        child.resume()
        rc, err = child.finish()
    assert rc == 0, err
    assert "needs a look: g.txt: 1 hunk left: hunk #2 at line 8: conflicts with your change" in err
    assert "nothing written (--accept none)" in err
    assert (root / "f.txt").read_text() == SRC
