"""The few Textual internals steer leans on, each wrapped once, with why.

Textual is pinned to the major version the tests run (pyproject.toml); tests/test_compat.py
fails if any of these changes shape, so an upgrade breaks loudly here instead of quietly
making the app slow.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from markdown_it import MarkdownIt  # rich's Markdown parser (imported here: ~0.25 s)
from rich.markdown import Markdown
from textual._xterm_parser import XTermParser
from textual.app import App
from textual.geometry import Size
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget

FRAME_PERIOD = 1 / 120  # the refresh tick's grid, in seconds (Textual's own: 1/60)


class FrameTickScreen(Screen):
    """A screen that takes its frame at Textual's own refresh tick.

    Textual repaints from a timer (`Screen._on_timer_update`) that it resumes whenever a
    widget is dirty. Running our per-frame pull at that same tick, instead of from a second
    timer of our own, saves a token up to a whole frame of waiting between arriving and
    being drawn.

    The tick runs on a grid of FRAME_PERIOD, half of Textual's: a token that arrives just
    after a frame was taken waits for the next grid point and then for that frame's render,
    so at 1/60 its latency was a whole 60 Hz frame plus a render, never within one frame.
    The timer runs only while something is dirty (an answer streams, a key was typed), and a
    frame at 120 Hz holds half the text of one at 60 Hz, so the work per second grows only
    by the fixed part of a frame.

    Frames never take more than half the time: after a tick that used d seconds of CPU the
    next one comes d seconds after it ended at the earliest (a grid point in between is
    passed over, the timer left running). At stream rates a frame is a few milliseconds and
    this never bites; under a flood (an unthrottled answer, frames of 20+ ms) it keeps half
    of the loop for reading the answer instead of drawing it twice as often. CPU time, not
    the wall clock: a tick that was only descheduled (a busy machine) holds nothing back."""

    tick_log: list[Tick] | None = None  # benchmarks set it: every tick's timing
    _frame_timer: Timer | None = None
    _not_before = 0.0  # perf_counter time before which no tick draws (see above)

    @property
    def _update_timer(self) -> Timer:
        """Textual's `Screen._update_timer` (paused, resumed and paused again by Textual),
        on the FRAME_PERIOD grid."""
        timer = self._frame_timer
        if timer is None:
            timer = self._frame_timer = self.set_interval(
                FRAME_PERIOD, self._on_timer_update, name="screen_update", pause=True)
        return timer

    def request_frame(self) -> None:
        """Make the next refresh tick come (and with it `frame`) without repainting anything:
        what arrived is drawn by the frame, in the rows it changes."""
        self._update_timer.resume()

    def frame(self) -> None:
        """Pull what arrived and update the widgets (called just before each repaint)."""

    def _on_timer_update(self) -> None:
        t0 = time.perf_counter()
        if t0 < self._not_before:
            return  # the timer stays resumed: the next grid point draws
        cpu0 = time.thread_time()
        log = self.tick_log
        if log is None:
            self.frame()
            super()._on_timer_update()
        else:
            self.frame()
            t1 = time.perf_counter()
            dirty = sorted({type(w).__name__ for w in self._dirty_widgets})
            layout = self._layout_required
            super()._on_timer_update()
            log.append(Tick(t0, t1, time.perf_counter(), layout, dirty))
        self._not_before = time.perf_counter() + (time.thread_time() - cpu0)


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


def alive(widget: Widget) -> bool:
    """`widget` can be used: mounted, attached, and the app not tearing it down (a worker
    coming back from a thread checks this before it touches anything)."""
    return widget.is_mounted and widget.is_attached and not shutting_down(widget.app)


def on_display(app: App, callback: Callable[[], None]) -> None:
    """Call `callback` each time the app writes a frame to the terminal (benchmarks: the
    moment a token is on screen). `App._display` is where every rendered frame goes."""
    original = app._display

    def display(screen, renderable) -> None:
        original(screen, renderable)
        if renderable is not None:
            callback()

    app._display = display  # type: ignore[method-assign]  # the workaround wraps Textual's method


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


# -- bracketed pastes holding ESC ------------------------------------------------------------
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
_MARK = "\ufdd0"  # a Unicode noncharacter (reserved for internal use): ESC inside a paste
_UNMARK = re.compile(f"{_MARK}(.)", re.DOTALL)


class _PasteGuard:
    """Textual's XTermParser ends a bracketed paste at the first ESC inside it, and what
    follows arrives as key presses: ESC as `^`, a pasted CR as Enter, a pasted \\x11 as
    Ctrl+Q. A pasted log with colours in it would run keys. This rewrites each ESC between
    the paste markers before the parser sees it, so the paste stays one Paste event;
    `paste_text` gives its exact text back. Markers split across reads are followed."""

    def __init__(self) -> None:
        self.in_paste = False
        self.held = ""  # inside a paste: the start of what may be the end marker
        self.tail = ""  # outside: the last characters, in case a start marker is split

    def __call__(self, data: str) -> str:
        data, self.held = self.held + data, ""
        out: list[str] = []
        pos = 0
        while pos < len(data):
            if self.in_paste:
                end = data.find(PASTE_END, pos)
                if end < 0:
                    chunk = data[pos:]
                    keep = next((n for n in range(min(len(chunk), len(PASTE_END) - 1), 0, -1)
                                 if PASTE_END.startswith(chunk[-n:])), 0)
                    self.held = chunk[len(chunk) - keep:]
                    out.append(_mark(chunk[:len(chunk) - keep]))
                    break
                out += [_mark(data[pos:end]), PASTE_END]
                pos, self.in_paste, self.tail = end + len(PASTE_END), False, ""
                continue
            joined = self.tail + data[pos:]
            found = joined.find(PASTE_START)
            if found < 0:
                out.append(data[pos:])
                self.tail = joined[-(len(PASTE_START) - 1):]
                break
            upto = found + len(PASTE_START) - len(self.tail)  # (the marker may have begun before)
            out.append(data[pos:pos + upto])
            pos, self.in_paste, self.tail = pos + upto, True, ""
        return "".join(out)


def _mark(text: str) -> str:
    return text.replace(_MARK, _MARK + "0").replace("\x1b", _MARK + "e")


def paste_text(text: str) -> str:
    """The exact text of a Paste event read through the guard (ESCs back in place)."""
    if _MARK not in text:
        return text
    return _UNMARK.sub(lambda m: "\x1b" if m.group(1) == "e" else _MARK, text)


class PasteSafeParser(XTermParser):
    """Textual's terminal parser with pastes guarded (see _PasteGuard)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._guard = _PasteGuard()

    def feed(self, data: str):
        if not data:  # the end of input
            return super().feed(data)
        guarded = self._guard(data)
        return super().feed(guarded) if guarded else ()  # ("" would mean the end)


def guard_pastes() -> None:
    """Make Textual's drivers read terminal input with PasteSafeParser (the drivers build
    their parser by this module-level name when the app starts reading input)."""
    import importlib

    for name in ("linux_driver", "linux_inline_driver", "web_driver"):
        try:
            module = importlib.import_module(f"textual.drivers.{name}")
        except ImportError:
            continue
        if getattr(module, "XTermParser", None) is XTermParser:
            module.XTermParser = PasteSafeParser  # type: ignore[attr-defined]  # a module attribute mypy can't see
