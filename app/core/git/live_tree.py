"""The working tree as a front-end keeps it: one owner for the live sync and for the git
intents that touch the index.

A front-end (the TUI, a test, a benchmark) holds one `LiveTree` for its session. It opens the
repository off the event loop (`Sync.open`: no repository is fine, files are still listed),
gives the first picture and then every coalesced update of the working tree and git
(app/core/git/sync.py), and closes what it opened when the caller stops. Staging exactly the
accepted hunks runs under the session's write lock (the lock accepts and undos hold while
they write), so a stage never reads a file half written; commits and proposed messages go
through the same repository handle. The caller only applies what it is given and asks for
intents: no git call, thread or lock is its business.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from typing import Literal

from app.core.disk.workspace import Workspace
from app.core.edits.diff import PendingDiff
from app.core.git.commit_message import ProposalFailed
from app.core.git.repository import NOT_A_REPO, CommitResult, FileStatus, StageResult
from app.core.git.sync import Publisher, Sync, SyncUpdate
from app.core.listeners import Listeners
from app.core.provider import Provider

View = Literal["head", "index"]


class LiveTree:
    def __init__(self, ws: Workspace, pending: Callable[[], PendingDiff | None],
                 lock: asyncio.Lock, changes: Publisher | None = None) -> None:
        self.ws = ws
        self.pending = pending  # the session's pending diff now (a new answer replaces it)
        self.changes = changes  # who says a put-off rebase is due (Sync)
        self.lock = lock  # the session's write lock: accepts, undos and staging take turns
        self.sync: Sync | None = None  # open while `run` runs
        self.files: list[str] = []  # the workspace's files, as the last update listed them
        self.status: dict[str, FileStatus] = {}  # what git said last (empty outside a repository)
        # told of every update too (the repository map: app/core/knowledge/service.py `saw`)
        self.updates: Listeners[SyncUpdate] = Listeners()

    @property
    def in_git(self) -> bool:
        return self.sync is not None and self.sync.git is not None

    @property
    def watching(self) -> bool:
        """The watcher's watches are in place: a change made now is seen."""
        watcher = self.sync.watcher if self.sync is not None else None
        return watcher is not None and watcher.ready.is_set()

    async def run(self, stop: asyncio.Event, *, watch: bool = True) -> AsyncGenerator[SyncUpdate, None]:
        """The first picture (files, status, branch), then, with `watch`, every update until
        `stop` is set; what was opened is closed when the caller stops iterating."""
        self.sync = await asyncio.to_thread(Sync.open, self.ws, self.pending, lock=self.lock,
                                       changes=self.changes)
        try:
            first = await self.sync.initial()
            self._saw(first)
            yield first
            if watch:
                async for update in self.sync.updates(stop):
                    self._saw(update)
                    yield update
        finally:
            await self.sync.aclose()

    def _saw(self, update: SyncUpdate) -> None:
        self.updates.publish(update)
        if update.files is not None:
            self.files = update.files
        if update.status is not None:
            self.status = update.status

    def staged(self) -> list[str]:
        """The paths with staged changes, as git said last."""
        return sorted(p for p, st in self.status.items() if st.staged)

    async def diff(self, path: str, view: View) -> str:
        """`path` as git sees it: the working tree vs HEAD, or the index vs HEAD (a thread)."""
        git = self.sync.git if self.sync is not None else None
        if git is None:
            return ""
        fetch = git.diff_head if view == "head" else git.diff_index
        return await asyncio.to_thread(fetch, path)

    async def stage(self) -> StageResult | None:
        """Stage exactly the accepted hunks of the pending diff (like `git add -p`), not
        while an accept or an undo writes. None: no pending diff, or not open yet."""
        pending = self.pending()
        if self.sync is None or pending is None:
            return None
        async with self.lock:
            return await self.sync.stage(pending)

    async def propose_message(self, provider: Provider) -> str:
        """A commit message for what is staged (raises commit_message.ProposalFailed)."""
        if self.sync is None:
            raise ProposalFailed(NOT_A_REPO)
        return await self.sync.propose_message(provider)

    async def commit(self, message: str) -> CommitResult:
        if self.sync is None:
            return CommitResult(False, NOT_A_REPO)
        return await self.sync.commit(message)
