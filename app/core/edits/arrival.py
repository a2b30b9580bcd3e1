"""Arrival: every edit is placed against the disk as it is when the edit completes.

The model wrote its answer against the request's snapshot of each file (the *origin*), but
the user may have changed a file since: before its first hunk arrived (no watch event can
rebase a file that has no hunks yet), between two of its hunks, or in the instant between a
hunk completing and a live rebase (`steer run` has no watcher at all). So:

- `Arrivals` checks each file whose edit just completed against the disk (read in a thread,
  under the write lock, like the live rebase) and, when the disk is not what steer expects,
  rebases the file there (app/core/edits/rebase.py): a hunk overlapping the user's change
  becomes a `conflict` holding both sides before any key is pressed;
- an edit that begins after a rebase moved the file's base is placed 3-way from the origin
  by the pending diff itself (app/core/edits/placing.py).
"""

from __future__ import annotations

import asyncio
import os

from app.core.disk.workspace import Workspace
from app.core.edits import rebase
from app.core.edits.diff import PendingDiff
from app.core.edits.file_diff import FileDiff
from app.core.faults import stop_point


def check_now(ws: Workspace, fd: FileDiff) -> rebase.Rebased | None:
    """The same check, at once (an accept about to plan its writes); None when the disk is
    what steer expects."""
    read = rebase.read_disk(ws, rebase.expectation(fd))
    if read.snapshot is not None and not read.user:
        return None
    return rebase.apply(fd, read)


class Arrivals:
    """Checks files against the disk as their edits complete (see the module's docstring)."""

    def __init__(self, ws: Workspace, lock: asyncio.Lock) -> None:
        self.ws = ws
        self.lock = lock  # the session's write lock: never mid-accept, never beside a rebase
        self._task: asyncio.Task[None] | None = None
        self._waiting: list[PendingDiff] = []  # change sets with edits to check, in order
        self._same: dict[str, tuple] = {}  # path -> (change set, stat, expectation) last seen equal

    def kick(self, pending: PendingDiff) -> None:
        """Edits completed in `pending` (`pending.arrived`): check them, off the stream.
        Cheap when none did (it is called for every event of an answer)."""
        if not pending.arrived:
            return
        if pending not in self._waiting:
            self._waiting.append(pending)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain())

    async def settle(self) -> None:
        """Until every completed edit has been checked (the end of `steer run`, tests)."""
        while self._task is not None and not self._task.done():
            await asyncio.wait([self._task])

    async def _drain(self) -> None:
        while self._waiting:
            pending = self._waiting[0]
            if not pending.arrived:
                self._waiting.pop(0)
                continue
            paths = sorted(pending.arrived)
            pending.arrived.clear()
            async with self.lock:
                await self._check(pending, paths)

    async def _check(self, pending: PendingDiff, paths: list[str]) -> None:
        fds = [fd for p in paths if (fd := pending.files.get(p)) is not None and fd.hunks]
        for fd in fds:
            stop_point(f"arrive:{fd.path}")  # tests save the file right here
        # a file whose stat and expectation are as at its last check (when it was as
        # expected) is not read again: 65 edits of one file cost one read, not 65
        stats = {fd.path: self._stat(fd.path) for fd in fds}
        fds = [fd for fd in fds if stats[fd.path] is None or self._same.get(fd.path) !=
               (pending, stats[fd.path], rebase.expectation(fd).token)]
        if not fds:
            return
        expects = [rebase.expectation(fd) for fd in fds]
        try:
            reads = await asyncio.to_thread(lambda: [rebase.read_disk(self.ws, e) for e in expects])
        except Exception as exc:  # a check that cannot run is said, never swallowed
            for fd in fds:
                pending.error(fd.path, f"{fd.path}: could not compare it with the disk "
                                       f"({type(exc).__name__}: {exc})")
            return
        for fd, read in zip(fds, reads, strict=True):
            if pending.files.get(fd.path) is not fd:
                continue
            token = rebase.expectation(fd).token
            if read.snapshot is not None and not read.user and read.token == token:
                if stats[fd.path] is not None:  # the disk is what steer expects: placed right
                    self._same[fd.path] = (pending, stats[fd.path], token)
                continue
            self._same.pop(fd.path, None)
            rebase.apply(fd, read)  # (the pane redraws what it touched, by revision)

    def _stat(self, path: str) -> tuple[int, int, int, int] | None:
        try:
            st = os.stat(self.ws.root / path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino
