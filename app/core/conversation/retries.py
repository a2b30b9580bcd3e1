"""Asking again: the edits the model could not apply, or a request that failed before its
answer said anything. Each goes as a new request through the session (Session.send); what
counts as refused or failed is the session's state (Session.refused, Session.failed)."""

from __future__ import annotations

from app.core.conversation import prompts
from app.core.conversation.session import Session
from app.core.conversation.turn import Turn


def retry_refused(session: Session) -> Turn | None:
    """Ask the model to redo the edits it could not apply, with the files as they are now."""
    errors, pending = session.refused, session.pending
    if not errors or session.streaming or pending is None:
        return None
    snaps = session.files.now(e.path for e in errors if e.path)
    text = prompts.retry_message([(e.path, e.message) for e in errors], snaps)
    content = prompts.steer_message(text, session.sent.untold(pending), interrupted=False)
    return session.send("retry the edits that could not be applied", "follow-up", content=content)


def retry_failed(session: Session) -> Turn | None:
    """Send the failed request again, as a new request: a first question is asked afresh
    (the files as they are now), a follow-up or redirect resends the message it sent."""
    failed = session.failed
    if failed is None:
        return None
    if failed.kind == "ask" and not session.sent.history:
        return session.send(failed.instruction, "ask")
    return session.send(failed.instruction, failed.kind, content=failed.content)
