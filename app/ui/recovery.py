"""The main screen's way back from a failed request: a mixin of MainScreen
(app/ui/main_screen.py), apart so that the router stays small.

A request that fails before any answer text arrived (a refused key, a rate limit, a 5xx, a
refused connection, a crashed embedded model) loses nothing: its instruction goes back into
the prompt (unless the user is typing something else there: a draft is never overwritten;
Up recalls it), the conversation says what to do and which key sends it again, and that key
(the action table's `retry_request`) is in the key bar while there is such a request.
"""

from __future__ import annotations

from app.core.conversation.session import ContextError, Turn
from app.ui.prompt import PromptInput
from app.ui.screens import pretty_keys


class Recovery:
    """Needs the MainScreen's session, sync, frame(), notify(), refresh_bindings()."""

    @property
    def failed(self) -> bool:
        """The action table's "failed": there is a failed request to send again."""
        return self.session.failed is not None

    def retry_key(self) -> str:
        """The retry key as bound now (the first one: "F5")."""
        keys = self.app.key_names.get("retry_request", "")
        return pretty_keys(keys.split(",")[0]) if keys else "the palette's Retry"

    def recovery_hint(self) -> str:
        """The line under a failed request in the conversation."""
        return f"{self.retry_key()} sends it again"

    def request_failed(self, turn: Turn) -> None:
        """The answer ended before a word of it arrived: the instruction goes back into
        the prompt, if the prompt is free, and the user is told how to send it again."""
        if self._editing is not None:  # a queued message is being edited there: leave it
            back = False
        else:
            back = self.query_one(PromptInput).put_back(turn.instruction)
        where = ("your instruction is back in the prompt" if back else
                 "your draft is kept; ↑ in the prompt recalls the instruction")
        self.notify(f"{turn.error.message if turn.error else 'the request failed'}\n"
                    f"{self.retry_key()} sends it again; {where}.",
                    title="The request failed", severity="error", timeout=10)

    def action_retry_request(self) -> None:
        """Send the failed request again as a new request (exactly one)."""
        failed = self.session.failed
        if failed is None:
            return
        prompt = self.query_one(PromptInput)
        try:
            if self.session.retry_failed() is None:
                return
        except ContextError as exc:  # a context file is gone or unreadable now
            self.notify(str(exc), severity="error")
            return
        if prompt.message.strip() == failed.instruction.strip():
            prompt.value = ""  # it was put back: it is on its way now, not a draft
        self.frame()
