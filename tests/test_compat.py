"""The Textual internals app/ui/compat.py leans on are still there and still do what it
assumes. A Textual upgrade that changes them fails here, not as a slow or broken app."""

from __future__ import annotations

import inspect

from textual.app import App, ComposeResult
from textual.geometry import Size
from textual.screen import Screen
from textual.scroll_view import ScrollView
from textual.widget import Widget
from textual.widgets import Static

from app.ui import compat


def test_the_internals_exist_with_the_shapes_compat_uses():
    assert list(inspect.signature(Screen._on_timer_update).parameters) == ["self"]
    assert list(inspect.signature(Widget._scroll_update).parameters) == ["self", "virtual_size"]
    assert list(inspect.signature(App._display).parameters) == ["self", "screen", "renderable"]
    from textual._doc import take_svg_screenshot

    assert {"app", "terminal_size", "run_before", "title"} <= set(
        inspect.signature(take_svg_screenshot).parameters)


class _Ticking(compat.FrameTickScreen):
    def __init__(self) -> None:
        super().__init__()
        self.ticks = 0

    def compose(self) -> ComposeResult:
        yield Static("x", id="s")

    def frame(self) -> None:
        self.ticks += 1


class _Scroller(ScrollView):
    def render_line(self, y: int):
        from textual.strip import Strip

        return Strip.blank(self.size.width)


class _App(App):
    def __init__(self) -> None:
        super().__init__()
        self.ticking = _Ticking()

    def get_default_screen(self) -> Screen:
        return self.ticking


async def test_frame_runs_at_the_refresh_tick_and_displays_are_seen():
    app = _App()
    shown = []
    compat.on_display(app, lambda: shown.append(1))
    async with app.run_test(size=(40, 10)) as pilot:
        await pilot.pause(0.1)
        before, seen = app.ticking.ticks, len(shown)
        app.ticking.query_one("#s", Static).update("changed")  # dirty: Textual ticks again
        await pilot.pause(0.1)
        assert app.ticking.ticks > before  # our frame ran at Textual's tick
        assert len(shown) > seen  # and the frame reached the terminal
        assert not compat.shutting_down(app)


async def test_the_refresh_tick_runs_on_the_frame_grid_and_a_request_repaints_nothing():
    """Textual resumes and pauses our timer (its `_update_timer`), which ticks on the
    FRAME_PERIOD grid; `request_frame` brings a tick (our frame) with no widget repainted."""
    app = _App()
    shown = []
    compat.on_display(app, lambda: shown.append(1))
    async with app.run_test(size=(40, 10)) as pilot:
        await pilot.pause(0.1)
        screen = app.ticking
        timer = screen._update_timer
        assert timer is screen._update_timer and timer._interval == compat.FRAME_PERIOD < 1 / 60
        assert screen._Screen__update_timer is None  # Textual's own timer never started
        before, seen = screen.ticks, len(shown)
        screen.request_frame()
        await pilot.pause(0.1)
        assert screen.ticks > before  # the frame ran
        assert len(shown) == seen  # and nothing had to be drawn for it
        screen.query_one("#s", Static).update("changed")  # Textual resumes the same timer
        await pilot.pause(0.1)
        assert len(shown) > seen


async def test_no_tick_draws_before_the_last_one_has_been_paid_for():
    """After a tick, the next draws once as much time has passed again (`_not_before`); a
    grid point before that passes over without a frame and the timer keeps running."""
    app = _App()
    async with app.run_test(size=(40, 10)) as pilot:
        await pilot.pause(0.1)
        screen = app.ticking
        assert screen._not_before > 0  # set by the ticks so far
        screen._not_before = float("inf")
        before = screen.ticks
        screen.request_frame()
        await pilot.pause(0.1)
        assert screen.ticks == before and screen._update_timer._active.is_set()
        screen._not_before = 0.0
        await pilot.pause(0.1)
        assert screen.ticks > before  # the running timer drew at the next grid point


async def test_set_virtual_size_updates_the_scrollbar_without_a_layout_pass():
    class Host(App):
        def compose(self) -> ComposeResult:
            yield _Scroller(id="v")

    app = Host()
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(_Scroller)
        compat.set_virtual_size(view, Size(40, 100))
        await pilot.pause()
        assert view.virtual_size == Size(40, 100)
        assert view.max_scroll_y == 100 - view.scrollable_content_region.height
        view.scroll_to(y=50, animate=False, immediate=True)
        await pilot.pause()
        assert view.scroll_offset.y == 50


def test_the_shared_parser_markdown_is_what_rich_builds():
    from rich.console import Console
    from rich.markdown import Markdown

    text = "# T\n\n- `a` **b**\n\n```python\nx = 1\n```\n"
    ours, theirs = compat.markdown(text, "monokai"), Markdown(text, hyperlinks=False)
    assert set(vars(ours)) == set(vars(theirs))
    assert [(t.type, t.content) for t in ours.parsed] == [(t.type, t.content) for t in theirs.parsed]
    console = Console(width=40, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(ours)
    a = console.export_text()
    console.print(theirs)
    assert a == console.export_text()
