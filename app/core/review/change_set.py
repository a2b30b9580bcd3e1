"""The change set: what the model proposed for the user's files, and the only way to them.

A session has one `ChangeSet` for its life. Each new question opens a change set in it
(`open`): a pending diff over fresh snapshots of the files, and its `Review`, the only writer
of the working tree (DESIGN rule 1), bound to the journal that undoes it, the write lock it
shares with the live rebase, and the arrival checks that place each completed edit against
the disk. A redirect or follow-up goes on in the same one.

Who wants to know what happens to the hunks subscribes once (`subscribe`) and hears every
change set the session opens: typed events, in a stated order (app/core/review/events.py).
Nothing outside assigns a callback to the pending diff or the review.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from app.core.disk.journal import Entry, Journal
from app.core.disk.snapshot import Snapshot
from app.core.disk.workspace import Workspace
from app.core.edits.arrival import Arrivals
from app.core.edits.diff import PendingDiff
from app.core.edits.hunks import Resolver
from app.core.listeners import Listeners
from app.core.review.events import Event, Opened
from app.core.review.review import Review


class ChangeSet:
    def __init__(self, ws: Workspace, *, journal: Journal | None = None,
                 lock: asyncio.Lock | None = None) -> None:
        self.ws = ws
        self.journal = journal or Journal.for_workspace(ws)
        # one write at a time (accept, undo), shared with the live rebase (app/core/git/sync.py)
        self.write_lock = lock or asyncio.Lock()
        self.arrivals = Arrivals(ws, self.write_lock)  # each edit checked against the disk
        self.listeners: Listeners[Event] = Listeners()
        self.pending: PendingDiff | None = None
        self.review: Review | None = None
        self._resolver: Resolver = ws  # what the pending diff reads its bases through

    @classmethod
    def beside(cls, other: ChangeSet) -> ChangeSet:
        """Another session's change sets over the same tree (a variant): one journal, so one
        undo order, and one writer; the decisions on `other`'s change set are where it
        starts (they are told to the model), until it opens its own."""
        made = cls(other.ws, journal=other.journal, lock=other.write_lock)
        made.pending = other.pending
        return made

    def subscribe(self, fn: Callable[[Event], object]) -> Callable[[], None]:
        return self.listeners.subscribe(fn)

    def publish(self, event: Event) -> None:
        self.listeners.publish(event)

    def open(self, snapshots: Iterable[Snapshot]) -> PendingDiff:
        """A new change set on these snapshots of the files (the one before is left as it
        is: its hunks were all decided, or the user asked afresh)."""
        pending = PendingDiff(self._resolver, snapshots, self.listeners)
        self.pending = pending
        self.review = Review(self.ws, pending, self.journal, lock=self.write_lock,
                             listeners=self.listeners)
        self.publish(Opened(pending))
        return pending

    def close(self) -> None:
        """No change set (a rewind rebuilds the session from its log)."""
        self.pending, self.review = None, None

    def read_through(self, resolver: Resolver) -> None:
        """Read bases through `resolver` from now on (a saved session keeps each base it
        reads; a replay reads them back from the log)."""
        self._resolver = resolver
        if self.pending is not None:
            self.pending.resolver = resolver

    def kick(self) -> None:
        """Edits completed: check them against the disk, off the stream (arrival.py)."""
        if self.pending is not None:
            self.arrivals.kick(self.pending)

    # -- the journal ------------------------------------------------------------------------
    async def recover(self) -> list[Entry]:
        """Complete an accept or undo that a crash left half-done (before anything else)."""
        return await asyncio.to_thread(self.journal.recover, self.ws)

    async def undoable(self) -> bool:
        """There is an accept to undo, in this session or from an earlier one (a thread)."""
        if self.review is not None and self.review.can_undo:
            return True
        return await asyncio.to_thread(lambda: self.journal.last_undoable() is not None)

    async def undo(self) -> str:
        """Undo the last accept: this session's, else the journal's (as `steer undo` does)."""
        if self.review is not None:
            return await self.review.undo_async()
        async with self.write_lock:
            done = await asyncio.to_thread(self.journal.undo, self.ws)
            return done.label


__all__ = ["ChangeSet"]
