"""Property (hypothesis): whatever string an outside party controls — markup-like brackets,
`[/]`, `[@click=...]`, ESC, C1, bidi, ZWJ, wide and combining characters, unassigned code
points — every widget that shows outside text draws it without an exception, without a
character a terminal would obey, and reads exactly as the boundary (app/view/outside_text.py)
shows it: `visible` for content, `name` for names, titles and one-line labels.

One app holds every such widget; hypothesis runs in a thread and hands each example to the
app's loop (`call_from_thread`), so a few hundred examples cost seconds, not an app each."""

from __future__ import annotations

import asyncio
import threading

from hypothesis import given, settings
from hypothesis import strategies as st
from outside import obeyable, screen_lines
from textual.app import App, ComposeResult
from textual.widgets._toast import Toast

from app.core.events import PermissionOption, PermissionRequest, ToolCall
from app.ui.dialogs.permission import PermissionScreen
from app.ui.plain_toasts import PlainToasts
from app.ui.widgets.diff_view import DiffView
from app.ui.widgets.file_tree import FileTree
from app.ui.widgets.line import Line
from app.ui.widgets.queue_view import QueueView
from app.ui.widgets.stream_view import StreamView
from app.view.layout import Row
from app.view.outside_text import name, visible

PIECES = ["[", "]", "[/]", "[b]", "[@click=app.quit]", "[link=x]", "\\", "\x1b", "\x1b]2;X\x07",
          "\x1b[31m", "\x9b", "\x85", "\u202e", "\u2066", "\u200b", "\u200d", "\ufeff", "\ufe0f",
          "\t", "\n", "\r", "\x0c", "\x08", "\x7f", "漢", "ｆ", "👨\u200d👩\u200d👧", "👍🏽", "e\u0301",
          "\u0301", "\u0915\u093f", "\U0001fae8", "\U000e0041", "\udc80", "$", "*", "`", "#", " ",
          "\u3164", "\u034f", "\u26a0", "\ufe0e"]
hostile = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=3)), max_size=8).map("".join)
WIDTH = 400


class Shelf(PlainToasts, App):
    """Every pane that shows outside text, side by side with room to spare."""

    CSS = """
    #line { height: 1; } #tree { height: 3; } #diff { height: 4; } #stream { height: 8; }
    #queue { height: 2; }
    """

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return {"diff-added-bg": "#1f3a26", "diff-removed-bg": "#45222a", "syntax": "monokai"}

    def compose(self) -> ComposeResult:
        yield Line(id="line")
        yield FileTree("root", id="tree")
        yield DiffView(id="diff")
        yield StreamView(id="stream")
        yield QueueView(id="queue")


def rows(app, widget) -> list[str]:
    region = widget.region
    return [line[region.x:region.right].rstrip()
            for line in screen_lines(app)[region.y:region.bottom]]


async def show_and_read(app: Shelf, s: str) -> None:
    while len(app.screen_stack) > 1:  # what an earlier (failing) example left
        await app.pop_screen()
    app.clear_notifications()
    for _ in range(100):
        if not app.screen.query(Toast):
            break
        await asyncio.sleep(0.02)
    one_line = s.replace("\n", " ")  # a file's line holds no newline
    path = s.replace("/", "_") or "_"  # a name, not a folder
    app.query_one(Line).set(s)
    app.query_one(FileTree).load([path])
    app.query_one(DiffView).show_rows("x.py", [Row("file", s), Row("ctx", one_line, 1, 1),
                                               Row("note", s)])
    stream = app.query_one(StreamView)
    stream.clear()
    stream.write_line(one_line)
    stream.set_card(0, s, "card-pending")
    stream.add_markdown(s + "\n")
    queue = app.query_one(QueueView)
    queue.show([s])
    app.notify(s, timeout=30)
    await asyncio.sleep(0.05)
    for _ in range(20):  # the queue's item and the toast mount on the next ticks
        if app.screen.query(Toast) and queue.query("Static"):
            break
        await asyncio.sleep(0.02)
    assert obeyable(screen_lines(app)) == []
    assert rows(app, app.query_one(Line)) == [name(s).rstrip()]
    assert rows(app, app.query_one(FileTree))[0] == name(path).rstrip()
    diff = rows(app, app.query_one(DiffView))
    assert diff[0] == name(f" {s}").rstrip()  # a row's words and the data, shown as one line
    assert diff[1] == f"     1     1   {visible(one_line)}".rstrip()
    assert diff[2] == name(f" {s}").rstrip()
    assert stream.text.split("\n")[:2] == [visible(one_line), name(s)]
    drawn = rows(app, stream)
    assert drawn[:2] == [visible(one_line).rstrip(), name(s).rstrip()]
    assert [str(w.render()) for w in queue.query("Static")] == [name(f"⏳ {s}")]
    assert [str(t.render()) for t in app.screen.query(Toast)] == [visible(s)]

    # an agent's permission request: its title, tool and options
    req = PermissionRequest(s, [PermissionOption("y", s, "allow_once")], ToolCall("t", s, s),
                            asyncio.get_running_loop().create_future())
    dialog = PermissionScreen(req)
    await app.push_screen(dialog)
    await asyncio.sleep(0.02)
    assert str(dialog.query_one("#permission-title").render()) == name(f"The agent asks: {s}")
    kind = f" ({s})" if s else ""
    assert str(dialog.query_one("#permission-tool").render()) == name(f"tool: {s}{kind}")
    assert str(dialog.query_one("#permission-options").render()) == name(f"  1  {s}")
    assert obeyable(screen_lines(app)) == []


async def test_every_pane_shows_any_outside_text_as_the_boundary_does():
    app = Shelf()
    async with app.run_test(size=(WIDTH, 80), notifications=True):
        failure: list[BaseException] = []

        @settings(max_examples=max(60, settings.default.max_examples // 3))  # deep: 1,000
        @given(hostile)
        def example(s: str) -> None:
            app.call_from_thread(show_and_read, app, s)

        def run() -> None:
            try:
                example()
            except BaseException as exc:  # noqa: BLE001 - reported on the test's own thread
                failure.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        while thread.is_alive():
            await asyncio.sleep(0.05)
        if failure:
            raise failure[0]
