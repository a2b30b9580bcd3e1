"""The conversation pane: the user's messages, the model's prose as Markdown, one live card
per edit block, and status lines — a scrolling list of blocks that only ever grows at the
end (cards change in place).

Written for a live answer at any rate: text arrives once per frame; only the last block is
re-rendered (a paragraph of Markdown, or the last line of plain text), only the rows that
changed are refreshed, and rows already on screen keep their strips. This module holds the
list of blocks and their rows, tail mode and scrolling, the card cursor and drawing the rows
on screen; what a block is and how it is drawn (wrapping, Markdown, cards; the outside-text
boundary) is in stream_blocks.py.

Every text here but steer's own words is outside text (the model's prose and raw answer, an
agent's plan and tool titles, paths on cards, error messages): it is drawn through
app/view/outside_text.py, and `text` gives it back as that boundary shows it.

Before the first message the pane is not blank: it shows the welcome the screen gives it
(`welcome`: how to ask, review and stop, which model answers), until the first block.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.strip import Strip

from app.ui.compat import markdown, set_virtual_size
from app.ui.themes import SYNTAX_FALLBACK
from app.ui.widgets.stream_blocks import Block, StreamBlocks
from app.ui.widgets.welcome import STYLES as WELCOME_STYLES
from app.ui.widgets.welcome import welcome_strips
from app.view.cards import STYLES as CARD_STYLES
from app.view.layout import TAB
from app.view.outside_text import name, visible
from app.view.welcome import Row as WelcomeRow

STYLES = ("text", "user", "sep", "error", "dim", "md-code", "card-cursor", *CARD_STYLES,
          *WELCOME_STYLES)
JUMP_WINDOW = 0.25  # a jump leaves room for as many rows as arrived in this many seconds
KEEP_ABOVE = 3  # screens of rows above the view that keep their rendered strips
FENCE_MARKS = ("```", "~~~")


class StreamView(StreamBlocks, can_focus=True):
    """Two modes. Tail (the default): the view shows the end, drawn from a top row of its
    own with no scrolling at all, because in Textual every scroll re-arranges the whole
    screen and a stream scrolls every frame. The top row moves in jumps: when the text
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
        Binding("k", "card(-1)", "Prev card", show=False),
        Binding("j", "card(1)", "Next card", show=False),
        Binding("enter", "open_card", "Show in diff"),
    ]
    DEFAULT_CSS = """
    StreamView { background: $surface; scrollbar-background: $surface; scrollbar-background-hover: $surface; scrollbar-background-active: $surface; overflow-x: hidden; overflow-y: scroll; scrollbar-size-vertical: 1; }
    StreamView.-tail { scrollbar-size-vertical: 0; }
    StreamView > .streamview--text { color: $text; }
    StreamView > .streamview--user { color: $accent; text-style: bold; }
    StreamView > .streamview--sep { color: $text-muted; }
    StreamView > .streamview--error { color: $error; text-style: bold; }
    StreamView > .streamview--dim { color: $text-muted; }
    StreamView > .streamview--md-code { color: $warning; }
    StreamView > .streamview--card-live { color: $secondary; text-style: bold; }
    StreamView > .streamview--card-pending { color: $text; text-style: bold; background: $panel; }
    StreamView > .streamview--card-accepted { color: $success; text-style: bold; background: $panel; }
    StreamView > .streamview--card-rejected { color: $text-muted; text-style: strike; background: $panel; }
    StreamView > .streamview--card-conflict { color: $error; text-style: bold; background: $panel; }
    StreamView > .streamview--card-stale { color: $warning; text-style: bold; background: $panel; }
    StreamView > .streamview--card-superseded { color: $text-muted; text-style: italic; background: $panel; }
    StreamView > .streamview--card-mixed { color: $text; text-style: bold; background: $panel; }
    StreamView > .streamview--card-cursor { background: $accent 30%; }
    StreamView > .streamview--welcome-label { color: $text-muted; text-style: bold; }
    StreamView > .streamview--welcome-key { color: $accent; text-style: bold; }
    StreamView > .streamview--welcome-code { color: $warning; }
    """

    @dataclass
    class CardChosen(Message):
        """Enter or a click on a card: show its hunks in the diff pane."""

        key: int

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._blocks: list[Block] = []
        self._first_row: list[int] = []  # first row of each block
        self._rows: list[tuple[int, int]] = []  # (block, row in it)
        self._kept = 0  # blocks before this one have let their strips go (far above the view)
        self._cards: dict[int, int] = {}  # card key -> block index
        self._width = 0
        self._height = 0
        self._top = 0  # tail mode: the first row shown
        self._recent: deque[tuple[float, int]] = deque()  # (when, rows added): the row rate
        self.card_cursor: int | None = None  # the card j/k moved to (its key)
        self.tail = True
        self.add_class("-tail")
        self.welcome: list[WelcomeRow] = []  # drawn while there is no block yet
        self._welcome: list[Strip] | None = None  # rendered, at the width

    @property
    def welcoming(self) -> bool:
        """The welcome is what the pane shows (no message yet)."""
        return bool(self.welcome) and not self._blocks

    @property
    def welcome_text(self) -> str:
        """The welcome as drawn now, line by line ("" once the conversation began)."""
        if not self.welcoming:
            return ""
        strips = welcome_strips(self.welcome, max(1, self._width or 80), self._style, self._height)
        return "\n".join(strip.text.rstrip() for strip in strips)

    # -- content ---------------------------------------------------------------------------
    @property
    def text(self) -> str:
        """Everything shown, as plain text (tests, and copying out): outside text as the
        boundary shows it (Markdown source unrendered)."""
        out = []
        for b in self._blocks:
            if b.kind == "plain":
                out.append(visible(b.text, tabs=TAB))
            elif b.kind == "card":
                out.append(name(b.text))
            elif (b.text + b.tail).strip():  # a paragraph whose tail went (to a card) is no line
                out.append(visible((b.text + b.tail).rstrip("\n"), tabs=TAB))
        return "\n".join(out)

    def clear(self) -> None:
        self._blocks, self._first_row, self._rows, self._cards = [], [], [], {}
        self._kept = 0
        self._top = 0
        self.card_cursor = None
        self._set_tail(True)
        self.refresh()

    def write(self, text: str, style: str = "text") -> None:
        """Append plain text; a newline in it starts a new line."""
        if not text:
            return
        pieces = text.split("\n")
        last = self._blocks[-1] if self._blocks else None
        if last is None or last.kind != "plain" or last.closed:
            last = self._append(Block("plain", "", style))
        first = len(self._blocks) - 1
        if not last.text:
            last.style = style  # a line takes the style of its first text
        last.text += pieces[0]
        for piece in pieces[1:]:
            last.closed = True
            last = self._append(Block("plain", piece, style))
        for b in self._blocks[first:]:
            b.strips = None
        self._relayout(first)

    def write_line(self, text: str, style: str = "text") -> None:
        """A whole line of its own (ends any partial line first); a newline in `text` (an
        error's message) starts another."""
        last = self._blocks[-1] if self._blocks else None
        if last is not None and last.kind == "plain" and not last.closed and last.text:
            last.closed = True
        self._close_md()
        first = len(self._blocks)
        for line in text.split("\n"):
            self._append(Block("plain", line, style, closed=True))
        self._relayout(first)

    def add_markdown(self, text: str) -> None:
        """Complete lines of the model's prose, Markdown. A blank line outside a code block
        ends a paragraph: the paragraph's block is final, the next one starts."""
        # lines end at "\n" only: a form feed or a bare CR is the model's text, shown as an
        # escape, not a line break nor a blank line
        parts = text.split("\n")
        for line in [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else []):
            if not line.strip(" \t\n"):
                last = self._blocks[-1] if self._blocks else None
                if last is None or last.kind != "md" or last.closed or not last.text.strip():
                    continue  # blank lines between blocks: the blocks are apart already
            block = self._open_md()
            block.text += line
            block.tail = ""
            block.strips = None
            stripped = line.strip()
            if stripped.startswith(FENCE_MARKS):
                block.fenced = not block.fenced
            elif not line.strip(" \t\n") and not block.fenced and block.text.strip():
                block.closed = True
        self._relayout(self._first_md_dirty())

    def set_tail(self, text: str) -> None:
        """The answer's prose not final yet (the parser may still find an edit in it)."""
        block = self._blocks[-1] if self._blocks else None
        if block is None or block.kind != "md" or block.closed:
            if not text:
                return
            block = self._open_md()
        if block.tail != text:
            block.tail = text
            block.strips = None
            self._relayout(len(self._blocks) - 1)

    def set_card(self, key: int, text: str, style: str) -> None:
        """A card's line: new (appended) or changed (in place)."""
        i = self._cards.get(key)
        if i is None:
            self._close_md()
            last = self._blocks[-1] if self._blocks else None
            if last is not None and last.kind == "plain" and not last.closed:
                last.closed = True
            self._append(Block("card", text, style, key=key, closed=True))
            self._cards[key] = len(self._blocks) - 1
            self._relayout(len(self._blocks) - 1)
            return
        block = self._blocks[i]
        if (block.text, block.style) != (text, style):
            block.text, block.style, block.strips = text, style, None
            self._repaint_block(i)

    def _append(self, block: Block) -> Block:
        if self.welcoming:
            self.refresh()  # the first block: the welcome goes, all of it
        self._blocks.append(block)
        self._first_row.append(len(self._rows))
        return block

    def _open_md(self) -> Block:
        last = self._blocks[-1] if self._blocks else None
        if last is not None and last.kind == "md" and not last.closed:
            return last
        if last is not None and last.kind == "plain" and not last.closed and last.text:
            last.closed = True
        return self._append(Block("md"))

    def _close_md(self) -> None:
        last = self._blocks[-1] if self._blocks else None
        if last is not None and last.kind == "md" and not last.closed:
            last.closed, last.tail, last.strips = True, "", None
            self._relayout(len(self._blocks) - 1)

    def _first_md_dirty(self) -> int:
        i = len(self._blocks) - 1
        while i > 0 and self._blocks[i - 1].kind == "md" and self._blocks[i - 1].rows() is None:
            i -= 1
        return i

    # -- rows ------------------------------------------------------------------------------
    def _strips(self, b: Block) -> list[Strip]:
        if b.strips is None:
            b.strips = self._render_block(b)
        return b.strips

    def _relayout(self, first: int) -> None:
        """Blocks from `first` on were added or changed: their rows again, and a repaint of
        what moved."""
        if not self._blocks:
            return
        first = max(0, min(first, len(self._blocks) - 1))
        self._kept = min(self._kept, first)  # from here on, blocks render (and hold) again
        start_row = self._first_row[first]
        before = len(self._rows)
        del self._rows[start_row:]
        for i in range(first, len(self._blocks)):
            self._first_row[i] = len(self._rows)
            b = self._blocks[i]
            n = b.rows()
            self._rows += [(i, r) for r in range(len(self._strips(b)) if n is None else n)]
        self._placed(start_row, before)

    def _repaint_block(self, i: int) -> None:
        """A block changed in place: same rows when its height is the same."""
        n_old = (self._first_row[i + 1] if i + 1 < len(self._blocks) else len(self._rows)) - self._first_row[i]
        if len(self._strips(self._blocks[i])) != n_old:
            self._relayout(i)
            return
        y0 = self._first_row[i]
        if self.tail:
            self.refresh(Region(0, y0 - self._top, self._width or 1, n_old))
        else:
            self.refresh_lines(y0, n_old)

    def _placed(self, start_row: int, before: int) -> None:
        n = len(self._rows)
        width = max(1, self._width or 80)
        if not self.tail:
            set_virtual_size(self, Size(width, n))
            self.refresh_lines(start_row, max(1, max(n, before) - start_row))
            return
        height = max(1, self._height)
        now = time.monotonic()
        self._recent.append((now, max(0, n - before)))
        while self._recent and now - self._recent[0][0] > JUMP_WINDOW:
            self._recent.popleft()
        if n - self._top > height:  # full: jump, leaving room for the rows of the next frames
            room = min(height // 2, max(2, sum(k for _, k in self._recent)))
            self._top = max(0, n - height + room)
            self._let_go(self._top - KEEP_ABOVE * height)
            self.refresh()
        else:  # only the rows that changed, where they are on screen
            y0 = max(0, start_row - self._top)
            self.refresh(Region(0, y0, width, max(1, max(n, before) - self._top - y0)))

    def _let_go(self, row: int) -> None:
        """Blocks that end above `row` let their strips go (a long session's answers would
        hold every rendered line); they keep their height, and render again if scrolled to."""
        blocks, first = self._blocks, self._first_row
        i = self._kept
        while i + 1 < len(blocks) and first[i + 1] <= row:
            blocks[i].evict()
            i += 1
        self._kept = i

    def set_syntax(self, name: str) -> None:
        if name != self._syntax:
            self._syntax = name
            self._restyle()

    def _restyle(self) -> None:
        for b in self._blocks:
            b.strips = None
        if self._blocks:
            self._relayout(0)
        self.refresh()

    # -- cards -----------------------------------------------------------------------------
    def action_card(self, step: int) -> None:
        keys = sorted(self._cards)
        if not keys:
            return
        if self.card_cursor not in self._cards:
            nxt = keys[-1] if step < 0 else keys[0]
        else:
            j = keys.index(self.card_cursor) + step
            nxt = keys[max(0, min(len(keys) - 1, j))]
        old, self.card_cursor = self.card_cursor, nxt
        for key in (old, nxt):
            if key in self._cards:
                i = self._cards[key]
                self._blocks[i].strips = None
                self._repaint_block(i)
        self._show_row(self._first_row[self._cards[nxt]])

    def action_open_card(self) -> None:
        if self.card_cursor is not None:
            self.post_message(self.CardChosen(self.card_cursor))

    def on_click(self, event: events.Click) -> None:
        row = (self._top if self.tail else int(self.scroll_offset.y)) + event.y
        if 0 <= row < len(self._rows):
            block = self._blocks[self._rows[row][0]]
            if block.kind == "card" and block.key is not None:
                self.card_cursor = block.key
                block.strips = None
                self._repaint_block(self._rows[row][0])
                self.post_message(self.CardChosen(block.key))

    def _show_row(self, row: int) -> None:
        top = self._top if self.tail else int(self.scroll_offset.y)
        if top <= row < top + self._height:
            return
        if self.tail:
            self._set_tail(False)
        self.scroll_to(y=max(0, row - self._height // 2), animate=False, immediate=True, force=True)

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

    # -- drawing ---------------------------------------------------------------------------
    def on_resize(self) -> None:
        region = self.scrollable_content_region
        self._height = region.height
        self._welcome = None
        if region.width and region.width != self._width:
            self._width = region.width
            for b in self._blocks:
                b.strips = None
            if self._blocks:
                self._relayout(0)
        self._top = max(0, len(self._rows) - self._height)
        self.refresh()

    def on_mount(self) -> None:
        markdown("warm *up*", self._syntax)  # the parser's rules compile now, not mid-answer
        # code blocks in the prose take the theme's syntax style, as the diff pane does
        self.set_syntax(self.app.current_theme.variables.get("syntax", SYNTAX_FALLBACK))
        self.app.theme_changed_signal.subscribe(
            self, lambda theme: self.set_syntax(theme.variables.get("syntax", SYNTAX_FALLBACK)))

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._style_of.clear()
        self._theme = None
        self._welcome = None
        for b in self._blocks:
            b.strips = None
        if self._blocks and self._width:
            self._relayout(0)

    def render_line(self, y: int) -> Strip:
        if self.tail:
            row, width = self._top + y, self._width
        else:  # a scrollbar takes a column: the rare case pays for the exact width
            row, width = int(self.scroll_offset.y) + y, self.scrollable_content_region.width
        if row >= len(self._rows):
            if self.welcoming:
                if self._welcome is None:
                    self._welcome = welcome_strips(self.welcome, max(1, width), self._style,
                                                   self._height)
                if y < len(self._welcome):
                    return self._welcome[y]
            return Strip.blank(width, self._style(""))
        i, r = self._rows[row]
        strips = self._strips(self._blocks[i])
        return strips[r] if r < len(strips) else Strip.blank(width, self._style(""))
