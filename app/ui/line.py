"""One line of text that changes often (titles, the status line)."""

from __future__ import annotations

from textual.widget import Widget


class Line(Widget):
    """A repaint, never a layout pass: a Static's update() would cost the whole screen one
    on every change, and these lines change with the clock."""

    DEFAULT_CSS = "Line { height: 1; width: 1fr; }"

    def __init__(self, text: str = "", *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.text = text

    def set(self, text: str) -> None:
        if text != self.text:
            self.text = text
            self.refresh()

    def render(self) -> str:
        return self.text
