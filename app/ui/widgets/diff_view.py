"""The diff pane: one file's pending diff, rendered row by row (Textual's line API).

Rows come from core.layout (cached per hunk, extended while a hunk streams); each visible row
becomes a Strip cached under everything that decides its look, so a frame re-renders only
rows that changed. Complete hunks are syntax-highlighted with pygments; streaming ones are
shown plain until they complete. Every text a row shows (a path, a line of a file, a note)
is outside text: it goes through app/view/outside_text.py (escapes for what a terminal would
obey, tabs expanded), which costs a clean line one regex search.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import var
from textual.scroll_view import ScrollView
from textual.strip import Strip

from app.core.conversation.review import line_rows
from app.core.edits.file_diff import FileDiff
from app.core.edits.hunks import OPEN, Hunk, HunkState
from app.core.text.plural import plural
from app.ui.actions import bindings, key_names, review_keys
from app.ui.compat import set_virtual_size
from app.ui.widgets.highlight import Highlighter
from app.view.layout import TAB, FileLayout, Row, shown
from app.view.outside_text import clean, segments, visible
from app.view.status import clip, clip_segments

GUTTER = 12  # "12345 12345 " old and new line numbers
GROW = 64  # while following a streaming hunk, the scroll range grows this many rows at a time
STATE_LABEL = {
    HunkState.STREAMING: "streaming", HunkState.PENDING: "pending", HunkState.ACCEPTED: "accepted",
    HunkState.REJECTED: "rejected", HunkState.CONFLICT: "conflict", HunkState.STALE: "stale",
    HunkState.SUPERSEDED: "superseded",
}


class DiffView(ScrollView, can_focus=True):
    """Shows one FileDiff; keeps a hunk cursor (its own keys: the action table's "diff"
    scope) and, in line mode, a line cursor. What is decided on the hunk under the cursor
    is the review pane's (app/ui/panes/review.py)."""

    BINDINGS = [*bindings("diff"),
                Binding("pagedown", "page_down", show=False),
                Binding("pageup", "page_up", show=False),
                Binding("right", "scroll_code(16)", show=False),
                Binding("left", "scroll_code(-16)", show=False),
                Binding("home", "scroll_code(0)", show=False)]
    COMPONENT_CLASSES = {
        "diffview--file", "diffview--note", "diffview--gap", "diffview--gutter", "diffview--ctx",
        "diffview--del", "diffview--add", "diffview--cursor", "diffview--picked", "diffview--line-cursor",
        *(f"diffview--{s}" for s in STATE_LABEL.values()),
    }
    DEFAULT_CSS = """
    DiffView { background: $surface; scrollbar-background: $surface; scrollbar-background-hover: $surface; scrollbar-background-active: $surface; scrollbar-color: $primary 45%; scrollbar-color-hover: $primary 65%; scrollbar-color-active: $primary; overflow-x: hidden; overflow-y: scroll; scrollbar-size-vertical: 1; }
    DiffView > .diffview--file { background: $panel; color: $text; text-style: bold; }
    DiffView > .diffview--note { color: $warning; }
    DiffView > .diffview--gap { color: $text-muted; }
    DiffView > .diffview--gutter { color: $text-muted; }
    DiffView > .diffview--ctx { color: $text; }
    DiffView > .diffview--del { background: $diff-removed-bg; }
    DiffView > .diffview--add { background: $diff-added-bg; }
    DiffView > .diffview--cursor { background: $accent 25%; }
    DiffView > .diffview--picked { background: $accent 45%; text-style: bold; }
    DiffView > .diffview--line-cursor { text-style: reverse; }
    DiffView > .diffview--streaming { color: $secondary; text-style: bold; }
    DiffView > .diffview--pending { color: $text; text-style: bold; }
    DiffView > .diffview--accepted { color: $success; text-style: bold; }
    DiffView > .diffview--rejected { color: $text-muted; text-style: bold strike; }
    DiffView > .diffview--conflict { color: $error; text-style: bold; }
    DiffView > .diffview--stale { color: $warning; text-style: bold; }
    DiffView > .diffview--superseded { color: $text-muted; text-style: bold italic; }
    """

    @dataclass
    class CursorMoved(Message):
        hunk: Hunk | None

    @dataclass
    class LeaveFile(Message):
        """j past the last hunk / k before the first: the review moves to the next file."""

        step: int

    @dataclass
    class StartMessage(Message):
        """A printable key that is no review key: the user started typing a message."""

        text: str

    @dataclass
    class ModeChanged(Message):
        """Line mode or the view changed: the review says so in the pane's title."""

    # the action table's conditions the cursor owns (actions.Cursor): a change refreshes the
    # bindings, so the key bar follows at once
    hunk_open: var[bool] = var(False, bindings=True)
    hunk_conflict: var[bool] = var(False, bindings=True)
    line_mode: var[bool] = var(False, bindings=True)
    decides: var[bool] = var(True)  # the review shows the pending diff (a git view decides nothing)
    side_by_side: var[bool] = var(False)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.fd: FileDiff | None = None
        self.path: str | None = None  # the file shown (pending diff or git view)
        self._fixed: list[Row] | None = None  # a read-only view's rows
        self.file_layout: FileLayout | None = None
        self._source: object = None  # what the rows on screen were laid out from
        self.rows: list[Row] = []
        self.cursor_id: int | None = None
        self.line_cursor = 0
        self.picked: set[int] = set()
        self.syntax = "monokai"
        self.message = "Nothing pending yet."  # the conversation pane says how to ask
        self._cache: dict[tuple, Strip] = {}
        self._hunk_rows: dict[int, int] = {}  # hunk id -> index of its header row
        self._style_of: dict[str, Style] = {}  # component styles, resolved once per theme
        self._highlighter: Highlighter | None = None
        self._unlit: list[str] = []  # lines drawn plain this frame: their colours are coming
        self._lighting = 0  # highlight workers running
        self.following = False  # the view follows a streaming hunk
        self.hscroll = 0  # columns of code scrolled off to the left (long lines)

    # -- model -----------------------------------------------------------------------------
    def show(self, fd: FileDiff | None, message: str = "") -> None:
        if fd is not self.fd or self._fixed is not None:
            self.fd = fd
            self._fixed = None
            self.path = fd.path if fd is not None else None
            self._highlighter = None
            self.file_layout = FileLayout(fd) if fd is not None else None
            self.cursor_id = None
            self.line_mode = False
            self.picked.clear()
            self.hscroll = 0  # a file never opens scrolled sideways
            self.scroll_to(0, 0, animate=False)
        if message:
            self.message = message
        self.refresh_rows()

    def show_rows(self, path: str, rows: list[Row]) -> None:
        """A read-only view (what git sees): rows as they are, no hunks to decide."""
        self.fd, self.file_layout, self._fixed = None, None, rows
        if path != self.path:
            self.path, self._highlighter = path, None
            self.scroll_to(0, 0, animate=False)
        self.cursor_id = None
        self.line_mode = False
        self.refresh_rows()

    @property
    def hunks(self) -> list[Hunk]:
        return self.fd.hunks if self.fd is not None else []

    @property
    def hunk(self) -> Hunk | None:
        hunks = self.hunks
        if not hunks:
            return None
        for h in hunks:
            if h.id == self.cursor_id:
                return h
        return hunks[0]

    def refresh_rows(self) -> None:
        """Re-layout after the pending diff changed (called at most once per frame)."""
        old_len = len(self.rows)
        source = self._fixed if self._fixed is not None else self.file_layout
        if source is not self._source:  # another file or view: none of the rows on screen stay
            self._source, old_len = source, 0
            self.refresh()
        if self._fixed is not None:
            self.rows = self._fixed
            self._hunk_rows, first = {}, 0
        elif self.file_layout is None:
            self.rows = [Row("note", self.message)]
            self._hunk_rows, first = {}, 0
        else:
            self.rows = self.file_layout.rows(self.side_by_side)
            self._hunk_rows, first = self.file_layout.header_rows, self.file_layout.first_changed
        rows = self.rows
        h = self.hunk  # the cursor's hunk, or the first when it is gone
        self.cursor_id = h.id if h is not None else None
        # While a hunk streams in view the rows grow every frame; growing the scroll range in
        # steps keeps the scrollbar from repainting with each of them.
        # (only once the rows overflow the view: a range past rows that fit would show a
        # scrollbar with nothing to scroll to)
        n = -(-len(rows) // GROW) * GROW if self.following and len(rows) > self.size.height \
            else len(rows)
        set_virtual_size(self, Size(self.size.width, n))
        if self.file_layout is not None:
            # repaint only the rows that changed: a growing hunk, its header and new rows
            for a, b in self.file_layout.changed:
                self.refresh_lines(a, b - a)
        elif first < max(old_len, len(rows)):
            self.refresh_lines(first, max(old_len, len(rows)) - first + 1)
        self.read_cursor()

    def read_cursor(self) -> None:
        """What the hunk under the cursor lets the review do. Called wherever the cursor or
        the hunks move; a hunk's state is core's, which tells no one (it is not reactive), so
        the review calls it each frame too. An unchanged value costs a comparison."""
        h = self.hunk if self.decides else None
        self.hunk_open = h is not None and h.state in OPEN
        self.hunk_conflict = (h is not None and h.state == HunkState.CONFLICT
                              and h.ancestor is not None)

    def watch_decides(self) -> None:
        self.read_cursor()

    def on_mount(self) -> None:
        # each theme carries its syntax style; the signal fires once the theme is applied
        self.set_syntax(self.app.current_theme)
        self.app.theme_changed_signal.subscribe(self, self.set_syntax)

    def set_syntax(self, theme) -> None:
        name = theme.variables.get("syntax", "monokai")
        if name != self.syntax:
            self.syntax = name
            self._cache.clear()
            self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()
        self._style_of.clear()

    # -- cursor ----------------------------------------------------------------------------
    def _move(self, step: int) -> None:
        hunks = self.hunks
        if self.line_mode:
            h = self.hunk
            if h is not None:
                n = len(line_rows(h))
                self.line_cursor = max(0, min(n - 1, self.line_cursor + step))
                self.refresh()
                self._scroll_to_line()
                self.post_message(self.ModeChanged())  # what y would write changed
            return
        if not hunks:
            self.post_message(self.LeaveFile(step))
            return
        ids = [h.id for h in hunks]
        i = ids.index(self.hunk.id) if self.hunk is not None else 0
        j = i + step
        if j < 0 or j >= len(ids):
            self.post_message(self.LeaveFile(step))
            return
        self.select(ids[j], sideways=True)

    def select(self, hunk_id: int | None, *, edge: str = "", sideways: bool = False) -> None:
        """The cursor on a hunk, on screen. `sideways`: the user moved it, and the view may
        scroll sideways to its first changed column (a file opened, or the review entered,
        starts at column 0)."""
        hunks = self.hunks
        if edge and hunks:
            hunk_id = hunks[0].id if edge == "first" else hunks[-1].id
        self.cursor_id = hunk_id
        self.line_mode = False
        self.picked.clear()
        self.read_cursor()
        self.refresh()
        self.scroll_to_hunk()
        if sideways:
            self._show_change(self.hunk)
        elif self.hscroll:
            self.hscroll = 0
        self.post_message(self.CursorMoved(self.hunk))

    def follow(self, h: Hunk | None) -> None:
        """Keep the hunk being streamed in view, scrolling in jumps rather than every frame
        (each scroll repaints the whole pane). The scrollbar stays: hiding it while streaming
        would cost a layout pass of the screen at each answer's start and end."""
        following = h is not None
        if following != self.following:
            self.following = following  # not a CSS class: a class change restyles the pane
            if not following:
                self.refresh_rows()  # the exact scroll range again
        if h is None or h.id not in self._hunk_rows:
            return
        self.cursor_id = h.id
        last = self._hunk_rows[h.id] + 1 + len(h.old) + len(h.new)
        top, height = int(self.scroll_offset.y), self.size.height
        if not top <= last < top + height:
            self.scroll_to(y=max(0, last - int(height * 0.6)), animate=False, immediate=True, force=True)

    def below_view(self, h: Hunk) -> bool:
        """`h` is in this file, past the bottom of the view."""
        row = self._hunk_rows.get(h.id)
        return row is not None and row >= int(self.scroll_offset.y) + self.size.height

    def scroll_to_hunk(self) -> None:
        """The cursor's header row on screen, with the hunk below it as far as it fits (a
        hunk taller than the view shows its head, never only its tail)."""
        h = self.hunk
        if h is None or h.id not in self._hunk_rows:
            return
        top = self._hunk_rows[h.id]
        view_top, view_h = int(self.scroll_offset.y), self.scrollable_content_region.height
        if view_h <= 0:  # not laid out yet
            return
        want_top, want_end = max(0, top - 3), top + 1 + len(h.old) + len(h.new) + 3
        if want_end - want_top > view_h:
            y = max(0, top - 1)
        elif want_top < view_top:
            y = want_top
        elif want_end > view_top + view_h:
            y = want_end - view_h
        else:
            return
        self.scroll_to(y=y, animate=False, immediate=True, force=True)

    def hunk_to_top(self) -> None:
        """The cursor's hunk at the top of the view: a dialog about it opens below."""
        h = self.hunk
        if h is not None and h.id in self._hunk_rows:
            self.scroll_to(y=max(0, self._hunk_rows[h.id] - 1), animate=False, immediate=True,
                           force=True)

    def _scroll_to_line(self) -> None:
        h = self.hunk
        if h is None or h.id not in self._hunk_rows:
            return
        y = self._hunk_rows[h.id] + 1 + bool(h.note) + (self.line_cursor if not self.side_by_side else 0)
        self.scroll_to_region(Region(0, y, 1, 1), animate=False, immediate=True, force=True)

    def action_scroll_code(self, columns: int) -> None:
        self.hscroll = max(0, self.hscroll + columns) if columns else 0
        self.refresh()

    def _show_change(self, h: Hunk | None) -> None:
        """Scroll sideways so that the hunk's first changed column is on screen."""
        if h is None:
            return
        if self.scrollable_content_region.width <= 0:  # not laid out: nothing to measure
            return
        width = self.scrollable_content_region.width - (1 + GUTTER + 2)
        if self.side_by_side:
            width = max(10, (width + GUTTER) // 2 - 6)
        col = first_change(h.old, h.new)
        want = 0 if col < width - 8 else col - 8
        if want != self.hscroll:
            self.hscroll = want
            self.refresh()

    def action_next_hunk(self) -> None:
        self._move(1)

    def action_prev_hunk(self) -> None:
        self._move(-1)

    def action_first_hunk(self) -> None:
        self.select(None, edge="first", sideways=True)

    def action_last_hunk(self) -> None:
        self.select(None, edge="last", sideways=True)

    def toggle_line_mode(self) -> None:
        h = self.hunk
        if self.line_mode or h is None or h.state == HunkState.STREAMING:
            self.line_mode = False
        else:
            self.side_by_side = False
            self.line_cursor = 0
            self.picked.clear()
            self.line_mode = True

    def watch_line_mode(self, on: bool) -> None:
        self.set_class(on, "-line-mode")
        if not on:
            self.picked.clear()
        self.refresh()
        self.post_message(self.ModeChanged())

    def watch_side_by_side(self, on: bool) -> None:
        if on:
            self.line_mode = False
        self.refresh_rows()
        self.scroll_to_hunk()
        self.post_message(self.ModeChanged())

    # the review's and the screen's keys, bound now or not (the screen sets the user's keymap)
    own_keys: frozenset[str] = review_keys(key_names())

    def on_key(self, event: events.Key) -> None:
        """Typing in the review starts a message, unless the key is one of the review's
        own (bound here or on the screen, enabled or not: a review key never becomes text).
        No clock is read: the review has the keys only because the user gave them to it."""
        if not (event.is_printable and event.character):
            return
        if event.key not in self.screen.active_bindings and event.key not in self.own_keys:
            event.stop()
            event.prevent_default()
            self.post_message(self.StartMessage(event.character))

    def pick_line(self) -> None:
        if self.line_mode:
            self.picked ^= {self.line_cursor}
            self._move(1)
            self.refresh()
            self.post_message(self.ModeChanged())

    def toggle_side_by_side(self) -> None:
        self.side_by_side = not self.side_by_side

    # -- rendering -------------------------------------------------------------------------
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
               h.warning if h is not None else None)
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
