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
        # two columns, the sections as headings between them: on a narrow terminal the help
        # text keeps most of the width (four columns left it a third, three keys a screen)
        table = Table.grid(padding=(0, 2), expand=True)
        table.add_column(style="bold", no_wrap=True)
        table.add_column(ratio=1)
        for section in SECTIONS:
            rows = [a for a in ACTIONS if a.section == section]
            if not rows:
                continue
            table.add_row(Text(section, style="bold italic"), Text(""))
            for a in rows:
                # cells as Text: a str cell is read as markup, and keys come from a config file
                table.add_row(Text(pretty_keys(self.keys.get(a.id, "")) or "(palette)"),
                              Text.assemble(a.help, ("  " + a.id, "dim")))  # (its name to rebind)
        with Vertical(id="help"):
            yield Label("steer — keys", id="help-title")
            yield Label("Keys go where you put them, nowhere else: the key bar's first word says "
                        "where (✎ typing: letters are text; ◆ reviewing). Tab from an empty prompt "
                        "or Ctrl+D enters the review.", id="help-where")
            with VerticalScroll():
                yield Static(table)
            yield Label(Text(f"Esc closes. Rebind in {config_file_shown()} (the one in use) "
                             "under [keys], by the dim names after each line: accept_hunk = \"a\"."),
                        id="help-foot")
