"""Starting, resuming and rewinding a saved session (the log is app/core/storage/log.py).

Resuming replays the log into a fresh Session through the code that built it: each request
opens its turn as it did (the recorded message, the recorded bases), streamed text goes
through the same parser into the same pending diff, live rebases run again on the disk
snapshots they saw, and decisions are applied as they were made. The result has the same
turns, hunk ids, states, notes and undo stack. Then, like a live rebase, every file is moved
onto the disk as it is now, so edits the user made while steer was closed are kept, and an
answer that a kill cut short is what it is: interrupted, with its complete hunks reviewable.

Rewinding the conversation is a record in the log (it never erases what was written) and a
replay of what stands before that turn.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from app.core.conversation import replay
from app.core.conversation.session import Session
from app.core.disk.state_home import StateUnusable
from app.core.edits import rebase
from app.core.edits.hunks import HunkState
from app.core.storage.log import SessionLog, read_log
from app.core.storage.records import Meta, Rewind, SessionError, fold
from app.core.storage.store import SessionStore, new_id


@dataclass
class Resumed:
    id: str
    turns: int
    rebased: list[rebase.Rebased] = field(default_factory=list)  # files moved onto the disk
    cut: bool = False  # the last answer was cut short by the end of the process
    recovered: list[str] = field(default_factory=list)  # journal steps a crash left, completed

    @property
    def moved(self) -> list[str]:
        return [r.path for r in self.rebased if r.any]


def start(session: Session, store: SessionStore, *, branch: str | None = None,
          sid: str | None = None) -> SessionLog:
    """Save a new session from now on."""
    meta = Meta(id=sid or new_id(), created=time.time(), root=str(session.ws.root),
                branch=branch, provider=session.provider.label)
    log = store.create(meta)
    session.attach(log, branch=branch, created=meta.created)
    return log


def resume(session: Session, store: SessionStore, sid: str | None = None, *,
           wait: float = 0.0) -> Resumed:
    """Take over the saved session `sid` (the last one when None): complete what a crash
    left half-done in the journal (so what a killed accept wrote is on disk), replay the
    log, then rebase it onto the disk."""
    try:
        store.writable()  # a folder that cannot be used: why, rather than "no session"
    except StateUnusable as exc:
        raise SessionError(f"cannot resume: {exc}") from None
    sid = store.resolve(sid)
    records, log = store.open(sid, wait)
    try:
        done = session.changes.journal.recover(session.ws)
        meta = next((r for r in records if isinstance(r, Meta)), None)
        cut = replay.replay(session, records)
        session.attach(log, branch=branch_of(session.ws.root) or (meta.branch if meta else None),
                       created=meta.created if meta else None,
                       forked_from=meta.forked_from if meta else None)
        if cut is not None:  # the process ended mid-answer: that end is part of the story
            replay.apply(session, cut)
        session.sent.resumed(session.provider)  # the server may keep the last answer
        moved = rebase_onto_disk(session)
    except BaseException:  # Ctrl+C too: the log is closed, so its lock is released
        log.close()
        session.log = None
        raise
    return Resumed(sid, len(session.turns), moved, cut is not None,
                   [f"completed an interrupted {e.op} ({e.label})" for e in done])


def open_saved(session: Session, *, resume_it: bool = False, sid: str | None = None,
               store: SessionStore | None = None) -> Resumed | None:
    """What `steer` does at start: resume `sid` (the last session when None) if asked, else
    save a new session; a new session with a given `sid` that exists already is resumed
    (a browser tab of `steer web`, reloaded). StateUnusable: a new session cannot be saved
    (the caller says so, and goes on without)."""
    store = store or SessionStore(session.ws.root)
    if resume_it or (sid is not None and sid in store.ids()):
        return resume(session, store, sid, wait=0.0 if resume_it else 10.0)
    start(session, store, branch=branch_of(session.ws.root), sid=sid)
    return None


def branch_of(root) -> str | None:
    from app.core.git.repository import GitRepo

    repo = GitRepo.open(root)
    if repo is None:
        return None
    try:
        return repo.branch()
    except Exception:  # a repository git cannot read now: no branch to show
        return None
    finally:
        repo.close()


def rebase_onto_disk(session: Session) -> list[rebase.Rebased]:
    """Move every file of the pending diff onto the disk as it is now (recorded in the log,
    like any live rebase)."""
    pending = session.pending
    if pending is None:
        return []
    out = []
    for fd in list(pending.files.values()):
        read = rebase.read_disk(session.ws, rebase.expectation(fd))
        snap = read.snapshot
        if snap is not None and not read.user and (not snap.exists or (
                (fd.base.fmt, fd.base.mode) == (snap.fmt, snap.mode))):
            if not any(h.state == HunkState.STALE for h in fd.hunks):
                continue
        out.append(rebase.apply(fd, read))
    return out


# -- rewinding the conversation ----------------------------------------------------------------
def rewind_conversation(session: Session, turn: int) -> int:
    """The conversation as it was before turn `turn` (0-based): later turns, their hunks and
    the decisions made since are gone from the session (the log keeps them, behind a Rewind
    record). Files are not touched: see app/core/conversation/rewind.py. Returns the turns left."""
    log = session.log
    if session.streaming:
        raise SessionError("stop the answer first (Esc): a streaming turn cannot be rewound")
    if log is None:
        raise SessionError("this session is not saved; nothing to rewind to")
    if not 0 <= turn < len(session.turns):
        raise SessionError(f"no turn {turn + 1} (the session has {len(session.turns)})")
    log.append(Rewind(turn=turn))
    if not log.flush():
        raise SessionError("the session log could not be written; nothing was rewound")
    records, _ = read_log(log.path)
    session.reset()
    cut = replay.replay(session, fold(records))
    if cut is not None:
        replay.apply(session, cut)
    rebase_onto_disk(session)
    log.summary(session.saving.info())
    # the conversation goes on from an earlier point: the next request cannot continue the
    # last one sent, and its answer's title says so
    session.sent.full_next = f"rewound to before turn {turn + 1}"
    return len(session.turns)
