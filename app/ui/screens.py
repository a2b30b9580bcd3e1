"""Modal screens: the key help, the inline hunk editor (used when $EDITOR is not set), and
questions. A path or a message in them is outside text: shown through
app/view/outside_text.py, never as markup."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static, TextArea

from app.core.edits.hunks import Hunk
from app.ui.actions import ACTIONS, pretty_keys
from app.view.outside_text import to_text

SECTIONS = ["Prompt", "Review", "Git", "Files", "Queue", "App"]


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close")]

    def __init__(self, keys: dict[str, str]) -> None:
        super().__init__()
        self.keys = keys

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column(style="bold")
        table.add_column()
        table.add_column(style="dim")  # the name to rebind it by
        section = ""
        for a in sorted(ACTIONS, key=lambda a: SECTIONS.index(a.section)):
            # cells as Text: a str cell is read as markup, and the keys come from a config file
            table.add_row(Text(a.section if a.section != section else "", style="italic"),
                          Text(pretty_keys(self.keys.get(a.id, "")) or "(palette)"), Text(a.help),
                          Text(a.id))
            section = a.section
        with Vertical(id="help"):
            yield Label("steer — keys", id="help-title")
            with VerticalScroll():
                yield Static(table)
            yield Label("Esc closes. Rebind in ~/.config/steer/config.toml under \\[keys], by the names "
                        "on the right: accept_hunk = \"a\".", id="help-foot")


class HunkEditor(ModalScreen[list[str] | None]):
    """Edit a hunk's new lines before accepting them. Ctrl+S accepts, Esc cancels."""

    BINDINGS = [Binding("ctrl+s", "save", "Accept edited", priority=True),
                Binding("escape", "cancel", "Cancel", priority=True)]

    def __init__(self, hunk: Hunk, language: str | None) -> None:
        super().__init__()
        self.hunk = hunk
        self.language = language

    def compose(self) -> ComposeResult:
        with Vertical(id="editor"):
            yield Label(to_text(f"Edit hunk #{self.hunk.id} in {self.hunk.path} — Ctrl+S accepts, "
                                "Esc cancels", tabs=None), id="editor-title")
            area = TextArea("\n".join(self.hunk.new), id="editor-area", show_line_numbers=True)
            if self.language:
                try:
                    area.language = self.language
                except Exception:  # no tree-sitter grammar installed: plain text still edits
                    pass
            yield area

    def action_save(self) -> None:
        self.dismiss(self.query_one(TextArea).text.split("\n"))

    def action_cancel(self) -> None:
        self.dismiss(None)


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
