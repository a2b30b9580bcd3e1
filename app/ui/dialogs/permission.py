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

KEYS = (("y", "allow_once", "allows once"), ("a", "allow_always", "always (this session)"),
        ("n", "reject_once", "refuses"))  # each key answers with the first option of its kind


class PermissionScreen(ModalScreen[str | None]):
    """Dismissed with the chosen option's id: `y` allow once, `a` allow always, `n` or Esc
    reject (the first option of that kind the agent offers; Esc cancels the request when it
    offers no reject), or an option's number. Any other key does nothing: a sentence typed
    on into the dialog answers nothing but its own letters y, a or n, so the first letters
    are the ones the dialog names."""

    BINDINGS = [Binding("escape", "refuse", "Refuse", priority=True)]

    def __init__(self, request: PermissionRequest) -> None:
        super().__init__()
        self.request = request

    def _first(self, kind: str) -> str | None:
        """The first option of `kind` ("reject" also takes "reject_always")."""
        prefix = kind.split("_")[0] if kind.startswith("reject") else kind
        return next((o.id for o in self.request.options if o.kind.startswith(prefix)), None)

    def compose(self) -> ComposeResult:
        req = self.request
        tool = req.tool
        with Vertical(id="permission"):
            yield Label(to_text(f"The agent asks: {req.title}", tabs=None), id="permission-title")
            kind = f" ({tool.kind})" if tool.kind else ""
            yield Static(to_text(f"tool: {tool.title}{kind}", tabs=None), id="permission-tool")
            lines = [to_text(f"  {i}  {o.name}", tabs=None) for i, o in enumerate(req.options, 1)]
            yield Static(Text("\n").join(lines), id="permission-options")
            keys = [f"{key} {what}" for key, kind, what in KEYS if self._first(kind) is not None]
            yield Label(" · ".join([*keys, "Esc refuses", "a number answers"]), id="permission-foot")

    def on_key(self, event: events.Key) -> None:
        char = event.character or ""
        chosen: str | None = None
        if char.isdigit() and 0 <= int(char) - 1 < len(self.request.options):
            chosen = self.request.options[int(char) - 1].id
        else:
            kind = next((k for key, k, _ in KEYS if key == char), None)
            chosen = self._first(kind) if kind is not None else None
        if chosen is not None:
            event.stop()
            self.dismiss(chosen)

    def action_refuse(self) -> None:
        self.dismiss(self._first("reject_once"))
