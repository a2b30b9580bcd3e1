"""What the conversation pane (stream_view.py) is made of, and how each piece is drawn: a
`Block` is one line of plain text, one paragraph of the model's Markdown or one edit card,
holding its strips at the pane's width (and letting them go when far above the view), and
`StreamBlocks`, a base of StreamView, draws a block into those strips: plain lines wrapped
after spaces (app/view/wrap.py), Markdown per paragraph with rich, a card on one line.

Markdown is rendered per block with rich (markdown-it underneath) rather than with Textual's
Markdown widget: that widget mounts a widget per block, and every mount is a layout pass of
the whole screen (30-50 ms here), a few per second at full speed: the frame budget cannot
hold with it. Every text here but steer's own words is outside text: each block is drawn
through app/view/outside_text.py, so nothing in it reaches the terminal as a control
sequence or is read as markup, and a clean block pays one regex search for it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.theme import Theme
from textual.scroll_view import ScrollView
from textual.strip import Strip

from app.ui.compat import markdown
from app.ui.themes import SYNTAX_FALLBACK
from app.view.layout import TAB
from app.view.outside_text import clean, for_markdown, segments, unmark
from app.view.status import clip_segments
from app.view.wrap import wrap_spans


@dataclass(eq=False)
class Block:
    """One piece of the conversation, with its strips at the pane's width once drawn."""

    kind: str  # plain (one line of text) | md (a Markdown paragraph) | card (one line)
    text: str = ""
    style: str = "text"
    tail: str = ""  # md: the answer's prose not yet final, drawn after `text`
    key: int | None = None  # card
    closed: bool = False  # md: a later block started; plain: its line ended
    fenced: bool = False  # md: inside a ``` code block
    _strips: list[Strip] | None = field(default=None, repr=False)  # rendered, at the width
    # rows it had when its strips were let go, far above the view (they come back rendered
    # when scrolled to); None: its height is its strips'
    height: int | None = None

    @property
    def strips(self) -> list[Strip] | None:
        return self._strips

    @strips.setter
    def strips(self, strips: list[Strip] | None) -> None:
        self._strips, self.height = strips, None  # a change: the height is the new strips'

    def rows(self) -> int | None:
        """Its height when known without rendering it."""
        return len(self._strips) if self._strips is not None else self.height

    def evict(self) -> None:
        if self._strips is not None:
            rows = len(self._strips)
            self._strips, self.height = None, rows


class StreamBlocks(ScrollView):
    """A base of StreamView, which sets these up (what a block's look depends on)."""

    _width: int  # the pane's width in cells (0 before it is laid out)
    card_cursor: int | None  # the card j/k moved to (its key): drawn highlighted

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._style_of: dict[str, Style] = {}  # component styles, resolved once per theme
        self._syntax = SYNTAX_FALLBACK  # the theme's pygments style, for code in the prose
        self._theme: Theme | None = None  # Markdown styles from the pane's component classes

    def _style(self, name: str) -> Style:
        style = self._style_of.get(name)
        if style is None:
            style = self._style_of[name] = (
                self.rich_style if name == "" else self.get_component_rich_style(f"streamview--{name}"))
        return style

    def _render_block(self, b: Block) -> list[Strip]:
        width = max(1, self._width or 80)
        base = self._style("")
        if b.kind == "card":
            style = base + self._style(b.style)
            if b.key == self.card_cursor:
                style = style + self._style("card-cursor")
            return [Strip(clip_segments(segments([(b.text, style)], tabs=None), width)
                          ).crop_extend(0, width, style)]
        if b.kind == "plain":
            style = base + self._style(b.style)
            line = b.text
            if clean(line):
                return [Strip([Segment(line[s:e], style)], e - s if line.isascii() else None
                              ).crop_extend(0, width, base) for s, e in wrap_spans(line, width)]
            segs = segments([(line, style)], tabs=TAB)  # escapes dimmed, tabs expanded
            line = "".join(seg.text for seg in segs)
            spans = wrap_spans(line, width)
            cuts = [cell_len(line[:e]) for _, e in spans]
            cuts[-1] += 1  # (a zero-width mark at the very end stays on the last row)
            rows = Segment.divide(segs, cuts)
            return [Strip(row).crop_extend(0, width, base) for row in rows]
        source = (b.text + b.tail).rstrip("\n")
        if not source.strip():
            return []
        strips = self._markdown(source, width, base)
        if b.closed:  # a finished paragraph keeps a blank line after it, as Markdown reads
            strips.append(Strip.blank(width, base))
        return strips

    def _markdown(self, source: str, width: int, base: Style) -> list[Strip]:
        console = Console(width=width, file=io.StringIO(), force_terminal=True,
                          color_system="truecolor", theme=self._md_theme(), legacy_windows=False)
        source, marked = for_markdown(source, tabs=TAB)  # escapes as look-alikes, tabs expanded
        md = markdown(source, self._syntax)
        lines = console.render_lines(md, console.options.update(width=width), style=base,
                                     pad=True)
        return [Strip(unmark(line) if marked else line).crop_extend(0, width, base) for line in lines]

    def _md_theme(self) -> Theme:
        if self._theme is not None:
            return self._theme
        code = self._style("md-code")
        text = self._style("text")
        theme = Theme({"markdown.code": code, "markdown.code_block": text,
                      "markdown.paragraph": text, "markdown.text": text,
                      "markdown.h1": Style(bold=True) + text, "markdown.h2": Style(bold=True) + text,
                      "markdown.h3": Style(bold=True) + text, "markdown.item.bullet": code,
                      "markdown.item.number": code, "markdown.link": code,
                      "markdown.block_quote": self._style("dim")}, inherit=True)
        self._theme = theme
        return theme
