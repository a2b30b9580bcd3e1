"""A paste, whole, as it will be sent: F2 in the prompt opens it over the screen. The text is
outside text: shown through app/view/outside_text.py (escapes visible, never obeyed), in a
read-only TextArea; Esc or F2 closes."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, TextArea

from app.view.outside_text import name, visible
from app.view.pastes import Paste


class PasteView(ModalScreen[None]):
    """A paste, whole, as text (the boundary for outside text: escapes shown, never obeyed).
    Read-only; Esc or F2 closes."""

    DEFAULT_CSS = """
    PasteView { align: center middle; }
    PasteView > Vertical { width: 90%; height: 85%; border: thick $primary; background: $surface; }
    PasteView #paste-title { padding: 0 1; text-style: bold; }
    PasteView TextArea { height: 1fr; }
    """
    BINDINGS = [Binding("escape,f2", "dismiss", "Close", priority=True)]

    def __init__(self, paste: Paste) -> None:
        super().__init__()
        self.paste = paste

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"{name(self.paste.token)} — as it will be sent (escapes shown); Esc "
                        "closes", id="paste-title", markup=False)
            yield TextArea(visible(self.paste.text), read_only=True, show_line_numbers=True,
                           soft_wrap=False, id="paste-text")
