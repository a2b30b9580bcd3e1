"""Questions over the main screen: yes or no (quit with hunks open), or one of a few answers
on keys (a file too big for the model's window: its outline, or leave it out). The question
and its detail may name files: outside text, shown through app/view/outside_text.py."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from app.view.outside_text import to_text


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question: y (or Enter) confirms, n or Esc does not."""

    BINDINGS = [Binding("y,enter", "answer(True)", "Yes", priority=True),
                Binding("n,escape", "answer(False)", "No", priority=True)]

    def __init__(self, question: str, detail: str = "") -> None:
        super().__init__()
        self.question = question
        self.detail = detail

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm"):
            yield Label(to_text(self.question, tabs=None), id="confirm-title")
            if self.detail:
                yield Static(to_text(self.detail), id="confirm-detail")
            yield Label("y quits · n or Esc stays", id="confirm-foot")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class ChoiceScreen(ModalScreen[str | None]):
    """A question with a few answers, each on a key; Esc answers None."""

    BINDINGS = [Binding("escape", "choose(None)", "Cancel", priority=True)]

    def __init__(self, question: str, detail: str, options: list[tuple[str, str, str]]) -> None:
        super().__init__()
        self.question, self.detail, self.options = question, detail, options

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm"):
            yield Label(to_text(self.question, tabs=None), id="confirm-title")
            yield Static(to_text(self.detail), id="confirm-detail")
            yield Static(Text("\n").join(to_text(f"  {key}  {label}", tabs=None)
                                         for key, label, _ in self.options))
            yield Label(to_text("Esc: " + self.options[-1][1], tabs=None), id="confirm-foot")

    def on_key(self, event) -> None:
        for key, _label, value in self.options:
            if event.character == key:
                event.stop()
                self.dismiss(value)
                return

    def action_choose(self, value: str | None) -> None:
        self.dismiss(value)
