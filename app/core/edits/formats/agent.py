"""The back-end is an agent (ACP): not an edit format the model writes but the absence of
one. The agent is sent the user's words, edits through steer's tools (its edits become
hunks in app/core/conversation/agent.py), and its answer is prose with no markup to parse.
A change set keeps the format it was made with, so a session resumed on another kind of
back-end can tell (conversation/session.py)."""

from __future__ import annotations

from app.core.edits.formats.record import Format

FORMAT = Format("agent", "agent", agent=True)
