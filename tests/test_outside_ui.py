"""Outside text is shown, never obeyed (DESIGN rule 12), in the app (Pilot, a real git
repository, real loopback servers): hostile file names and lines, a hostile model over SSE
and over the Responses WebSocket, paths with brackets, a queued message with `[/]`. What
the app draws holds no character a terminal would obey, and reads as the data with escapes
shown (app/view/outside_text.py)."""

from __future__ import annotations

import asyncio

from conftest import init_repo, sr
from outside import HOSTILE, RED_NAME, SLUG, TITLE_NAME, WIDE, obeyable, screen_lines
from pilot import ask, reviewing, until

from app.bench.demo import CALC, CALC_ANSWER
from app.core.edits.hunks import HunkState
from app.providers.openai_chat import OpenAIChat
from app.providers.openai_responses import OpenAIResponses
from app.server.chat_server import ChatServer
from app.server.generation import Faults, split_tokens
from app.ui.app import SteerApp
from app.ui.widgets.diff_view import DiffView
from app.ui.widgets.file_tree import FileTree
from app.ui.widgets.prompt import PromptInput
from app.ui.widgets.queue_view import QueueView
from app.ui.widgets.stream_view import StreamView
from app.view.outside_text import name, visible

WIDE_SIZE = (600, 60)  # wide enough that a hostile line is drawn whole in the diff pane
BAD_LINE = f"    bad = '{HOSTILE}'"
FILES = {
    "calc.py": f"def f():\n    wide = '{WIDE}'\n    return 1\n",
    TITLE_NAME: "x\n", RED_NAME: "x\n", SLUG: "export default 1\n", "\u202eevil.py": "x\n",
    "cjk 漢字.py": "x\n",
}
ANSWER = (f"{HOSTILE}\n\n{WIDE}\n\n"
          + sr("calc.py", "    return 1\n", f"{BAD_LINE}\n    return 2\n")
          + "\n" + sr(SLUG, "export default 1\n", "export default 2\n") + "\nDone.\n")


def app_for(root, server, provider=None, watch: bool = False) -> SteerApp:
    return SteerApp(root, provider or OpenAIChat(server.base_url, "replay"),
                    context=["calc.py", SLUG], watch_files=watch, blink=False)


def shown_whole(app, text: str) -> bool:
    return any(text in line for line in screen_lines(app))


async def test_hostile_names_lines_and_prose_are_shown_never_obeyed(tmp_path):
    root = init_repo(tmp_path / "r", FILES)
    server = ChatServer(replay=ANSWER)
    await server.start()
    try:
        app = app_for(root, server, watch=True)  # the watcher keeps git open: `d` shows what it sees
        async with app.run_test(size=WIDE_SIZE, notifications=True) as pilot:
            await ask(pilot, "fix it")
            await reviewing(pilot)
            await pilot.pause(0.3)
            assert obeyable(screen_lines(app)) == []
            tree = app.query_one(FileTree)
            for path in (TITLE_NAME, RED_NAME, "\u202eevil.py", "cjk 漢字.py"):
                assert tree.label(path).startswith(name(path))
                assert shown_whole(app, name(path)), path
            tree.reveal(SLUG)
            await until(pilot, lambda: shown_whole(app, "[slug]/") and shown_whole(app, "page.tsx"))
            # the diff pane: every line as the boundary shows it, whole
            diff = app.query_one(DiffView)
            assert diff.path == "calc.py"
            assert shown_whole(app, visible(BAD_LINE)[4:]), visible(BAD_LINE)
            assert shown_whole(app, visible(f"    wide = '{WIDE}'")[4:])
            # the conversation: prose drawn as Markdown, never as markup nor as controls
            stream = app.query_one(StreamView)
            assert visible(HOSTILE) in stream.text
            for piece in ("a\\x1b]2;PWNED\\x07b", "\\x1b]52;c;aGk=\\x07", "\\u202eevil\\u202c",
                          "z\\u200bw", "\\ufeffbom", "f\\x0cf", "c\\x0dr", "b\\x08s", "d\\x7fl",
                          "[b]bold[/b] [/] [@click=app.quit]CLICK-HERE[/]", "❤ e\u0301\u0301"):
                assert shown_whole(app, piece), piece
            assert f"✎ {SLUG}" in stream.text and shown_whole(app, f"✎ {SLUG}")
            # a path with brackets in the diff header and in the toast of an accept
            app.main.review.select(SLUG, None)
            await until(pilot, lambda: diff.path == SLUG and shown_whole(app, f" {SLUG}"))
            diff.focus()
            await pilot.press("y")
            await until(pilot, lambda: shown_whole(app, f"accepted 1 hunk → {SLUG}"))
            # what git sees: the working tree against HEAD, with the hostile line accepted
            app.main.review.select("calc.py", None)
            await until(pilot, lambda: diff.path == "calc.py")
            diff.focus()
            await pilot.press("y")
            await until(pilot, lambda: "return 2" in (root / "calc.py").read_text())
            assert BAD_LINE in (root / "calc.py").read_bytes().decode()  # written exactly: only shown escaped
            await pilot.press("d")
            await until(pilot, lambda: diff.fd is None and any(r.kind == "add" for r in diff.rows))
            await until(pilot, lambda: shown_whole(app, visible(BAD_LINE)[4:]))  # once drawn
            assert obeyable(screen_lines(app)) == []
    finally:
        await server.close()


async def test_hostile_prose_over_the_responses_websocket_is_shown_never_obeyed(tmp_path):
    root = init_repo(tmp_path / "r", FILES)
    server = ChatServer(replay=ANSWER, token="k")
    await server.start()
    try:
        app = app_for(root, server, OpenAIResponses(server.base_url, "m", "k"))
        async with app.run_test(size=WIDE_SIZE, notifications=True) as pilot:
            await ask(pilot, "fix it")
            await until(pilot, lambda: app.session.turn.state == "done", timeout=30)
            assert app.session.turn.chunks and "".join(app.session.turn.chunks) == ANSWER
            await until(pilot, lambda: visible(HOSTILE) in app.query_one(StreamView).text
                        and shown_whole(app, "[@click=app.quit]CLICK-HERE[/]"))  # once drawn
            assert obeyable(screen_lines(app)) == []
            await reviewing(pilot)
            await pilot.press("w")  # the raw view: what the model sent, escapes shown
            await until(pilot, lambda: visible(BAD_LINE) in app.query_one(StreamView).text
                        and shown_whole(app, "a\\x1b]2;PWNED\\x07b")
                        and shown_whole(app, "c\\x0dr"))
            assert obeyable(screen_lines(app)) == []
    finally:
        await server.close()


async def test_a_queued_message_is_shown_as_typed_and_never_read_as_markup(demo):
    stall = len(split_tokens(CALC_ANSWER)) // 2
    go_on = asyncio.Event()  # the first answer goes on once the queue has been seen
    server = ChatServer(replay=[CALC_ANSWER, CALC_ANSWER], faults=Faults(stall_after=stall,
                        resume=go_on, only_first=1))
    await server.start()
    try:
        app = SteerApp(demo, OpenAIChat(server.base_url, "replay"), context=["calc.py"],
                       watch_files=False, blink=False)
        async with app.run_test(size=(160, 48), notifications=True) as pilot:
            await ask(pilot, "add type hints")
            await until(pilot, lambda: app.session.streaming and app.session.turn.deltas >= stall)
            for text in ("drop the [/] token", "fix arr[i] bounds"):
                app.query_one(PromptInput).value = text
                await pilot.press("tab")
            queue = app.query_one(QueueView)
            await until(pilot, lambda: [str(s.render()) for s in queue.query("Static")] == [
                "⏳ drop the [/] token", "⏳ fix arr[i] bounds"]
                and shown_whole(app, "queued: drop the [/] token"))  # the toast, once drawn
            app.clear_notifications()  # the toasts cover the queue pane
            await until(pilot, lambda: shown_whole(app, "⏳ drop the [/] token")
                        and shown_whole(app, "⏳ fix arr[i] bounds"))
            go_on.set()
            # the answer streaming meanwhile is not cut off, and the follow-ups run after it
            await until(pilot, lambda: len(app.session.turns) == 3 and not app.session.streaming,
                        timeout=20)
            first = app.session.turns[0]
            assert first.state == "done" and "".join(first.chunks) == CALC_ANSWER
            assert [t.instruction for t in app.session.turns[1:]] == ["drop the [/] token",
                                                                      "fix arr[i] bounds"]
            assert app.is_running
    finally:
        await server.close()


async def test_a_path_with_brackets_reads_as_written_in_the_changed_on_disk_toast(tmp_path):
    root = init_repo(tmp_path / "r", {SLUG: CALC})
    answer = CALC_ANSWER.replace("calc.py", SLUG)
    server = ChatServer(replay=answer)
    await server.start()
    try:
        app = SteerApp(root, OpenAIChat(server.base_url, "replay"), context=[SLUG],
                       watch_files=True, blink=False)
        async with app.run_test(size=(160, 48), notifications=True) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            await until(pilot, lambda: app.main.live.watching)
            h2 = app.session.pending.files[SLUG].hunks[1]
            (root / SLUG).write_text(CALC.replace("    return a / b", "    return a / b  # mine"))
            await until(pilot, lambda: h2.state == HunkState.CONFLICT)
            await until(pilot, lambda: shown_whole(app, f"{SLUG} changed on disk"))
            assert shown_whole(app, f"Pending diff · {SLUG}")
    finally:
        await server.close()


async def test_a_hunk_holding_invisible_characters_is_not_edited_inline(tmp_path, monkeypatch):
    """The inline editor (a TextArea) would send them to the terminal as they are: `e` says
    so and leaves the hunk as it is ($EDITOR shows them as the editor does)."""
    monkeypatch.delenv("EDITOR", raising=False)
    monkeypatch.delenv("VISUAL", raising=False)
    root = init_repo(tmp_path / "r", FILES)
    server = ChatServer(replay=ANSWER)
    await server.start()
    try:
        app = app_for(root, server)
        async with app.run_test(size=(160, 48), notifications=True) as pilot:
            await ask(pilot, "fix it")
            await reviewing(pilot)
            h = app.query_one(DiffView).hunk
            await pilot.press("e")
            await until(pilot, lambda: shown_whole(app, f"hunk #{h.id} holds invisible characters"))
            assert app.screen is app.main and h.state == HunkState.PENDING
            assert obeyable(screen_lines(app)) == []
    finally:
        await server.close()


async def test_the_prompt_never_offers_or_draws_a_hidden_character(tmp_path):
    """`@t` in a repository holding `t<ESC>]2;PWNED<BEL>.txt`: the name is not offered (it
    cannot be typed, and drawn raw it would set the window title), and a hidden character
    that reaches the field anyway is drawn as one dimmed mark with the cursor in its cell."""
    root = init_repo(tmp_path / "r", FILES)
    server = ChatServer(replay=ANSWER)
    await server.start()
    try:
        app = app_for(root, server)
        async with app.run_test(size=(160, 48)) as pilot:
            prompt = app.query_one(PromptInput)
            await until(pilot, lambda: TITLE_NAME in prompt.files)
            prompt.focus()
            for ch in "@t":
                await pilot.press(ch)
            await pilot.pause(0.2)
            assert prompt.completion is None or not obeyable([prompt.completion])
            assert obeyable(screen_lines(app)) == []
            prompt.value = "x\x1b]2;PWNED\x07y"
            prompt.cursor_position = len(prompt.value)
            await pilot.pause(0.1)
            assert obeyable(screen_lines(app)) == []
            drawn = "".join(seg.text for seg in prompt.render_line(0))
            assert "x\ufffd]2;PWNED\ufffdy" in drawn
            assert prompt._position_to_cell(len(prompt.value)) == len(prompt.value)  # a cell each
            assert prompt.value == "x\x1b]2;PWNED\x07y"  # what is sent is what was there
    finally:
        await server.close()
