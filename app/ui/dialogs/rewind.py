"""Rewind: every turn is a checkpoint. The list shows each turn with the files steer wrote in
it and after it; the user picks one and says what goes back to before it: the conversation,
the files, or both. Redo puts back the files of the last rewind. The dialog only chooses:
`offer` opens it (or says why not), `carry_out` carries the choice out through core
(app/core/conversation/rewind.py, resume.py) and says what happened; the main screen reads
the session again when the conversation went back. Instructions and paths are shown through
app/view/outside_text.py, never as markup."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from rich.text import Text
from textual import getters
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from app.core.conversation import rewind
from app.core.conversation.resume import rebase_onto_disk, rewind_conversation
from app.core.conversation.session import Session
from app.core.disk.journal import UndoRefused
from app.core.disk.repo_lock import Busy
from app.core.storage.records import SessionError
from app.core.text.plural import plural
from app.view.outside_text import to_text

Notify = Callable[..., object]  # a toast (Widget.notify)
What = Literal["both", "files", "conversation", "redo"]


@dataclass(frozen=True)
class RewindChoice:
    turn: int  # 0-based: back to before this turn
    what: What


class _Turns(OptionList):
    """The turns, oldest first; the cursor stops at either end (Textual's list wraps, and
    from the last turn one more ↓ would land on the first, the one that rewinds it all)."""

    def action_cursor_down(self) -> None:
        if self.highlighted is None or self.highlighted < self.option_count - 1:
            super().action_cursor_down()

    def action_cursor_up(self) -> None:
        if self.highlighted is None or self.highlighted > 0:
            super().action_cursor_up()


class RewindScreen(ModalScreen[RewindChoice | None]):
    DEFAULT_CSS = """
    RewindScreen { align: center middle; }
    #rewind-box { width: 110; max-width: 100%; height: auto; max-height: 90%;
                  border: thick $warning; background: $surface; padding: 1 2; }
    #rewind-title { text-style: bold; color: $warning; padding-bottom: 1; }
    #rewind-list { height: auto; max-height: 60vh; }
    #rewind-foot { color: $text-muted; padding-top: 1; width: 100%; }  /* wraps, never cut */
    """
    BINDINGS = [
        Binding("enter,b", "choose('both')", "Both", priority=True),
        Binding("f", "choose('files')", "Files only"),
        Binding("c", "choose('conversation')", "Conversation only"),
        Binding("r", "choose('redo')", "Redo files"),
        Binding("escape,q", "cancel", "Cancel", priority=True),
    ]

    turns = getters.query_one("#rewind-list", OptionList)

    def __init__(self, checkpoints: list[tuple[int, str, list[str]]], can_redo: bool) -> None:
        super().__init__()
        self.checkpoints = checkpoints
        self.can_redo = can_redo

    def compose(self) -> ComposeResult:
        with Vertical(id="rewind-box"):
            yield Label("Rewind to before a turn" if self.checkpoints else
                        "Every turn is rewound: r puts the files of the last rewind back",
                        id="rewind-title")
            options = []
            for n, instruction, files in self.checkpoints:
                said = to_text(" ".join(instruction.split()), tabs=None)
                said.truncate(60, overflow="ellipsis")
                written = to_text(", ".join(files), tabs=None) if files else "no file written since"
                options.append(Option(Text.assemble(f"{n + 1:>3}  ", said, "\n     files: ", written),
                                      id=str(n)))
            yield _Turns(*options, id="rewind-list")
            redo = " · r redo the last files rewind" if self.can_redo else ""
            yield Label("Enter/b both · f files only · c conversation only" + redo +
                        " · Esc cancels. A file you changed since is refused, nothing is "
                        "written to it.", id="rewind-foot")

    def on_mount(self) -> None:
        ol = self.turns
        ol.focus()
        if self.checkpoints:
            ol.highlighted = len(self.checkpoints) - 1

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.action_choose("both")

    def action_choose(self, what: What) -> None:
        if what == "redo":
            if self.can_redo:
                self.dismiss(RewindChoice(-1, "redo"))
            return
        highlighted = self.turns.highlighted
        if highlighted is None or not self.checkpoints:
            return
        self.dismiss(RewindChoice(self.checkpoints[highlighted][0], what))

    def action_cancel(self) -> None:
        self.dismiss(None)


async def offer(session: Session, notify: Notify) -> RewindScreen | None:
    """The dialog for this session's checkpoints, or None (and why not)."""
    if session.log is None:
        notify("this session is not saved (--no-save): there is nothing to rewind to",
               severity="warning")
        return None
    if session.streaming:
        notify("stop the answer first (Esc)", severity="warning")
        return None
    can_redo = rewind.can_redo(session)
    if not session.turns and not can_redo:  # (rewound to the start: the redo is still offered)
        notify("no turn yet: nothing to rewind", timeout=3)
        return None
    points = await asyncio.to_thread(rewind.checkpoints, session)
    return RewindScreen(points, can_redo)


async def carry_out(session: Session, choice: RewindChoice, notify: Notify) -> bool:
    """The choice, through core; True when the conversation went back (whoever shows it
    reads the session again from the start)."""
    done, back = None, False
    try:
        if choice.what == "redo":
            done = await asyncio.to_thread(rewind.redo_files, session)
        elif choice.what in ("files", "both"):
            done = await asyncio.to_thread(rewind.rewind_files, session, choice.turn)
        if choice.what in ("conversation", "both"):
            left = rewind_conversation(session, choice.turn)
            back = True
            notify(f"the conversation is back to before turn {choice.turn + 1} "
                   f"({plural(left, 'turn')} left)", timeout=4)
        elif done is not None and done.written:
            rebase_onto_disk(session)  # the hunks follow the files back
    except (UndoRefused, SessionError, Busy, OSError) as exc:
        notify(str(exc), severity="error", timeout=8)
    if done is not None:
        if done.written:
            verb = "put back" if choice.what == "redo" else "rewound"
            notify(f"{verb}: {', '.join(done.written)}", timeout=4)
        for path, why in done.refused.items():
            notify(f"{path} refused: {why}", severity="warning", timeout=10)
        if not done.written and not done.refused:
            notify("no file to rewind: steer wrote nothing in or after that turn", timeout=4)
    return back
