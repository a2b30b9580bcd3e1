"""One line of text that changes often (titles, the status line). A `StatusLine` (app/view/
status.py) is fitted to the width by whole parts, and any other text is cut after a whole
word (`clip`), so a narrow terminal never shows a word cut in two at its edge. What these lines carry (paths, a model's name, an error) is outside
text: it is shown as app/view/outside_text.py's `name` shows it."""

from __future__ import annotations

from rich.segment import Segment
from textual.strip import Strip
from textual.widget import Widget

from app.view.outside_text import name
from app.view.status import Part, StatusLine, clip


class Line(Widget):
    """A repaint, never a layout pass: a Static's update() would cost the whole screen one on
    every change, and these lines change with the clock. Drawn through the line API from a
    strip made once per change (a `render()` returning text goes through Textual's content
    pipeline: ~0.5 ms a line, several times a second)."""

    DEFAULT_CSS = "Line { height: 1; width: 1fr; }"

    def __init__(self, text: str = "", *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.text = _shown(text)
        self._strip: Strip | None = None

    def set(self, text: str) -> None:
        text = _shown(text)
        if text != self.text:
            self.text = text
            self._strip = None
            self.refresh()

    @property
    def shown(self) -> str:
        """The text as drawn at the width it has now."""
        width = self.content_region.width
        return self.text.fit(width) if isinstance(self.text, StatusLine) else clip(self.text, width)

    def on_resize(self) -> None:
        self._strip = None

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strip = None

    def render_line(self, y: int) -> Strip:
        width = self.content_region.width
        style = self.rich_style
        if y:
            return Strip.blank(width, style)
        if self._strip is None or self._strip.cell_length != width:
            text = self.text.fit(width) if isinstance(self.text, StatusLine) else clip(self.text, width)
            self._strip = Strip([Segment(text, style)]).crop_extend(0, width, style)
        return self._strip


def _shown(text: str) -> str:
    """`text` as the boundary shows a one-line label; a StatusLine keeps its parts."""
    if isinstance(text, StatusLine):
        if all(name(p.text) is p.text for p in text.parts):
            return text
        return StatusLine([Part(name(p.text), p.rank) for p in text.parts])
    return name(text)
