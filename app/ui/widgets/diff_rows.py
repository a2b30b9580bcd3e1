"""How the diff pane draws a row: each row of the file's layout (app/view/layout.py) becomes
a Strip, cached under everything that decides its look, so a frame re-renders only the rows
that changed. Complete hunks are syntax-highlighted with pygments (app/ui/widgets/highlight.py),
lexed in a thread: a line whose colours are not known yet is drawn plain and not kept, and
redrawn when they come; streaming hunks are shown plain until they complete. Every text a
row shows (a path, a line of a file, a note) is outside text: it goes through
app/view/outside_text.py (escapes for what a terminal would obey, tabs expanded), which
costs a clean line one regex search.

A base of DiffView (diff_view.py), kept here by its job: the widget holds the file shown,
the hunk cursor, line mode, scrolling and keys; this module only reads them.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.scroll_view import ScrollView
from textual.strip import Strip

from app.core.edits.file_diff import FileDiff
from app.core.edits.hunks import OPEN, Hunk, HunkState
from app.core.text.plural import plural
from app.ui.themes import SYNTAX_FALLBACK
from app.ui.widgets.highlight import Highlighter
from app.view.layout import TAB, Row, shown
from app.view.outside_text import clean, segments, visible
from app.view.status import clip, clip_segments

GUTTER = 12  # "12345 12345 " old and new line numbers
STATE_LABEL = {
    HunkState.STREAMING: "streaming", HunkState.PENDING: "pending", HunkState.ACCEPTED: "accepted",
    HunkState.REJECTED: "rejected", HunkState.CONFLICT: "conflict", HunkState.STALE: "stale",
    HunkState.SUPERSEDED: "superseded",
}


class DiffRows(ScrollView):
    """A base of DiffView, which sets these up (what a row's look depends on)."""

    fd: FileDiff | None
    path: str | None  # the file shown: its name picks the lexer
    rows: list[Row]
    cursor_id: int | None
    line_mode: bool
    line_cursor: int
    picked: set[int]
    side_by_side: bool
    hscroll: int  # columns of code scrolled off to the left (long lines)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.syntax = SYNTAX_FALLBACK  # the theme's pygments style
        self._cache: dict[tuple, Strip] = {}
        self._style_of: dict[str, Style] = {}  # component styles, resolved once per theme
        self._highlighter: Highlighter | None = None
        self._unlit: list[str] = []  # lines drawn plain this frame: their colours are coming
        self._lighting = 0  # highlight workers running

    def set_syntax(self, theme) -> None:
        name = theme.variables.get("syntax", SYNTAX_FALLBACK)
        if name != self.syntax:
            self.syntax = name
            self._cache.clear()
            self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()
        self._style_of.clear()
    def render_line(self, y: int) -> Strip:
        i = int(self.scroll_offset.y) + y
        width = self.scrollable_content_region.width
        if i >= len(self.rows):
            return Strip.blank(width, self._style(""))
        row = self.rows[i]
        h = row.hunk
        current = h is not None and h.id == self.cursor_id
        line_cur = picked = False
        if current and self.line_mode and row.index >= 0:
            line_cur = row.index == self.line_cursor
            picked = row.index in self.picked
        state = h.state if h is not None else None
        key = (row, width, current, line_cur, picked, state, self.side_by_side, self.syntax, self.hscroll,
               len(h.new) if h is not None and row.kind == "hunk" else 0,
               h.incomplete if h is not None else None, h.note if h is not None else None,
               h.warning if h is not None else None, h is not None and h.marked)
        strip = self._cache.get(key)
        if strip is None:
            unlit = len(self._unlit)
            strip = self._render_row(row, width, current, line_cur, picked)
            if len(self._unlit) > unlit:  # drawn plain for now: not kept
                return strip
            if len(self._cache) > 4000:
                self._cache.clear()
            self._cache[key] = strip
        return strip

    def _style(self, name: str) -> Style:
        style = self._style_of.get(name)
        if style is None:
            style = self._style_of[name] = (
                self.rich_style if name == "" else self.get_component_rich_style(f"diffview--{name}"))
        return style

    @staticmethod
    def hunk_label(h: Hunk) -> str:
        """A hunk's state as its header says it, with its flags."""
        label = STATE_LABEL[h.state]
        if h.incomplete:
            label += " · incomplete: the answer stopped inside it"
        if h.warning and h.state != HunkState.ACCEPTED:
            label += f" · ⚠ {h.warning}: not in accept all, y accepts it"
        if h.marked and h.state in OPEN:
            label += " · ◆ marked for the check (!)"
        return label

    def _render_row(self, row: Row, width: int, current: bool, line_cur: bool, picked: bool) -> Strip:
        base = self._style("")
        kind = row.kind
        if kind == "file":
            style = self._style("file")
            return Strip(clip_segments(_line(f" {row.text}", style, one_line=True), width)
                         ).crop_extend(0, width, style)
        if kind == "note":
            if row.hunk is not None:  # a hunk's own note, under its header
                style = self._style(row.hunk.state.value)
                note = clip_segments(_line(f"↳ {row.text}", style, one_line=True),
                                     width - GUTTER - 2)
                return Strip([Segment(" " * (GUTTER + 2), base), *note]).crop_extend(0, width, base)
            return Strip(clip_segments(_line(f" {row.text}", self._style("note"), one_line=True),
                                       width)).crop_extend(0, width, base)
        if kind == "gap":
            text = f"{'':>{GUTTER}}   ⋯ {row.text}"
            return Strip(_line(text, self._style("gap"))).crop_extend(0, width, base)
        h = row.hunk
        bar = Segment("▌" if current else " ", self._style("cursor") if current else base)
        if kind == "hunk":
            assert h is not None
            label = self.hunk_label(h)
            style = self._style(h.state.value)
            if h.state == HunkState.STREAMING:
                text = f" #{h.id} {label}   at line {h.base_start + 1} · {plural(len(h.new), 'new line')} so far"
            elif h.state == HunkState.CONFLICT and h.ancestor is not None:
                text = (f" #{h.id} conflict at line {h.base_start + 1}:  − your lines on disk   "
                        "+ the proposal   (m keeps yours · T takes the proposal · e edits)")
            elif self.fd is not None and self.fd.created and not h.old:
                text = f" #{h.id} {label}   new file · {len(h.new)} lines"
            elif self.fd is not None and self.fd.deleted and not h.new and h.old == self.fd.base.lines:
                text = f" #{h.id} {label}   deletes the file · {len(h.old)} lines"
            else:
                text = (f" #{h.id} {label}   -{h.base_start + 1},{h.base_end - h.base_start} "
                        f"+{row.new_no},{len(shown(h))}")
            head = self._style("cursor") + style if current else style
            text = clip(text, width - 1 - GUTTER)
            return Strip([bar, Segment(" " * GUTTER, base), Segment(text, head)]).extend_cell_length(
                width, head if current else base)
        if kind == "pair":
            half = max(10, (width - 1) // 2)
            left = self._half(row, row.text, row.old_no,
                              "del" if row.index >= 0 else ("ctx" if row.right_kind == "ctx" else ""), half - 1)
            right = self._half(row, row.right or "", row.new_no,
                               row.right_kind if row.right is not None else "", width - half - 1)
            return Strip([bar, *left, Segment("│", self._style("gutter")), *right]).crop_extend(0, width, base)
        rejected = h is not None and h.state in (HunkState.REJECTED, HunkState.SUPERSEDED)
        style = self._style("gap") if rejected else self._style(kind)  # out of the picture
        if picked:
            style = style + self._style("picked")
        gutter = f"{_no(row.old_no)} {_no(row.new_no)} "
        sign = {"del": "-", "add": "+"}.get(kind, " ")
        if picked:
            sign = "✓"
        segs = [bar, Segment(gutter, self._style("gutter")), Segment(f"{sign} ", style)]
        code = _line(row.text, style) if rejected else self._code(row, row.text, style)
        fill = style if kind in ("del", "add") and not rejected else base
        segs += self._fit(code, width - (1 + GUTTER + 2), fill)
        strip = Strip(segs).crop_extend(0, width, fill)
        if line_cur:
            strip = strip.apply_style(self._style("line-cursor"))
        return strip

    def _half(self, row: Row, text: str, no: int | None, kind: str, width: int) -> list[Segment]:
        if not kind:
            return [Segment(" " * width, self._style(""))]
        style = self._style(kind)
        fill = style if kind != "ctx" else self._style("")
        segs = [Segment(f"{_no(no)} ", self._style("gutter")),
                *self._fit(self._code(row, text, style), width - 6, fill)]
        return list(Strip(segs).crop_extend(0, width, fill))

    def _fit(self, code: list[Segment], width: int, fill: Style) -> list[Segment]:
        """Code (as shown: escapes, tabs expanded) into `width` cells, scrolled by the
        horizontal offset, and an ellipsis where the line goes on past an edge."""
        strip = Strip(code)
        n, x = strip.cell_length, self.hscroll
        if width <= 2:
            return list(strip.crop_extend(0, max(0, width), fill))
        shown = strip.crop_extend(x, x + width, fill)
        more = self._style("gap")
        if n > x + width:
            shown = Strip([*shown.crop(0, width - 1), Segment("…", more)])
        if x > 0 and n > 0:
            shown = Strip([Segment("…", more), *shown.crop(1, width)])
        return list(shown)

    def _code(self, row: Row, text: str, style: Style) -> list[Segment]:
        h = row.hunk
        if self.path is None or (h is not None and h.state == HunkState.STREAMING):
            return _line(text, style)  # highlighted once the hunk is complete
        hl = self._highlighter
        if hl is None or hl.theme_name != self.syntax:
            hl = self._highlighter = Highlighter(self.path, self.syntax)
        tokens = hl.tokens(text)
        if tokens is None:
            if not self._unlit:
                self.call_after_refresh(self._light)
            self._unlit.append(text)
            return _line(text, style)
        if clean(text):
            return [Segment(t, style + s) for t, s in tokens]
        return segments([(t, style + s) for t, s in tokens], tabs=TAB)

    def _light(self) -> None:
        """Lex the lines drawn plain in a thread, then redraw them in colour."""
        texts, self._unlit = self._unlit, []
        hl = self._highlighter
        if hl is None or not texts:
            return

        def work() -> None:
            hl.lex(texts)
            self.app.call_from_thread(self._lit)

        self._lighting += 1
        self.run_worker(work, thread=True, group="highlight")

    def _lit(self) -> None:
        self._lighting -= 1
        self.refresh()

    @property
    def highlighting(self) -> bool:
        """Colours are still coming for lines on screen."""
        return bool(self._unlit) or self._lighting > 0


def _line(text: str, style: Style, *, one_line: bool = False) -> list[Segment]:
    """One row's outside text in one style, as shown: a line of a file with its tabs
    expanded, or (`one_line`) a path or a message with tabs and newlines as escapes."""
    if one_line:
        return segments([(text, style)], tabs=None)
    return [Segment(text, style)] if clean(text) else segments([(text, style)], tabs=TAB)


def first_change(old: list[str], new: list[str]) -> int:
    """The first column (as shown: tabs expanded, escapes) where the hunk's old and new
    lines differ."""
    if not old or not new:
        return 0
    cols = []
    for a, b in zip(old, new, strict=False):
        a, b = visible(a, tabs=TAB), visible(b, tabs=TAB)
        i = 0
        while i < len(a) and i < len(b) and a[i] == b[i]:
            i += 1
        cols.append(i)
    return min(cols)


def _no(n: int | None) -> str:
    return f"{n:>5}" if n is not None else "     "
