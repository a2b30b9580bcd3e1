"""The files: the workspace's tree with its badges, kept live, and folded on a narrow terminal.

Live sync: the pane runs the screen's LiveTree (app/core/git/live_tree.py), which owns the
watcher, git and the rebases; each update goes up (`Synced`) and the screen hands it to
every pane at once: its file list and git status to the tree here (`show_sync`), the rest
to the prompt's @-completion, the header's branch and the review's rebased hunks. Pending badges come
with the frames: while an answer streams they move at most 4 times a second (a tree line
costs ~0.7 ms to draw), and a file the proposal creates joins the tree.

The fold: below 100 columns the tree starts hidden (`narrow`, bound to the screen's); the
user's toggle (`wanted`) wins. The screen places it and moves the focus.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import aclosing
from dataclasses import dataclass
from typing import Self

from textual import getters, on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import var

from app.core.edits.diff import PendingDiff
from app.core.git.live_tree import LiveTree
from app.core.git.repository import FileStatus
from app.core.git.sync import SyncUpdate
from app.ui.compat import alive
from app.ui.widgets.file_tree import FileTree
from app.ui.widgets.line import Line
from app.view.frames import Frame

BADGES_EVERY = 0.25  # while streaming, the tree's badges change at most this often


class FilesPane(Vertical):
    file_tree = getters.query_one(FileTree)

    narrow: var[bool] = var(False)  # the terminal is narrow (the screen's, bound)

    @dataclass
    class Synced(Message):
        """The working tree or git changed."""

        update: SyncUpdate

    @dataclass
    class Chosen(Message):
        """Enter or a click on a file (not a folder): the review shows it."""

        path: str

    @dataclass
    class Folded(Message):
        """Whether the tree is shown may have changed: the screen places it."""

    def __init__(self, root_name: str, live: LiveTree, *, follow_disk: bool = True,
                 id: str | None = None) -> None:
        super().__init__(id=id)
        self.root_name = root_name
        self.live = live
        self.follow_disk = follow_disk  # watch the disk after the first picture (tests may not)
        self.files: list[str] = []  # the workspace's files, as the last sync listed them
        self.wanted: bool | None = None  # the user's toggle; None: shown unless narrow
        self._badges: dict[str, int] = {}  # open-hunk counts not yet shown in the tree
        self._created: set[str] = set()
        self._badges_at = 0.0
        self._stop = asyncio.Event()

    def compose(self) -> ComposeResult:
        yield Line("Files", id="tree-title", classes="pane-title")
        yield FileTree(self.root_name, id="tree")

    def on_mount(self) -> None:
        self.run_worker(self._sync(), group="sync")

    def on_unmount(self) -> None:
        self._stop.set()

    def focus(self, scroll_visible: bool = True) -> Self:
        self.file_tree.focus(scroll_visible)
        return self

    @property
    def shown(self) -> bool:
        return self.wanted if self.wanted is not None else not self.narrow

    def watch_narrow(self) -> None:
        self.post_message(self.Folded())

    @on(FileTree.NodeSelected)
    def _node_selected(self, event: FileTree.NodeSelected[str]) -> None:
        path = event.node.data
        if path and not path.endswith("/"):
            self.post_message(self.Chosen(path))

    def reveal(self, path: str) -> None:
        self.file_tree.reveal(path)

    def show_context(self, paths: set[str]) -> None:
        self.file_tree.set_badges(context=paths)

    # -- live sync -------------------------------------------------------------------------
    async def _sync(self) -> None:
        """The first picture, then every coalesced burst of changes, whoever made them."""
        async with aclosing(self.live.run(self._stop, watch=self.follow_disk)) as updates:
            async for update in updates:
                if not alive(self):
                    return
                self.post_message(self.Synced(update))

    def show_sync(self, u: SyncUpdate) -> None:
        tree = self.file_tree
        if u.files is not None:
            pending = self.live.pending()
            created = [p for p, fd in pending.files.items() if fd.created and fd.hunks] if pending else []
            self.files = u.files
            tree.load(u.files + created)
        if u.status is not None:
            tree.set_badges(git={p: _git_badge(st) for p, st in u.status.items()})

    # -- pending badges, frame by frame ----------------------------------------------------
    def new_change_set(self) -> None:
        self._created = set()

    def badges_due(self, streaming: bool) -> bool:
        """Open-hunk counts thinned out while streaming are due on screen, changed files or
        not: once the answer ends, or BADGES_EVERY after the last (a stall shows them too)."""
        return bool(self._badges) and (
            not streaming or time.perf_counter() - self._badges_at >= BADGES_EVERY)

    @property
    def badges_held(self) -> bool:
        return bool(self._badges)

    def show_pending(self, pending: PendingDiff, f: Frame, streaming: bool) -> None:
        tree = self.file_tree
        self._badges.update(f.open_counts)
        self._created = (self._created - f.dirty) | f.created
        # a file the proposal creates joins the tree; a path an edit only named does not
        missing = [p for p in f.dirty if p in pending.files and not tree.has(p)
                   and pending.files[p].created and pending.files[p].hunks]
        now = time.perf_counter()
        if missing or not streaming or now - self._badges_at >= BADGES_EVERY:
            self._badges_at = now
            counts = dict(tree.pending)
            for p, n in self._badges.items():
                if n:
                    counts[p] = n
                else:
                    counts.pop(p, None)
            self._badges.clear()
            tree.set_badges(pending=counts, created=set(self._created))
        if missing:
            self.files = sorted(set(self.files) | set(missing))
            tree.load(self.files)

    def reset(self) -> None:
        """The session was rebuilt (a rewind): no pending badge left."""
        self._created = set()
        self._badges = {}
        self.file_tree.set_badges(pending={}, created=set())


def _git_badge(st: FileStatus) -> tuple[str, str]:
    """(staged letter, unstaged letter), as `git status -s` shows them."""
    if st.conflicted:
        return "", "U"
    if st.untracked:
        return "", "?"
    return (st.index if st.staged else ""), (st.worktree if st.unstaged else "")
