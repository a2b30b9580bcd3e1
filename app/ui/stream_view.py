"""A scrolling, soft-wrapped text view that only ever appends.

Written for the live answer: text arrives once per frame, only the last (partial) line is
re-wrapped, only the rows that changed are refreshed, and rows already on screen keep their
cached strips. Re-`update()`-ing a Static with the whole answer, or streaming into a
TextArea, costs in proportion to everything shown so far and falls far behind a fast model.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

STYLES = ("text", "user", "sep", "error", "dim")


def _wrap(line: str, width: int) -> list[tuple[int, int]]:
    """(start, end) character spans of `line` cut to `width` cells."""
    if width <= 0:
        return [(0, len(line))]
    if line.isascii():
        if len(line) <= width:
            return [(0, len(line))]
        return [(i, min(i + width, len(line))) for i in range(0, len(line), width)]
    spans, start, cells = [], 0, 0
    for i, ch in enumerate(line):
        w = cell_len(ch)
        if cells + w > width and i > start:
            spans.append((start, i))
            start, cells = i, 0
        cells += w
    spans.append((start, len(line)))
    return spans


class StreamView(ScrollView, can_focus=True):
    COMPONENT_CLASSES = {f"streamview--{s}" for s in STYLES}
    DEFAULT_CSS = """
    StreamView { background: $surface; overflow-x: hidden; scrollbar-gutter: stable; scrollbar-size-vertical: 1; }
    StreamView > .streamview--text { color: $text; }
    StreamView > .streamview--user { color: $accent; text-style: bold; }
    StreamView > .streamview--sep { color: $text-muted; }
    StreamView > .streamview--error { color: $error; text-style: bold; }
    StreamView > .streamview--dim { color: $text-muted; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._lines: list[str] = []
        self._styles: list[str] = []
        self._rows: list[tuple[int, int, int]] = []  # (line, start, end)
        self._first_row: list[int] = []  # first row of each line
        self._width = 0
        self._cache: dict[int, Strip] = {}
        self._follow = True  # stick to the end until the user scrolls up, and again once back

    # -- content ---------------------------------------------------------------------------
    @property
    def text(self) -> str:
        return "\n".join(self._lines)

    def clear(self) -> None:
        self._lines, self._styles, self._rows, self._first_row = [], [], [], []
        self._cache.clear()
        self.virtual_size = Size(self._width, 0)
        self.refresh()

    def write(self, text: str, style: str = "text") -> None:
        """Append text; a newline in it starts a new line."""
        if not text:
            return
        if "\t" in text:
            text = text.expandtabs(4)
        pieces = text.split("\n")
        if not self._lines:
            self._lines.append("")
            self._styles.append(style)
            self._first_row.append(0)
        first = len(self._lines) - 1
        if not self._lines[-1]:
            self._styles[-1] = style  # a line takes the style of its first text
        self._lines[-1] += pieces[0]
        for piece in pieces[1:]:
            self._lines.append(piece)
            self._styles.append(style)
            self._first_row.append(0)
        self._rewrap_from(first)

    def write_line(self, text: str, style: str = "text") -> None:
        """A whole line of its own (ends any partial line first)."""
        if self._lines and self._lines[-1] != "":
            self.write("\n")
        self.write(text + "\n", style)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._follow = new_value >= self.max_scroll_y

    def _rewrap_from(self, first: int) -> None:
        at_end = self._follow
        start_row = self._first_row[first]
        del self._rows[start_row:]
        width = max(1, self.scrollable_content_region.width or self._width or 80)
        for i in range(first, len(self._lines)):
            self._first_row[i] = len(self._rows)
            self._rows += [(i, s, e) for s, e in _wrap(self._lines[i], width)]
        for r in [r for r in self._cache if r >= start_row]:
            del self._cache[r]
        self.virtual_size = Size(width, len(self._rows))
        self.refresh_lines(start_row, max(1, len(self._rows) - start_row))
        if at_end:
            # scroll now (the new text shows this frame); the scrollbar may only appear with
            # the next layout, so put its thumb where the view is once it does
            self.scroll_end(animate=False, immediate=True, x_axis=False, force=True)

    # -- rendering -------------------------------------------------------------------------
    def on_resize(self) -> None:
        width = self.scrollable_content_region.width
        if width and width != self._width:
            self._width = width
            self._cache.clear()
            if self._lines:
                self._rewrap_from(0)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()

    def render_line(self, y: int) -> Strip:
        if y == 0 and self.show_vertical_scrollbar:
            # a scrollbar that appeared after we scrolled (to follow the stream) starts at 0
            bar = self.vertical_scrollbar
            if bar.position != self.scroll_offset.y:
                bar.position = self.scroll_offset.y
        row = int(self.scroll_offset.y) + y
        width = self.scrollable_content_region.width
        strip = self._cache.get(row)
        if strip is None:
            if row >= len(self._rows):
                return Strip.blank(width, self.rich_style)
            line, s, e = self._rows[row]
            style: Style = self.get_component_rich_style(f"streamview--{self._styles[line]}")
            strip = Strip([Segment(self._lines[line][s:e], style)]).extend_cell_length(width, self.rich_style)
            self._cache[row] = strip
        return strip
