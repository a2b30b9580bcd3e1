"""The core objects the UI holds instead of doing the work itself: LiveTree (app/core/git/
live_tree.py: the live sync's owner, staging under the write lock) and the external editor
(app/core/disk/editor.py), against real repositories and a real editor process."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

from conftest import SRC, git, init_repo, sr, stream

from app.core.disk.editor import edit_lines, editor_command
from app.core.disk.workspace import Workspace
from app.core.git.live_tree import LiveTree
from app.core.review.review import Review


def _accepted(root: Path):
    """steer proposed line 10; the user accepted it (written, not staged)."""
    ws = Workspace(root)
    pending = stream(ws, sr("f.txt", "line 10\n", "line ten\n"), context=["f.txt"])
    assert Review(ws, pending).accept([pending.hunks[0].id]).accepted
    return ws, pending


async def test_the_first_picture_then_every_update_then_closed(tmp_path):
    root = init_repo(tmp_path / "r", {"f.txt": SRC})
    live = LiveTree(Workspace(root), lambda: None, asyncio.Lock())
    assert not live.in_git and live.files == []
    stop = asyncio.Event()
    updates = live.run(stop)
    first = await anext(updates)
    assert live.in_git and first.files == ["f.txt"] == live.files and first.branch == "main"
    nxt = asyncio.ensure_future(anext(updates))  # the watcher starts with the next update
    for _ in range(1000):
        if live.watching:
            break
        await asyncio.sleep(0.01)
    (root / "g.txt").write_text("new\n")
    update = await asyncio.wait_for(nxt, 10)
    while update.files is None:
        update = await asyncio.wait_for(anext(updates), 10)
    assert live.files == ["f.txt", "g.txt"] and live.status["g.txt"].untracked
    stop.set()
    await updates.aclose()
    assert not live.watching and live.sync is not None and live.sync.git is None  # closed


async def test_staging_waits_for_an_accept_that_writes(tmp_path):
    root = init_repo(tmp_path / "r", {"f.txt": SRC})
    ws, pending = _accepted(root)
    lock = asyncio.Lock()
    live = LiveTree(ws, lambda: pending, lock)
    assert await live.stage() is None  # not open yet: nothing to stage with
    updates = live.run(asyncio.Event(), watch=False)
    await anext(updates)
    await lock.acquire()  # an accept is writing
    staging = asyncio.ensure_future(live.stage())
    await asyncio.sleep(0.3)
    assert not staging.done() and git(root, "diff", "--cached") == ""
    lock.release()
    result = await asyncio.wait_for(staging, 10)
    assert result is not None and result.staged == ["f.txt"]
    assert "+line ten" in git(root, "diff", "--cached")
    assert (await live.diff("f.txt", "index")) == git(root, "diff", "--cached", "--", "f.txt")
    await updates.aclose()


async def test_the_staged_paths_are_what_git_said_last(tmp_path):
    root = init_repo(tmp_path / "r", {"f.txt": SRC, "g.txt": "g\n"})
    (root / "g.txt").write_text("g2\n")
    git(root, "add", "g.txt")
    live = LiveTree(Workspace(root), lambda: None, asyncio.Lock())
    updates = live.run(asyncio.Event(), watch=False)
    await anext(updates)
    assert live.staged() == ["g.txt"]
    await updates.aclose()


def _editor(tmp_path: Path, script: str) -> str:
    path = tmp_path / "ed.sh"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return f"{path} --wait"  # a command line, as $EDITOR holds it


async def test_the_editor_edits_the_lines_in_a_file_named_like_theirs(tmp_path):
    seen = tmp_path / "seen"
    command = _editor(tmp_path, f'echo "$2" > {seen}\nsed -i "s/two/TWO/" "$2"\necho added >> "$2"\n')
    out = await edit_lines(["one", "two"], command, path="src/calc.py")
    assert out == ["one", "TWO", "added"]
    used = Path(seen.read_text().strip())
    assert used.suffix == ".py" and not used.exists()  # the temp file is gone


async def test_an_editor_that_changes_nothing_gives_the_lines_back(tmp_path):
    assert await edit_lines(["a", "", "b"], _editor(tmp_path, "exit 0\n"), path="x.txt") == ["a", "", "b"]


def test_the_editor_is_visual_then_editor(monkeypatch):
    monkeypatch.setenv("EDITOR", "vi")
    monkeypatch.setenv("VISUAL", "code --wait")
    assert editor_command() == "code --wait"
    monkeypatch.setenv("VISUAL", "")
    assert editor_command() == "vi"
    monkeypatch.delenv("EDITOR")
    monkeypatch.delenv("VISUAL")
    assert editor_command() is None and "EDITOR" not in os.environ
