"""The queued follow-ups: messages typed while the model streams, sent one by one as each
answer ends. Enter puts one back in the prompt to edit (it keeps its place in the queue),
Delete drops it. A message is shown as typed: never read as markup (`[/]` would end the app)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message
from textual.widgets import ListItem, ListView, Static

from app.ui.actions import bindings
from app.view.outside_text import to_text


class QueueView(ListView):
    BINDINGS = bindings("queue")

    @dataclass
    class Edit(Message):
        """Enter on a message: back in the prompt to edit (the composer does it)."""

        index: int

    @dataclass
    class Drop(Message):
        index: int

    def show(self, messages: list[str]) -> None:
        index = self.index
        self.clear()
        for msg in messages:
            self.append(ListItem(Static(to_text(f"⏳ {msg}", tabs=None))))
        if messages:
            self.index = min(index or 0, len(messages) - 1)

    def action_edit_item(self) -> None:
        if self.index is not None:
            self.post_message(self.Edit(self.index))

    def action_drop_item(self) -> None:
        if self.index is not None:
            self.post_message(self.Drop(self.index))
