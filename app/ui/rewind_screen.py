"""Rewind: every turn is a checkpoint. The list shows each turn with the files steer wrote in
it and after it; the user picks one and says what goes back to before it: the conversation,
the files, or both. Redo puts back the files of the last rewind. The screen only chooses;
the main screen carries the choice out through core (app/core/conversation/rewind.py, resume.py).
Instructions and paths are shown through app/view/outside_text.py, never as markup."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from app.view.outside_text import to_text

What = Literal["both", "files", "conversation", "redo"]


@dataclass(frozen=True)
class RewindChoice:
    turn: int  # 0-based: back to before this turn
    what: What


class RewindScreen(ModalScreen[RewindChoice | None]):
    DEFAULT_CSS = """
    RewindScreen { align: center middle; }
    #rewind-box { width: 110; max-width: 100%; height: auto; max-height: 90%;
                  border: thick $warning; background: $surface; padding: 1 2; }
    #rewind-title { text-style: bold; color: $warning; padding-bottom: 1; }
    #rewind-list { height: auto; max-height: 60vh; }
    #rewind-foot { color: $text-muted; padding-top: 1; }
    """
    BINDINGS = [
        Binding("enter,b", "choose('both')", "Both", priority=True),
        Binding("f", "choose('files')", "Files only"),
        Binding("c", "choose('conversation')", "Conversation only"),
        Binding("r", "choose('redo')", "Redo files"),
        Binding("escape,q", "cancel", "Cancel", priority=True),
    ]

    def __init__(self, checkpoints: list[tuple[int, str, list[str]]], can_redo: bool) -> None:
        super().__init__()
        self.checkpoints = checkpoints
        self.can_redo = can_redo

    def compose(self) -> ComposeResult:
        with Vertical(id="rewind-box"):
            yield Label("Rewind to before a turn", id="rewind-title")
            options = []
            for n, instruction, files in self.checkpoints:
                said = to_text(" ".join(instruction.split()), tabs=None)
                said.truncate(60, overflow="ellipsis")
                written = to_text(", ".join(files), tabs=None) if files else "no file written since"
                options.append(Option(Text.assemble(f"{n + 1:>3}  ", said, "\n     files: ", written),
                                      id=str(n)))
            yield OptionList(*options, id="rewind-list")
            redo = " · r redo the last files rewind" if self.can_redo else ""
            yield Label("Enter/b both · f files only · c conversation only" + redo +
                        " · Esc cancels. A file you changed since is refused, nothing is "
                        "written to it.", id="rewind-foot")

    def on_mount(self) -> None:
        ol = self.query_one(OptionList)
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
        highlighted = self.query_one(OptionList).highlighted
        if highlighted is None or not self.checkpoints:
            return
        self.dismiss(RewindChoice(self.checkpoints[highlighted][0], what))

    def action_cancel(self) -> None:
        self.dismiss(None)
