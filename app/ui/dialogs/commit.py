"""Commit what is staged, with a message the user types or the model proposes (shown here
for editing first). Hooks run as git runs them; a failing hook's own words are shown here,
and nothing is lost: the message stays for another try.

The staged paths, a hook's output and the model's proposal are outside text: shown through
app/view/outside_text.py, never as markup. A proposal's hidden characters are written into
the message as their escapes (`\\x1b`): a commit message is no place for a control sequence,
and the editor would send it to the terminal as it is."""

from __future__ import annotations

from textual import getters, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, Static, TextArea

from app.core.git.commit_message import ProposalFailed
from app.core.git.live_tree import LiveTree
from app.core.provider import Provider
from app.view.outside_text import terminal, to_text


class CommitScreen(ModalScreen[str | None]):
    """Dismissed with git's summary line after a commit, None when cancelled."""

    # Enter commits a one-line message (a message of several lines is being written: there
    # Enter adds a line, Ctrl+S commits); Ctrl+J always adds a line
    BINDINGS = [Binding("enter", "enter", "Commit", priority=True),
                Binding("ctrl+j", "new_line", "New line", priority=True),
                Binding("ctrl+s", "commit", "Commit", priority=True),
                Binding("ctrl+g", "propose", "Propose a message", priority=True),
                Binding("escape", "cancel", "Cancel", priority=True)]

    message_area = getters.query_one("#commit-message", TextArea)
    result_line = getters.query_one("#commit-result", Static)

    def __init__(self, live: LiveTree, provider: Provider, staged: list[str]) -> None:
        super().__init__()
        self.live = live
        self.provider = provider
        self.staged = staged

    def compose(self) -> ComposeResult:
        files = ", ".join(self.staged) if self.staged else "what is staged"
        with Vertical(id="commit"):
            yield Label(to_text(f"Commit {files}", tabs=None), id="commit-title")
            yield TextArea("", id="commit-message")
            # the dialog's keys on a line of their own, so that a long list of files never
            # pushes them out of sight
            yield Label("Enter commits · Ctrl+J new line · Ctrl+S commits several lines · "
                        "Ctrl+G the model proposes a message · Esc cancels", id="commit-keys")
            yield Static("", id="commit-result")

    def on_mount(self) -> None:
        self.message_area.focus()

    def _say(self, text: str) -> None:
        self.result_line.update(to_text(text))

    @work(exclusive=True, group="commit")
    async def action_propose(self) -> None:
        self._say(f"asking {self.provider.label} for a message…")
        try:
            message = await self.live.propose_message(self.provider)
        except ProposalFailed as exc:
            self._say(f"no message proposed: {exc}")
            return
        self.message_area.text = terminal(message, dim=False)
        self._say("proposed: edit it as you like, then Ctrl+S")

    def action_enter(self) -> None:
        if "\n" in self.message_area.text.strip("\n"):
            self.action_new_line()
        else:
            self.action_commit()

    def action_new_line(self) -> None:
        self.message_area.insert("\n")

    @work(exclusive=True, group="commit")
    async def action_commit(self) -> None:
        message = self.message_area.text
        if not message.strip():
            self._say("type a message first (Ctrl+G asks the model for one)")
            return
        self._say("committing (hooks run as git runs them)…")
        result = await self.live.commit(message)
        if result.ok:
            self.dismiss(result.message)
        else:
            self._say(f"not committed: {result.message}")

    def action_cancel(self) -> None:
        self.dismiss(None)
