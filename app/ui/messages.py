"""Messages more than one pane posts to the main screen. A message only one widget posts is
a class of that widget (`DiffView.LeaveFile`, `ReviewPane.Reveal`); these are shared."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


@dataclass
class SessionChanged(Message):
    """A pane changed the session by an intent (a decision, a message sent, an undo): the
    screen draws a frame now rather than at the next tick; `force_status` redraws the status
    line too (its figures changed though no text arrived)."""

    force_status: bool = True
