"""An agent asks before it runs a tool: its question, what the tool is, and the options it
offers, answered with a key. The agent waits meanwhile; so does nothing else in steer.

Every word here but the key hints is the agent's: shown through app/view/outside_text.py,
never read as markup (a title could carry `[@click=...]`, an action)."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from app.core.events import PermissionRequest
from app.view.outside_text import to_text


class PermissionScreen(ModalScreen[str | None]):
    """Dismissed with the chosen option's id; Esc picks the first "reject" option the
    agent offers (or cancels the request when it offers none)."""

    BINDINGS = [Binding("escape", "refuse", "Refuse", priority=True)]

    def __init__(self, request: PermissionRequest) -> None:
        super().__init__()
        self.request = request

    def compose(self) -> ComposeResult:
        req = self.request
        tool = req.tool
        with Vertical(id="permission"):
            yield Label(to_text(f"The agent asks: {req.title}", tabs=None), id="permission-title")
            kind = f" ({tool.kind})" if tool.kind else ""
            yield Static(to_text(f"tool: {tool.title}{kind}", tabs=None), id="permission-tool")
            lines = [to_text(f"  {i}  {o.name}", tabs=None) for i, o in enumerate(req.options, 1)]
            yield Static(Text("\n").join(lines), id="permission-options")
            yield Label("a number answers · Esc refuses", id="permission-foot")

    def on_key(self, event: events.Key) -> None:
        if event.character and event.character.isdigit():
            i = int(event.character) - 1
            if 0 <= i < len(self.request.options):
                event.stop()
                self.dismiss(self.request.options[i].id)

    def action_refuse(self) -> None:
        reject = next((o for o in self.request.options if o.kind.startswith("reject")), None)
        self.dismiss(reject.id if reject else None)
