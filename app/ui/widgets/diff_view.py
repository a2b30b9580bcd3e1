"""The diff pane: one file's pending diff (or git's picture of it), row by row (Textual's
line API), with a hunk cursor and, in line mode, a line cursor.

Rows come from the file's layout (app/view/layout.py: cached per hunk, extended while a
hunk streams). This module holds what the pane shows and where: the file, the rows' scroll
range (grown in steps while a hunk streams), the cursors and their keys, following the hunk
being streamed, sideways scrolling, and the action table's conditions the cursor owns.
How a row is drawn (strips, colours, highlighting off the loop) is its base's, in
diff_rows.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import var

from app.core.edits.file_diff import FileDiff
from app.core.edits.hunks import OPEN, Hunk, HunkState
from app.core.review.review import line_rows
from app.ui.actions import bindings, key_names, review_keys
from app.ui.compat import set_virtual_size
from app.ui.widgets.diff_rows import GUTTER, STATE_LABEL, DiffRows, first_change
from app.view.layout import FileLayout, Row

GROW = 64  # while following a streaming hunk, the scroll range grows this many rows at a time


class DiffView(DiffRows, can_focus=True):
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
        self.message = "Nothing pending yet."  # the conversation pane says how to ask
        self._hunk_rows: dict[int, int] = {}  # hunk id -> index of its header row
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
        if not self.following:  # (following, the cursor moves on next: the frame reads it then)
            self.read_cursor()

    def read_cursor(self) -> None:
        """What the hunk under the cursor lets the review do. Called wherever the cursor or
        the hunks move; a hunk's state is core's, which tells no one (it is not reactive), so
        the review calls it each frame too: an unchanged value is only compared (a set of a
        reactive costs several times a read, every frame)."""
        h = self.hunk if self.decides else None
        hunk_open = h is not None and h.state in OPEN
        conflict = h is not None and h.state == HunkState.CONFLICT and h.ancestor is not None
        if hunk_open != self.hunk_open:
            self.hunk_open = hunk_open
        if conflict != self.hunk_conflict:
            self.hunk_conflict = conflict

    def watch_decides(self) -> None:
        self.read_cursor()

    def on_mount(self) -> None:
        # each theme carries its syntax style; the signal fires once the theme is applied
        self.set_syntax(self.app.current_theme)
        self.app.theme_changed_signal.subscribe(self, self.set_syntax)

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
