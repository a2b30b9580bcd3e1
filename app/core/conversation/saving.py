"""Saving a session as it goes: the log its records are appended to (app/core/conversation/
log.py says why a log of events), the summary `steer sessions` lists, and the two lists the
UI edits in place (the queue, the context files), saved whenever they changed.

What each record does to a session is app/core/conversation/replay.py;
this is only where records go and what the summary says.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel

from app.core.edits.diff import PendingDiff
from app.core.edits.hunks import OPEN, Resolver
from app.core.storage.log import SessionLog
from app.core.storage.records import (
    Accept,
    Context,
    End,
    Info,
    Queue,
    Reject,
    TurnRec,
    Undo,
)
from app.core.storage.store import RecordingResolver

if TYPE_CHECKING:
    from app.core.conversation.turn import Turn
    from app.core.disk.workspace import Workspace


class Saved(Protocol):
    """What saving needs of its session: what the summary counts and the lists it saves."""

    ws: Workspace
    turns: list[Turn]

    @property
    def pending(self) -> PendingDiff | None: ...
    queue: list[str]

    @property
    def context(self) -> list[str]: ...


class Saving:
    """Where a session is saved (None: it is not), and its summary's facts."""

    def __init__(self, session: Saved) -> None:
        self.session = session
        self.log: SessionLog | None = None
        self.branch: str | None = None
        self.created = time.time()
        self.forked_from: str | None = None
        self._lists: tuple[list[str], list[str]] = ([], [])  # as last saved

    def resolver(self) -> Resolver:
        """What bases are read through: kept in the log as they are read, when saved."""
        ws = self.session.ws
        return ws if self.log is None else RecordingResolver(ws, self.save)

    def save(self, rec: BaseModel) -> None:
        if self.log is not None:
            self.log.append(rec)
            if isinstance(rec, TurnRec | End | Accept | Reject | Undo):  # the summary changed
                self.log.summary(self.info())

    def save_lists(self) -> None:
        """The queue and the context, when they changed since they were last saved (the UI
        edits the queue in place; this runs at every turn boundary and decision too)."""
        if self.log is None:
            return
        s = self.session
        queue, context = self._lists
        if s.queue != queue:
            self.save(Queue(items=list(s.queue)))
        if s.context != context:
            self.save(Context(items=list(s.context)))
        self.lists_saved()

    def lists_saved(self) -> None:
        """The lists as they are now are in the log (a replay rebuilt them from it)."""
        self._lists = (list(self.session.queue), list(self.session.context))

    def forget_lists(self) -> None:
        self._lists = ([], [])

    def info(self) -> Info:
        """What `steer sessions` shows of this session."""
        assert self.log is not None
        s = self.session
        open_ = sum(1 for h in s.pending.hunks if h.state in OPEN) if s.pending is not None else 0
        first = s.turns[0].instruction if s.turns else ""
        return Info(id=self.log.id, root=str(s.ws.root), branch=self.branch,
                    created=self.created, updated=time.time(), first=first,
                    turns=len(s.turns), open=open_, forked_from=self.forked_from)

    def attach(self, log: SessionLog, *, branch: str | None = None, created: float | None = None,
               forked_from: str | None = None) -> None:
        """Save into `log` from now on."""
        self.log = log
        self.branch = branch
        self.created = created or time.time()
        self.forked_from = forked_from
        self.save_lists()
        log.summary(self.info())

    async def close(self) -> None:
        """Stop saving: what changed since the last record is saved, then the log closed."""
        if self.log is not None:
            self.save_lists()
            await asyncio.to_thread(self.log.close)
