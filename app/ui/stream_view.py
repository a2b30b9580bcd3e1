"""A scrolling, soft-wrapped text view that only ever appends.

Written for the live answer: text arrives once per frame, only the last (partial) line is
re-wrapped, only the rows that changed are refreshed, and rows already on screen keep their
cached strips. Re-`update()`-ing a Static with the whole answer, or streaming into a
TextArea, costs in proportion to everything shown so far and falls far behind a fast model.
"""

from __future__ import annotations

import time
from collections import deque

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from app.ui.compat import set_virtual_size
from app.view.layout import TAB

STYLES = ("text", "user", "sep", "error", "dim")
JUMP_WINDOW = 0.25  # a jump leaves room for as many rows as arrived in this many seconds


def _wrap(line: str, width: int) -> list[tuple[int, int]]:
    """(start, end) character spans of `line` cut to `width` cells, after the last space of
    a row where there is one (prose reads as words), mid-word only where there is none. A
    row may run past the width by the spaces it ends with; they are cropped when drawn."""
    if width <= 0:
        return [(0, len(line))]
    if line.isascii():
        spans, start, n = [], 0, len(line)
        while n - start > width:
            cut = line.rfind(" ", start + 1, start + width + 1)
            end = cut + 1 if cut > 0 else start + width
            spans.append((start, end))
            start = end
        if start < n or not spans:
            spans.append((start, n))
        return spans
    spans, start, cells, space = [], 0, 0, -1
    for i, ch in enumerate(line):
        w = cell_len(ch)
        if cells + w > width and i > start and ch != " ":
            end = space + 1 if space > start else i
            spans.append((start, end))
            cells = cell_len(line[end:i])
            start, space = end, -1
        if ch == " ":
            space = i
        cells += w
    spans.append((start, len(line)))
    return spans


class StreamView(ScrollView, can_focus=True):
    """Two modes. Tail (the default): the view shows the end of the text, drawn from a top
    row of its own with no scrolling at all, because in Textual every scroll re-arranges the
    whole screen and a stream scrolls every frame. The top row moves in jumps: when the text
    reaches the bottom, it moves up far enough to leave room for the next few frames' rows
    (more room the faster rows arrive), so most frames repaint only their new rows instead
    of the whole pane. Scroll up (wheel, keys) and it becomes an ordinary scroll view with a
    scrollbar; back at the end, it tails again."""

    COMPONENT_CLASSES = {f"streamview--{s}" for s in STYLES}
    BINDINGS = [
        Binding("up", "scroll_by(-1)", show=False),
        Binding("down", "scroll_by(1)", show=False),
        Binding("pageup", "scroll_by(-20)", show=False),
        Binding("pagedown", "scroll_by(20)", show=False),
        Binding("home", "scroll_by(-1000000000)", show=False),
        Binding("end", "scroll_by(1000000000)", show=False),
    ]
    DEFAULT_CSS = """
    StreamView { background: $surface; scrollbar-background: $surface; scrollbar-background-hover: $surface; scrollbar-background-active: $surface; overflow-x: hidden; overflow-y: scroll; scrollbar-size-vertical: 1; }
    StreamView.-tail { scrollbar-size-vertical: 0; }
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
        self._height = 0
        self._top = 0  # tail mode: the first row shown
        self._recent: deque[tuple[float, int]] = deque()  # (when, rows added): the row rate
        self._cache: dict[int, Strip] = {}
        self._style_of: dict[str, Style] = {}  # component styles, resolved once per theme
        self.tail = True
        self.add_class("-tail")

    # -- content ---------------------------------------------------------------------------
    @property
    def text(self) -> str:
        return "\n".join(self._lines)

    def clear(self) -> None:
        self._lines, self._styles, self._rows, self._first_row = [], [], [], []
        self._cache.clear()
        self._top = 0
        self._set_tail(True)
        self.refresh()

    def write(self, text: str, style: str = "text") -> None:
        """Append text; a newline in it starts a new line."""
        if not text:
            return
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
        if "\t" in text:  # by whole line: a tab's stop depends on the line so far
            for i in range(first, len(self._lines)):
                self._lines[i] = self._lines[i].expandtabs(TAB)
        self._rewrap_from(first)

    def write_line(self, text: str, style: str = "text") -> None:
        """A whole line of its own (ends any partial line first)."""
        if self._lines and self._lines[-1] != "":
            self.write("\n")
        self.write(text + "\n", style)

    def _rewrap_from(self, first: int) -> None:
        start_row = self._first_row[first]
        before = len(self._rows)
        del self._rows[start_row:]
        width = max(1, self._width or 80)
        for i in range(first, len(self._lines)):
            self._first_row[i] = len(self._rows)
            self._rows += [(i, s, e) for s, e in _wrap(self._lines[i], width)]
        for r in [r for r in self._cache if r >= start_row]:
            del self._cache[r]
        n = len(self._rows)
        if not self.tail:
            set_virtual_size(self, Size(width, n))
            self.refresh_lines(start_row, max(1, n - start_row))
            return
        height = max(1, self._height)
        now = time.monotonic()
        self._recent.append((now, max(0, n - before)))
        while self._recent and now - self._recent[0][0] > JUMP_WINDOW:
            self._recent.popleft()
        if n - self._top > height:  # full: jump, leaving room for the rows of the next frames
            room = min(height // 2, max(2, sum(k for _, k in self._recent)))
            self._top = max(0, n - height + room)
            self.refresh()
        else:  # only the rows that changed, where they are on screen
            y0 = max(0, start_row - self._top)
            self.refresh(Region(0, y0, width, max(1, max(n, before) - self._top - y0)))

    # -- tail / scroll ---------------------------------------------------------------------
    def _set_tail(self, tail: bool) -> None:
        if tail == self.tail:
            return
        top = max(0, len(self._rows) - self._height)
        self.tail = tail
        self.set_class(tail, "-tail")
        width = self._width or self.size.width
        if tail:
            self._top = top
            set_virtual_size(self, Size(width, 0))
            self.scroll_to(y=0, animate=False, immediate=True, force=True)
        else:
            set_virtual_size(self, Size(width, len(self._rows)))
            self.scroll_to(y=top, animate=False, immediate=True, force=True)
        self.refresh()

    def action_scroll_by(self, rows: int) -> None:
        if self.tail:
            if rows >= 0:
                return
            self._set_tail(False)
        y = max(0, min(self.max_scroll_y, int(self.scroll_offset.y) + rows))
        self.scroll_to(y=y, animate=False, immediate=True, force=True)
        if y >= self.max_scroll_y:
            self._set_tail(True)

    def _on_mouse_scroll_up(self, event) -> None:
        event.prevent_default()
        event.stop()
        self.action_scroll_by(-3)

    def _on_mouse_scroll_down(self, event) -> None:
        event.prevent_default()
        event.stop()
        self.action_scroll_by(3)

    # -- rendering -------------------------------------------------------------------------
    def on_resize(self) -> None:
        region = self.scrollable_content_region
        self._height = region.height
        if region.width and region.width != self._width:
            self._width = region.width
            self._cache.clear()
            if self._lines:
                self._rewrap_from(0)
        self._top = max(0, len(self._rows) - self._height)
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()
        self._style_of.clear()

    def render_line(self, y: int) -> Strip:
        if self.tail:
            row, width = self._top + y, self._width
        else:  # a scrollbar takes a column: the rare case pays for the exact width
            row, width = int(self.scroll_offset.y) + y, self.scrollable_content_region.width
        strip = self._cache.get(row)
        if strip is None:
            base = self._style_of.get("")
            if base is None:
                base = self._style_of[""] = self.rich_style
            if row >= len(self._rows):
                return Strip.blank(width, base)
            line, s, e = self._rows[row]
            name = self._styles[line]
            style = self._style_of.get(name)
            if style is None:
                style = self._style_of[name] = self.get_component_rich_style(f"streamview--{name}")
            strip = Strip([Segment(self._lines[line][s:e], style)], e - s if self._lines[line].isascii() else None
                          ).crop_extend(0, width, base)
            if len(self._cache) > 2000:  # rows far from the view are cheap to redo
                self._cache.clear()
            self._cache[row] = strip
        return strip
