"""What each record of a session's log does to a session: the one place that says it.

A resume applies the log in order (`replay`) through the code that made it: a turn opens as
it opened live (Session.open_turn), its text goes through the same parser into the same
pending diff, decisions through the review (Review.replay), rebases through the live rebase.
Live, a record made outside the session (a rewind's files, an answer a kill cut) is applied
and saved with `apply`. Meta, Base and Rewind do nothing here (the store's header, the
ReplayResolver, `fold`). The records themselves are app/core/storage/records.py.
"""

from __future__ import annotations

from app.core.conversation.session import Session
from app.core.conversation.turn import Turn, restore_end
from app.core.edits import rebase
from app.core.storage.records import (
    Accept,
    AgentRec,
    Base,
    Context,
    End,
    Files,
    Meta,
    Queue,
    Reasoning,
    Rebase,
    Record,
    Reject,
    Rewind,
    Text,
    TurnRec,
    Undo,
)
from app.core.storage.store import ReplayResolver


def apply(session: Session, rec: Record) -> None:
    """Take a record of the log into `session`, and save it (when the session is saved)."""
    turn, pending, answer = session.turn, session.pending, session.answer
    match rec:
        case TurnRec():  # saved as it opens (before the bases its prefill reads)
            if turn is not None and turn.live:  # the log left the answer before it open
                end_replayed(session, turn, None)
            snaps = None if rec.bases is None else [b.snapshot().prepare() for b in rec.bases]
            session.open_turn(rec, Turn(rec.instruction, rec.kind, steered_at=rec.steered_at),
                              snaps)
            return
        case End() if turn is not None and turn.live:
            end_replayed(session, turn, rec)  # saved as the answer ends
            return
        case Rebase():  # saved as the rebase runs (Rebasing)
            fd = pending.files.get(rec.path) if pending is not None else None
            if fd is not None:
                snap = rec.snap.snapshot().prepare() if rec.snap is not None else None
                rebase.apply(fd, rebase.DiskRead(rec.path, snap, rec.reason))
            return
        case Meta() | Base() | Rewind():
            return
        case Text() if turn is not None and turn.live and answer is not None:
            turn.state = "streaming"
            answer.feed(rec.s)
        case Reasoning() if turn is not None:
            turn.reasoning.append(rec.s)
        case AgentRec():
            session.agent.replay(rec)
        case Accept() | Reject() | Undo() if session.review is not None:
            session.review.replay(rec)
            if isinstance(rec, Accept):
                session.checkpoint(rec)
        case Queue():
            session.queue[:] = rec.items
        case Context():
            session.context[:] = rec.items
        case Files():
            session.file_steps.append(rec)
            if rec.op == "redo":  # an accept of those turns again: a later rewind takes it
                session.accepts += [(rec.turn, s) for s in rec.steps]  # out too
    session.saving.save(rec)


def replay(session: Session, records: list[Record]) -> End | None:
    """Rebuild `session` from a log's records (`apply`), saving nothing again. Returns the
    End given to an answer the log left open, for the caller to apply and save."""
    log, session.log = session.log, None
    session.changes.read_through(ReplayResolver(session.ws, records))
    try:
        for rec in records:
            apply(session, rec)
        turn = session.turn
        cut = end_replayed(session, turn, None) if turn is not None and turn.live else None
    finally:
        session.log = log
        session.changes.read_through(session.saving.resolver())
    session.saving.lists_saved()
    return cut


def end_replayed(session: Session, turn: Turn, rec: End | None) -> End:
    """End a replayed answer as its record says, or as interrupted where the log stops."""
    if rec is None:
        rec = End(state="interrupted", finish_reason="cancelled", deltas=len(turn.chunks))
    restore_end(turn, rec)
    answer = session.answer
    assert answer is not None  # the log opened it
    answer.rid = rec.response_id
    answer.finish(interrupted=rec.state == "interrupted")
    if rec.state != "interrupted":
        turn.state = rec.state
    turn.ended = turn.started + rec.elapsed
    return rec
