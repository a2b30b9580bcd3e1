"""The keys: every action of the table (app/ui/actions.py) with its keys as bound now, its
help text and the name to rebind it by. Opened by F1 over any screen, a dialog too (closing
it goes back there). Keys from a config file are outside text: drawn as Text, never markup."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from app.config import config_file_shown
from app.ui.actions import ACTIONS, pretty_keys

SECTIONS = ["Prompt", "Review", "Variants", "Git", "Files", "Queue", "App"]


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close")]
    DEFAULT_CSS = "#help-where { width: 100%; padding-bottom: 1; }"

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
            yield Label("Keys go only where you put them: the first word of the key bar says where "
                        "(✎ typing, ◆ reviewing); nothing moves the focus by itself, and letters "
                        "typed in the prompt are always text. Tab from an empty prompt or Ctrl+D "
                        "enters the review.", id="help-where")
            with VerticalScroll():
                yield Static(table)
            yield Label(Text(f"Esc closes. Rebind in {config_file_shown()} (the one in use) "
                             "under [keys], by the names on the right: accept_hunk = \"a\"."),
                        id="help-foot")
