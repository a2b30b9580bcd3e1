"""The few Textual internals steer leans on, each wrapped once, with why.

Textual is pinned to the major version the tests run (pyproject.toml); tests/test_compat.py
fails if any of these changes shape, so an upgrade breaks loudly here instead of quietly
making the app slow.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from markdown_it import MarkdownIt  # rich's Markdown parser (imported here: ~0.25 s)
from rich.markdown import Markdown
from textual.app import App
from textual.geometry import Size
from textual.screen import Screen
from textual.widget import Widget


class FrameTickScreen(Screen):
    """A screen that takes its frame at Textual's own refresh tick.

    Textual repaints from a timer (`Screen._on_timer_update`) that it resumes whenever a
    widget is dirty. Running our per-frame pull at that same tick, instead of from a second
    timer of our own, saves a token up to a whole frame of waiting between arriving and
    being drawn."""

    tick_log: list[Tick] | None = None  # benchmarks set it: every tick's timing

    def frame(self) -> None:
        """Pull what arrived and update the widgets (called just before each repaint)."""

    def _on_timer_update(self) -> None:
        log = self.tick_log
        if log is None:
            self.frame()
            super()._on_timer_update()
            return
        t0 = time.perf_counter()
        self.frame()
        t1 = time.perf_counter()
        dirty = sorted({type(w).__name__ for w in self._dirty_widgets})
        layout = self._layout_required
        super()._on_timer_update()
        log.append(Tick(t0, t1, time.perf_counter(), layout, dirty))


@dataclass(slots=True)
class Tick:
    """One refresh tick: our frame (start..frame_end), then Textual's layout (when one was
    due), render and write (frame_end..end)."""

    start: float
    frame_end: float
    end: float
    layout: bool
    dirty: list[str]  # the widgets that were repainted (by class)


def set_virtual_size(widget: Widget, size: Size) -> None:
    """Change a ScrollView's virtual size without a screen-wide layout pass.

    `Widget.virtual_size` is a layout reactive: every change re-lays-out and re-renders the
    whole screen (tens of milliseconds here), which at one change per frame is the
    difference between keeping up with a fast model and falling seconds behind. Content that
    only grows needs a layout pass only when a scrollbar appears or disappears; otherwise
    updating the scrollbar is enough, which is what `Widget._scroll_update` (Textual's own
    resize path) does."""
    if size == widget.virtual_size:
        return
    shown = (widget.show_vertical_scrollbar, widget.show_horizontal_scrollbar)
    widget.set_reactive(Widget.virtual_size, size)
    widget._scroll_update(size)
    if (widget.show_vertical_scrollbar, widget.show_horizontal_scrollbar) != shown:
        widget.refresh(layout=True)


def shutting_down(app: App) -> bool:
    """The app is exiting (an error is being reported, or it is closing): a frame pulled
    now would query widgets that are being removed."""
    return bool(app._exit_renderables) or app._closing or not app.screen_stack


def on_display(app: App, callback: Callable[[], None]) -> None:
    """Call `callback` each time the app writes a frame to the terminal (benchmarks: the
    moment a token is on screen). `App._display` is where every rendered frame goes."""
    original = app._display

    def display(screen, renderable) -> None:
        original(screen, renderable)
        if renderable is not None:
            callback()

    app._display = display  # type: ignore[method-assign]


_MD_PARSER = None


def markdown(markup: str, code_theme: str):
    """rich's Markdown renderable, parsed with one shared markdown-it parser: rich builds a
    new parser for every instance (~1 ms compiling its rules), and the conversation renders
    the paragraph that is streaming every frame. The attributes set here are the ones
    `rich.markdown.Markdown.__init__` sets (tests/test_compat.py compares them)."""
    global _MD_PARSER
    if _MD_PARSER is None:
        _MD_PARSER = MarkdownIt().enable("strikethrough").enable("table")
    md = Markdown.__new__(Markdown)
    md.markup = markup
    md.parsed = _MD_PARSER.parse(markup)
    md.code_theme = code_theme
    md.justify = None
    md.style = "none"
    md.hyperlinks = False
    md.inline_code_lexer = None
    md.inline_code_theme = code_theme
    return md


def svg_screenshot(app: App, size: tuple[int, int], run_before) -> str:
    """The app as SVG after `run_before(pilot)`, rendered as Textual's own documentation
    screenshots are (the same renderer pytest-textual-snapshot uses, so README pictures and
    snapshot tests agree)."""
    from textual._doc import take_svg_screenshot

    return take_svg_screenshot(app, terminal_size=size, run_before=run_before, title="steer")
