"""Reject with a reason: a one-line input over the review. The reason goes to the model with
the next request (and to later change sets), so it does not propose the same thing again."""

from __future__ import annotations

from textual import getters
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


class RejectReason(ModalScreen[str | None]):
    """Enter rejects (an empty reason is fine), Esc cancels: nothing is rejected."""

    DEFAULT_CSS = """
    RejectReason { align: center bottom; }  /* the hunk it rejects stays in sight above */
    #reject-box { width: 80; max-width: 100%; height: auto; border: thick $error;
                  background: $surface; padding: 1 2; }
    #reject-title { text-style: bold; color: $error; padding-bottom: 1; }
    #reject-foot { color: $text-muted; padding-top: 1; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel", priority=True)]

    reason = getters.query_one("#reject-input", Input)

    def __init__(self, what: str) -> None:
        super().__init__()
        self.what = what

    def compose(self) -> ComposeResult:
        with Vertical(id="reject-box"):
            yield Label(f"Reject {self.what}: why? (optional, one line)", id="reject-title")
            yield Input(placeholder="e.g. keep the old name; the callers depend on it",
                        id="reject-input")
            yield Label("Enter rejects · Esc cancels · the model is told with your next message",
                        id="reject-foot")

    def on_mount(self) -> None:
        self.reason.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)
