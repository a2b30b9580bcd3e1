"""Keeping steer in step with the working tree and git, whatever changes them.

`Sync` consumes the watcher's batches (working tree and git state, app/core/git/watch.py) and
turns each burst into `SyncUpdate`s the UI applies as they are: the paths that changed, the
files rebased (app/core/edits/rebase.py) with the hunks that moved or became conflicts, and, in a
repository, the status (staged and unstaged apart), the branch, the file list when files
came or went, and whether HEAD or the index moved (so an open HEAD diff is fetched again).
A burst is delivered in phases, quickest first, so the diff pane never waits for a
`git status` of 50,000 files: the rebased files at once, then what git says.

Bursts are coalesced: what arrives while a refresh runs is taken in one go afterwards, and
while git holds its index lock (a checkout, a rebase, a pull rewriting thousands of files)
or a batch is large, we wait for quiet first, so a 10,000-file checkout is one refresh.
File reads, diffs against the expectation and every git call run in threads; the event loop
only applies the results.

Accept and undo write files too: hold `Sync.lock` across their write and their commit
(Review.execute + Review.commit), so a rebase never sees steer's own write half recorded.
"""

from __future__ import annotations

import asyncio
import bisect
import os
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.core.disk.workspace import Workspace
from app.core.edits import rebase
from app.core.edits.changes import Due
from app.core.edits.diff import PendingDiff
from app.core.git.commit_message import ProposalFailed, propose
from app.core.git.files import walk_files
from app.core.git.repository import (
    NOT_A_REPO,
    CommitResult,
    FileStatus,
    GitRepo,
    StageResult,
    stage_items,
)
from app.core.git.watch import Changes, Watcher, git_dirs_of
from app.core.provider import Provider

_DUE = "due"


@dataclass
class SyncUpdate:
    paths: set[str] = field(default_factory=set)  # working-tree paths that changed
    git_changed: bool = False  # HEAD, the index or refs moved: refetch HEAD/index diffs
    status: dict[str, FileStatus] | None = None  # None: unchanged, or not a repository
    branch: str | None = None  # set when it was read again
    files: list[str] | None = None  # the whole file list, when files came or went
    rebased: list[rebase.Rebased] = field(default_factory=list)
    batches: int = 0  # watcher batches this update coalesces
    first_event: float = 0.0  # perf_counter when the first of them arrived
    done: float = 0.0  # perf_counter when this update was ready

    @property
    def conflicts(self) -> list[int]:
        return [h.id for r in self.rebased for h in r.conflicts]


class _Burst:
    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self.git: set[str] = set()
        self.due: set[str] = set()
        self.batches = 0
        self.first = time.perf_counter()

    def add(self, item: Changes | tuple[str, str]) -> None:
        if isinstance(item, Changes):
            self.batches += 1
            self.files.update(item.files)
            self.git |= item.git
        else:
            self.due.add(item[1])

    @property
    def size(self) -> int:
        return len(self.files) + len(self.git)


class _Files:
    """The file list, sorted for the tree and hashed for lookups, kept in step in place."""

    def __init__(self, files: list[str]) -> None:
        self.sorted = sorted(files)
        self.set = set(files)

    def add(self, paths: list[str]) -> None:
        for p in paths:
            if p not in self.set:
                self.set.add(p)
                bisect.insort(self.sorted, p)

    def remove(self, paths: list[str]) -> None:
        for p in paths:
            if p in self.set:
                self.set.discard(p)
                del self.sorted[bisect.bisect_left(self.sorted, p)]


class Publisher(Protocol):
    """Who tells of a change set's events (ChangeSet, Variants, a PendingDiff's listeners)."""

    def subscribe(self, fn: Callable[[Any], object]) -> Callable[[], None]: ...


class Sync:
    def __init__(self, ws: Workspace, git: GitRepo | None,
                 pending: Callable[[], PendingDiff | None], *, lock: asyncio.Lock | None = None,
                 changes: Publisher | None = None, quiet: float = 0.15, burst: int = 300,
                 settle_limit: float = 30.0) -> None:
        self.ws = ws
        self.git = git
        self.pending = pending
        # where a rebase put off while an edit streamed is said to be due (`Due`): the
        # session's change set, or every variant's (app/core/review/events.py)
        self.changes = changes
        self.lock = lock or asyncio.Lock()
        self.quiet = quiet  # a burst is over after this long without events
        self.burst = burst  # from this many paths on, wait for quiet before refreshing
        self.settle_limit = settle_limit  # never wait longer than this for git to finish
        self._queue: asyncio.Queue[Changes | tuple[str, str]] = asyncio.Queue()
        self._status: dict[str, FileStatus] | None = None  # what the last look found
        self._files: _Files | None = None
        self._head: str | None = None  # the commit the status was taken against
        self._owns_git = False
        self.watcher: Watcher | None = None

    @classmethod
    def open(cls, ws: Workspace, pending: Callable[[], PendingDiff | None], **kw) -> Sync:
        """A Sync with its own long-lived GitRepo (None outside a repository), closed by
        `aclose`."""
        sync = cls(ws, GitRepo.open(ws.root), pending, **kw)
        sync._owns_git = True
        return sync

    async def aclose(self) -> None:
        if self.watcher is not None:
            await asyncio.to_thread(self.watcher.stop)
            self.watcher = None
        if self._owns_git and self.git is not None:
            await asyncio.to_thread(self.git.close)
            self.git = None

    # -- the first picture -----------------------------------------------------------------
    async def initial(self) -> SyncUpdate:
        """Files, status and branch for the first paint."""
        t0 = time.perf_counter()
        update = SyncUpdate(git_changed=self.git is not None, first_event=t0)
        await self._full(update)
        update.done = time.perf_counter()
        return update

    async def updates(self, stop: asyncio.Event | None = None) -> AsyncIterator[SyncUpdate]:
        """Watch until `stop` is set, yielding the updates of each coalesced burst (all of
        one burst share `first_event`)."""
        loop = asyncio.get_running_loop()
        self.watcher = Watcher(self.ws.root, git_dirs_of(self.git))
        self.watcher.start(self._queue.put_nowait, loop)
        leave = self.changes.subscribe(self._due) if self.changes is not None else None
        stopper = asyncio.ensure_future(stop.wait()) if stop is not None else None
        try:
            while True:
                getter = asyncio.ensure_future(self._queue.get())
                done, _ = await asyncio.wait({getter} | ({stopper} if stopper else set()),
                                             return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    getter.cancel()
                    return
                burst = _Burst()
                burst.add(getter.result())
                await self._coalesce(burst)
                async for update in self._phases(burst):
                    yield update
        finally:
            if leave is not None:
                leave()
            if stopper is not None:
                stopper.cancel()
            if self.watcher is not None:
                await asyncio.to_thread(self.watcher.stop)
                self.watcher = None

    async def wait_ready(self, timeout: float = 30.0) -> None:
        """Until the watcher's watches are in place (tests and benchmarks start here)."""
        deadline = time.monotonic() + timeout
        while self.watcher is None or not self.watcher.ready.is_set():
            if time.monotonic() > deadline:
                raise TimeoutError("the file watcher did not start")
            await asyncio.sleep(0.01)

    async def _coalesce(self, burst: _Burst) -> None:
        """Take what is queued. While git holds its index lock (an operation under way),
        keep taking; after a big burst, wait until it has been quiet for a moment."""
        while True:
            while not self._queue.empty():
                burst.add(self._queue.get_nowait())
            big, busy = burst.size >= self.burst, self._git_busy()
            if not (big or busy) or time.perf_counter() - burst.first > self.settle_limit:
                return
            try:
                burst.add(await asyncio.wait_for(self._queue.get(), self.quiet if big else 0.02))
            except TimeoutError:
                if not self._git_busy():
                    return

    def _git_busy(self) -> bool:
        git = self.git
        return git is not None and os.path.exists(git.git_dir / "index.lock")

    def _due(self, ev: object) -> None:
        """Files a rebase had to put off (an edit was streaming into them) come back here."""
        if type(ev) is Due:
            self._queue.put_nowait((_DUE, ev.path))

    async def _phases(self, burst: _Burst) -> AsyncIterator[SyncUpdate]:
        """A burst's updates, quickest first: the rebased files (what the diff pane shows),
        then the git state. A few files changed: their status alone (`git status -- paths`).
        HEAD or the index moved: the index side at once (`git diff-index --cached`, no walk
        of the tree), then the full status and file list."""
        def new() -> SyncUpdate:
            return SyncUpdate(paths=set(burst.files), git_changed=bool(burst.git),
                              batches=burst.batches, first_event=burst.first)

        update = new()
        pending = self.pending()
        if pending is not None:
            targets = (set(burst.files) | burst.due) & set(pending.files)
            if update.git_changed:  # a checkout or reset may have rewritten any of them
                targets |= set(pending.files)
            if targets:
                update.rebased = await self._rebase(pending, sorted(targets), burst.files)
        if not (burst.files or burst.git):
            if update.rebased:
                update.done = time.perf_counter()
                yield update
            return
        known = self._files is not None and (self.git is None or self._status is not None)
        # an ignore file changed: which files count may have changed anywhere
        ignores = any(p.rsplit("/", 1)[-1] == ".gitignore" for p in burst.files)
        if known and not ignores and (self.git is None or
                                      (not burst.git and len(burst.files) <= self.burst)):
            await self._quick_files(update, burst.files)
            update.done = time.perf_counter()
            yield update
            return
        if update.rebased:  # the diff pane first; git's answer follows
            update.done = time.perf_counter()
            yield update
            update = new()
        if burst.git and self._status is not None and not ignores:
            complete = await self._quick_index(update)
            update.done = time.perf_counter()
            yield update
            if complete and not burst.files:  # a commit, an add: nothing else can have moved
                return
            update = new()
        await self._full(update)
        update.done = time.perf_counter()
        yield update

    async def _full(self, update: SyncUpdate) -> None:
        git, root = self.git, self.ws.root

        def look():
            if git is None:
                return _Files(walk_files(root)), None, None, None
            head = git.head_sha()  # before the status: a later move is seen again
            return _Files(git.list_files()), git.status(), git.branch(), head

        self._files, status, branch, head = await asyncio.to_thread(look)
        self._head = head
        if status is not None:
            self._status = status
            update.status, update.branch = dict(status), branch
        update.files = list(self._files.sorted)

    async def _quick_files(self, update: SyncUpdate, changed: dict[str, str]) -> None:
        """Status of just these paths, and the file list told which of them came or went."""
        root, git, files = self.ws.root, self.git, self._files
        assert files is not None

        def look():
            status = git.status(changed) if git is not None else None
            came = [p for p in changed if p not in files.set and os.path.isfile(root / p)]
            went = [p for p in changed if p in files.set and not os.path.lexists(root / p)]
            if git is not None and came:
                hidden = git.ignored(came)
                came = [p for p in came if p not in hidden]
            return status, came, went

        status, came, went = await asyncio.to_thread(look)
        if status is not None and self._status is not None:
            for p in changed:
                self._status.pop(p, None)
            self._status.update(status)
            update.status = dict(self._status)
        if came or went:
            files.add(came)
            files.remove(went)
            update.files = list(files.sorted)

    async def _quick_index(self, update: SyncUpdate) -> bool:
        """After HEAD or the index moved: the branch, and the status of every path that was
        dirty or is staged now (`git diff-index --cached` finds those without a walk of the
        tree). Returns whether that is the whole status (when the working tree did not change
        too, it is)."""
        git, known, limit, head = self.git, self._status, self.burst, self._head
        assert git is not None and known is not None

        def look():
            staged, now = git.staged(), git.head_sha()
            paths = {p for p, st in known.items() if not st.untracked} | set(staged)
            if now != head:  # a commit, reset or switch: what differs between the two moves too
                paths |= git.changed_between(head, now)
            fresh = git.status(paths) if len(paths) <= limit else None
            return fresh, staged, git.branch(), now

        fresh, staged, branch, self._head = await asyncio.to_thread(look)
        status = {p: st for p, st in known.items() if st.untracked}
        if fresh is not None:
            status.update(fresh)
        else:  # too many to look at one by one: the staged side now, the rest from before
            for path, st in known.items():
                if not st.untracked and (st.worktree != " " or path in staged):
                    status[path] = FileStatus(staged.get(path, " "), st.worktree, st.source)
            for path, letter in staged.items():
                status.setdefault(path, FileStatus(letter, " "))
        self._status = status
        update.status, update.branch = dict(status), branch
        return fresh is not None

    async def _rebase(self, pending: PendingDiff, paths: list[str],
                      batch: dict[str, str]) -> list[rebase.Rebased]:
        created = [p for p, kind in batch.items() if kind != "deleted" and p not in pending.files]
        out = []
        async with self.lock:
            expects = [rebase.expectation(pending.files[p]) for p in paths]
            reads = await asyncio.to_thread(_read_all, self.ws, expects, created)
            for expect, read in zip(expects, reads, strict=True):
                fd = pending.files.get(expect.path)
                if fd is None:
                    continue
                done = rebase.apply(fd, read)
                if done.any or done.deferred:
                    out.append(done)
        return out

    # -- git actions, off the event loop ---------------------------------------------------
    async def stage(self, pending: PendingDiff, paths=None) -> StageResult:
        """Stage exactly the accepted hunks (see GitRepo.stage)."""
        if self.git is None:
            return StageResult(messages=[NOT_A_REPO])
        return await asyncio.to_thread(self.git.stage, stage_items(pending, paths))

    async def propose_message(self, provider: Provider) -> str:
        """A commit message for what is staged, proposed by `provider` (show it for editing;
        raises commit_message.ProposalFailed)."""
        if self.git is None:
            raise ProposalFailed(NOT_A_REPO)
        return await propose(provider, await asyncio.to_thread(self.git.staged_diff))

    async def commit(self, message: str) -> CommitResult:
        if self.git is None:
            return CommitResult(False, NOT_A_REPO)
        return await asyncio.to_thread(self.git.commit, message)


def _read_all(ws: Workspace, expects: list[rebase.Expectation],
              created: list[str]) -> list[rebase.DiskRead]:
    reads = [rebase.read_disk(ws, e) for e in expects]
    for read, expect in zip(reads, expects, strict=True):
        if read.snapshot is None and read.reason.endswith("was deleted outside steer"):
            to = _renamed_to(ws, expect, created)
            if to:
                read.reason = f"{expect.path} was renamed to {to} outside steer"
    return reads


def _renamed_to(ws: Workspace, expect: rebase.Expectation, created: list[str]) -> str | None:
    """A file that appeared in the same batch with the content the lost one had."""
    for path in created[:50]:
        try:
            snap = ws.snapshot(path)
        except (ValueError, OSError):
            continue
        if snap.exists and snap.lines == expect.lines:
            return path
    return None
