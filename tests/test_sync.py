"""Sync with real parts: real repositories in temp dirs, real watchfiles events (no mocked
watcher), other processes editing files and running git while a real answer streams from
the loopback server. Latency is measured by `steer bench sync`; here we only wait for it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import SRC, git, init_repo, sr

from app.core.conversation.session import Session
from app.core.disk.workspace import Workspace
from app.core.edits.hunks import HunkState
from app.core.git.sync import Sync
from app.core.review.review import Review
from app.providers.openai_chat import OpenAIChat
from app.server.chat_server import ChatServer
from app.server.generation import Faults, split_tokens

ANSWER = ("Three changes.\n\n" + sr("f.txt", "line 3\n", "three\n")
          + sr("f.txt", "line 10\nline 11\n", "ten\neleven\n") + sr("f.txt", "line 18\n", "eighteen\n"))


def tokens_until(text: str, marker: str) -> int:
    """How many replayed tokens come before `marker` (where a stall fault can cut)."""
    return len(split_tokens(text[: text.index(marker)]))


async def run(*cmd: str, cwd: Path) -> None:
    """Another process, as the user's terminal would run it."""
    proc = await asyncio.create_subprocess_exec(*cmd, cwd=cwd, stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()


async def edit(path: Path, old: str, new: str) -> None:
    """An external process rewrites a file (as an editor saving it would)."""
    code = ("import sys, pathlib; p = pathlib.Path(sys.argv[1]); "
            "p.write_text(p.read_text().replace(sys.argv[2], sys.argv[3], 1))")
    await run(sys.executable, "-c", code, str(path), old, new, cwd=path.parent)


class Watching:
    """A running Sync, collecting its updates."""

    def __init__(self, root: Path, pending=lambda: None, **kw) -> None:
        self.ws = Workspace(root)
        self.sync = Sync.open(self.ws, pending, **kw)
        self.updates: list = []
        self.live_at_update: list[bool] = []
        self.session: Session | None = None

    async def __aenter__(self) -> Watching:
        self.first = await self.sync.initial()  # what the first paint shows
        self.stop = asyncio.Event()
        self.task = asyncio.create_task(self._follow())
        await self.sync.wait_ready()
        return self

    async def _follow(self) -> None:
        async for u in self.sync.updates(self.stop):
            self.updates.append(u)
            turn = self.session.turn if self.session is not None else None
            self.live_at_update.append(bool(turn and turn.live))

    async def until(self, cond, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; updates: {self.updates}")
            await asyncio.sleep(0.02)

    async def quiet(self, seconds: float = 0.6) -> None:
        """Until no update came for `seconds`."""
        n = -1
        while n != len(self.updates):
            n = len(self.updates)
            await asyncio.sleep(seconds)

    async def __aexit__(self, *exc) -> None:
        self.stop.set()
        await asyncio.wait_for(self.task, 10)
        await self.sync.aclose()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "r", {"f.txt": SRC, "g.txt": "g\n"})


# -- live rebase ---------------------------------------------------------------------------------
async def test_external_edit_after_the_stream_rebases_within_one_update(root):
    ws = Workspace(root)
    from conftest import stream

    pending = stream(ws, ANSWER, context=["f.txt"])
    h3, h10, h18 = pending.files["f.txt"].hunks
    async with Watching(root, lambda: pending) as w:
        await edit(root / "f.txt", "line 1\n", "line 1\nmine a\nmine b\n")
        await w.until(lambda: h18.base_start == 19)
        assert (h3.base_start, h10.base_start) == (4, 11)
        assert all(h.state == HunkState.PENDING for h in (h3, h10, h18))
        await edit(root / "f.txt", "line 11\n", "line 11 (mine)\n")
        await w.until(lambda: h10.state == HunkState.CONFLICT)
        assert h10.old == ["line 10", "line 11 (mine)"] and h10.new == ["ten", "eleven"]
        await w.until(lambda: any(h10.id in u.conflicts for u in w.updates))
        await w.until(lambda: any("f.txt" in u.paths and u.status and u.status["f.txt"].unstaged
                                  for u in w.updates))


async def test_a_real_stream_continues_against_the_users_new_text(root):
    """The user edits the file while the answer streams (stalled mid-block until the edit is
    seen): the streaming block shifts, the finished hunk the user touched becomes a conflict,
    and the block still to come is found in the new text."""
    stall = tokens_until(ANSWER, "eleven")  # inside the second block's REPLACE
    go_on = asyncio.Event()  # the stall ends when the block has moved, however long that takes
    server = ChatServer(replay=ANSWER, rate=2000, faults=Faults(stall_after=stall, resume=go_on))
    await server.start()
    ws = Workspace(root)
    session = Session(ws, OpenAIChat(server.base_url, "replay"), fmt="search_replace", context=["f.txt"])
    try:
        async with Watching(root, lambda: session.pending) as w:
            w.session = session
            session.start("edit")
            await w.until(lambda: session.turn.deltas >= stall)
            live = session.pending.live_hunk
            assert live is not None and live.state == HunkState.STREAMING
            await edit(root / "f.txt", "line 1\nline 2\nline 3\n", "top\nline 1\nline 2\nline 3 (mine)\n")
            await w.until(lambda: live.base_start == 10)  # moved while streaming
            assert session.turn.live
            go_on.set()
            await session.wait()
            await w.quiet()
        hunks = session.pending.files["f.txt"].hunks
        assert [(h.base_start, h.state.value) for h in hunks] == [
            (3, "conflict"), (10, "pending"), (18, "pending")]
        assert hunks[0].old == ["line 3 (mine)"] and hunks[0].new == ["three"]
        assert any(w.live_at_update)  # the rebase happened while the answer streamed
        out = session.review.accept_all()
        assert sorted(out.accepted) == sorted([hunks[1].id, hunks[2].id])
        assert (root / "f.txt").read_text() == "top\n" + SRC.replace("line 3\n", "line 3 (mine)\n") \
            .replace("line 10\nline 11\n", "ten\neleven\n").replace("line 18\n", "eighteen\n")
    finally:
        await session.aclose()
        await server.close()


async def test_the_user_editing_the_streaming_block_gets_a_conflict_when_it_ends(root):
    stall = tokens_until(ANSWER, "eleven")
    server = ChatServer(replay=ANSWER, rate=2000, faults=Faults(stall_after=stall, stall_seconds=1.5))
    await server.start()
    ws = Workspace(root)
    session = Session(ws, OpenAIChat(server.base_url, "replay"), fmt="search_replace", context=["f.txt"])
    try:
        async with Watching(root, lambda: session.pending) as w:
            session.start("edit")
            await w.until(lambda: session.turn.deltas >= stall)
            await edit(root / "f.txt", "line 11\n", "line 11 (mine)\n")
            await w.until(lambda: any(r.deferred for u in w.updates for r in u.rebased))
            await session.wait()
            await w.until(lambda: any(h.state == HunkState.CONFLICT
                                      for h in session.pending.files["f.txt"].hunks))
            await w.quiet()
        hunks = session.pending.files["f.txt"].hunks
        assert [(h.base_start, h.state.value) for h in hunks] == [
            (2, "pending"), (9, "conflict"), (17, "pending")]
        assert hunks[1].old == ["line 10", "line 11 (mine)"] and hunks[1].new == ["ten", "eleven"]
        session.review.accept_all()
        assert "line 11 (mine)" in (root / "f.txt").read_text()
    finally:
        await session.aclose()
        await server.close()


async def test_steers_own_accept_is_not_taken_for_a_user_change(root):
    from conftest import stream

    ws = Workspace(root)
    pending = stream(ws, ANSWER, context=["f.txt"])
    review = Review(ws, pending)
    async with Watching(root, lambda: pending) as w:
        for h in list(pending.files["f.txt"].hunks):
            async with w.sync.lock:  # what the UI does around execute + commit
                plan = await asyncio.to_thread(review.execute, review.plan_hunks([h.id]))
                review.commit(plan)
        await w.until(lambda: any("f.txt" in u.paths for u in w.updates))
        await w.quiet()
    assert pending.hunks and all(h.state == HunkState.ACCEPTED for h in pending.hunks)
    assert not any(r.conflicts or r.dropped for u in w.updates for r in u.rebased)


async def test_deleted_and_renamed_outside_go_stale_with_the_reason(root):
    from conftest import stream

    ws = Workspace(root)
    (root / "h.txt").write_text(SRC + "h\n")
    pending = stream(ws, ANSWER + sr("h.txt", "line 5\n", "five\n"), context=["f.txt", "h.txt"])
    async with Watching(root, lambda: pending) as w:
        await run("git", "mv", "f.txt", "moved.txt", cwd=root)
        (root / "h.txt").unlink()
        await w.until(lambda: all(h.state == HunkState.STALE for h in pending.hunks))
    f_notes = {h.note for h in pending.files["f.txt"].hunks}
    assert f_notes == {"f.txt was renamed to moved.txt outside steer"}
    assert pending.files["h.txt"].hunks[0].note == "h.txt was deleted outside steer"


# -- git in step ----------------------------------------------------------------------------------
async def test_git_add_commit_and_branch_switch_in_another_terminal(root):
    (root / "f.txt").write_text(SRC + "more\n")
    async with Watching(root) as w:
        await run("git", "add", "f.txt", cwd=root)
        await w.until(lambda: w.updates and w.updates[-1].status
                      and w.updates[-1].status.get("f.txt") is not None
                      and w.updates[-1].status["f.txt"].staged)
        assert w.updates[-1].git_changed
        await run("git", "commit", "-qm", "more", cwd=root)
        await w.until(lambda: w.updates[-1].status == {})
        await run("git", "checkout", "-q", "-b", "feature", cwd=root)
        await w.until(lambda: w.updates[-1].branch == "feature")
        await run("git", "stash", "list", cwd=root)  # a read: nothing to report
        n = len(w.updates)
        await asyncio.sleep(0.5)
        assert len(w.updates) == n  # steer's own git reads do not echo back as changes


async def test_a_stash_and_its_pop_update_the_status(root):
    async with Watching(root) as w:
        await edit(root / "g.txt", "g\n", "g changed\n")
        await w.until(lambda: w.updates and (w.updates[-1].status or {}).get("g.txt") is not None)
        await run("git", "stash", "-q", cwd=root)
        await w.until(lambda: w.updates[-1].status == {})
        await run("git", "stash", "pop", "-q", cwd=root)
        await w.until(lambda: (w.updates[-1].status or {}).get("g.txt") is not None)


async def test_in_a_linked_worktree_git_state_is_watched_where_it_lives(root, tmp_path):
    wt = tmp_path / "wt"
    git(root, "worktree", "add", "-q", "-b", "side", str(wt))
    (wt / "g.txt").write_text("changed\n")
    async with Watching(wt) as w:
        assert w.sync.git.git_dir != wt / ".git"
        await run("git", "commit", "-qam", "side", cwd=wt)
        await w.until(lambda: any(u.git_changed for u in w.updates) and w.updates[-1].status == {})


def checkout_repo(root: Path, n_dirs: int = 100, per_dir: int = 100) -> Path:
    """A repository whose branches `main` and `other` differ in every one of its files,
    built with git fast-import (quick even for 10,000 files); `main` checked out."""
    init_repo(root)
    stream = []
    for branch, extra in (("main", ""), ("other", "x\n")):
        stream.append(f"commit refs/heads/{branch}\ncommitter t <t@example.com> 0 +0000\n"
                      f"data 4\nbase\n")
        if branch == "other":
            stream.append("from refs/heads/main\n")
        for d in range(n_dirs):
            for i in range(per_dir):
                body = f"{d} {i}\n{extra}"
                stream.append(f"M 100644 inline d{d}/f{i}.txt\ndata {len(body)}\n{body}\n")
    subprocess.run(["git", "fast-import", "--quiet"], cwd=root, input="".join(stream).encode(),
                   check=True)
    git(root, "checkout", "-q", "-f", "main")
    return root


async def test_a_10000_file_checkout_is_one_refresh(tmp_path):
    root = checkout_repo(tmp_path / "big")
    assert len(git(root, "ls-files").splitlines()) == 10_000
    async with Watching(root) as w:
        await run("git", "checkout", "-q", "other", cwd=root)
        await w.until(lambda: w.updates and w.updates[-1].branch == "other", timeout=60)
        await w.quiet(1.0)
    # one burst, one refresh (delivered in phases: the index side first, then the full status)
    assert len({u.first_event for u in w.updates}) == 1, [(len(u.paths), u.batches) for u in w.updates]
    assert len(w.updates) <= 2
    update = w.updates[-1]
    assert len(update.paths) == 10_000 and update.batches > 1 and update.status == {}
    assert update.files is not None and len(update.files) == 10_000


async def test_outside_a_repository_files_still_sync(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "f.txt").write_text(SRC)
    from conftest import stream

    ws = Workspace(plain)
    pending = stream(ws, ANSWER, context=["f.txt"])
    async with Watching(plain, lambda: pending) as w:
        assert w.sync.git is None
        await edit(plain / "f.txt", "line 1\n", "zero\nline 1\n")
        await w.until(lambda: pending.files["f.txt"].hunks[0].base_start == 3)
        (plain / "new.txt").write_text("n\n")
        await w.until(lambda: w.updates[-1].files is not None and "new.txt" in w.updates[-1].files)
        assert w.updates[-1].status is None
        out = await w.sync.stage(pending)
        assert not out.ok and "not a git repository" in out.messages[0]
    first = await Sync(ws, None, lambda: None).initial()
    assert first.files == ["f.txt", "new.txt"] and first.status is None


async def test_stage_and_commit_through_sync(root):
    from conftest import stream

    ws = Workspace(root)
    pending = stream(ws, ANSWER, context=["f.txt"])
    review = Review(ws, pending)
    (root / "f.txt").write_text(SRC.replace("line 1\n", "line 1 (mine)\n"))
    review.recheck("f.txt")
    h3 = pending.files["f.txt"].hunks[0]
    review.accept([h3.id])
    async with Watching(root, lambda: pending) as w:
        staged = await w.sync.stage(pending)
        assert staged.ok and staged.staged == ["f.txt"]
        await w.until(lambda: w.updates and (w.updates[-1].status or {}).get("f.txt") is not None
                      and w.updates[-1].status["f.txt"].staged)
        assert w.updates[-1].status["f.txt"].unstaged  # the user's line stays unstaged
        result = await w.sync.commit("three")
        assert result.ok
        await w.until(lambda: w.updates[-1].status["f.txt"].index == " ")
    assert "+line 1 (mine)" in git(root, "diff") and "+three" not in git(root, "diff")


async def test_a_few_changed_files_update_status_and_file_list_in_place(root):
    (root / ".gitignore").write_text("*.log\n")
    (root / "untracked.txt").write_text("u\n")
    async with Watching(root) as w:
        assert w.first.status["untracked.txt"].untracked and "untracked.txt" in w.first.files
        (root / "new.txt").write_text("n\n")
        (root / "debug.log").write_text("ignored\n")
        await w.until(lambda: w.updates and w.updates[-1].files is not None
                      and "new.txt" in w.updates[-1].files)
        last = w.updates[-1]
        assert "debug.log" not in last.files and "untracked.txt" in last.status
        assert last.status["new.txt"].untracked and "debug.log" not in last.status
        await edit(root / "g.txt", "g\n", "g2\n")
        await w.until(lambda: "g.txt" in (w.updates[-1].status or {}))
        assert w.updates[-1].status["untracked.txt"].untracked  # the others are kept
        (root / "new.txt").unlink()
        await w.until(lambda: w.updates[-1].files is not None
                      and "new.txt" not in w.updates[-1].files)
        assert "new.txt" not in w.updates[-1].status


async def test_after_git_add_the_index_side_comes_first(root):
    (root / "f.txt").write_text(SRC + "x\n")
    async with Watching(root) as w:
        assert w.first.status["f.txt"].unstaged
        await run("git", "add", "f.txt", cwd=root)
        await w.until(lambda: w.updates and w.updates[-1].status
                      and w.updates[-1].status["f.txt"].staged
                      and not w.updates[-1].status["f.txt"].unstaged)
        assert any(u.status and u.status["f.txt"].staged for u in w.updates[:2])


async def test_a_reset_in_another_terminal_shows_the_files_it_unstaged(root):
    (root / "g.txt").write_text("g2\n")
    git(root, "commit", "-qam", "g2")
    async with Watching(root) as w:
        assert w.first.status == {}
        await run("git", "reset", "-q", "HEAD~", cwd=root)  # g.txt now differs, unstaged
        await w.until(lambda: w.updates and (w.updates[-1].status or {}).get("g.txt") is not None)
        assert w.updates[-1].status["g.txt"].unstaged and not w.updates[-1].status["g.txt"].staged
        await run("git", "rm", "-q", "--cached", "g.txt", cwd=root)
        await w.until(lambda: (w.updates[-1].status or {}).get("g.txt") is not None
                      and w.updates[-1].status["g.txt"].staged)
        assert w.updates[-1].status["g.txt"].index == "D"


async def test_a_new_ignore_rule_refreshes_the_file_list(root):
    (root / "a.log").write_text("x\n")
    async with Watching(root) as w:
        assert "a.log" in w.first.files
        (root / ".gitignore").write_text("*.log\n")
        await w.until(lambda: w.updates and w.updates[-1].files is not None
                      and "a.log" not in w.updates[-1].files)
        assert "a.log" not in w.updates[-1].status


async def test_many_saves_while_the_answer_streams_lose_nothing(root):
    """Another process saves the file 30 times (lines added above, between and inside the
    blocks) while the answer streams; afterwards the diff sits on the disk exactly and
    accepting everything acceptable keeps every line the user wrote."""
    server = ChatServer(replay=ANSWER, rate=300)
    await server.start()
    ws = Workspace(root)
    session = Session(ws, OpenAIChat(server.base_url, "replay"), fmt="search_replace", context=["f.txt"])
    script = ("import sys, time, pathlib\np = pathlib.Path(sys.argv[1])\n"
              "for i in range(30):\n"
              "    lines = p.read_text().splitlines(keepends=True)\n"
              "    at = (i * 7) % (len(lines) + 1)\n"
              "    lines.insert(at, f'user {i}\\n')\n"
              "    p.write_text(''.join(lines))\n"
              "    time.sleep(0.02)\n")
    try:
        async with Watching(root, lambda: session.pending) as w:
            session.start("edit")
            await w.until(lambda: session.turn.deltas > 3)
            await run(sys.executable, "-c", script, str(root / "f.txt"), cwd=root)
            await session.wait()
            await w.quiet()
            fd = session.pending.files["f.txt"]
            disk = (root / "f.txt").read_text().splitlines()
            assert fd.expected()[0] == disk
            for h in fd.hunks:
                assert fd.base.lines[h.base_start : h.base_end] == h.old
            session.review.accept_all()
        after = (root / "f.txt").read_text()
        assert all(f"user {i}\n" in after for i in range(30))
        assert not session.pending.due
    finally:
        await session.aclose()
        await server.close()
