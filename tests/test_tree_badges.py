"""Every file with open hunks shows ●N in the tree (issue 30): the badges, thinned while an
answer streams, are all shown once it ends, also when the last frame of the answer brought
no new change. The real app, a real loopback server, a real git repository."""

from __future__ import annotations

from conftest import init_repo, sr
from pilot import SIZE, until

import app.ui.panes.files as files_pane
from app.providers.openai_chat import OpenAIChat
from app.server.chat_server import ChatServer
from app.ui.app import SteerApp
from app.ui.widgets.file_tree import FileTree
from app.ui.widgets.prompt import PromptInput

FILES = {"calc.py": "def add(a, b):\n    return a + b\n", "util.py": "def greet(n):\n    return n\n"}
ANSWER = ("Both.\n\n" + sr("calc.py", "    return a + b\n", "    return b + a\n")
          + sr("util.py", "    return n\n", "    return 'hi ' + n\n")
          + "\nSome words after the last edit, which change no file. " * 20 + "\n")


async def test_the_last_file_streamed_gets_its_badge_when_the_answer_ends(tmp_path, monkeypatch):
    # thinned as much as can be: after the first, badges wait for the answer's end
    monkeypatch.setattr(files_pane, "BADGES_EVERY", 3600.0)
    root = init_repo(tmp_path / "r", FILES)
    server = ChatServer(replay=ANSWER, rate=400)
    await server.start()
    app = SteerApp(root, OpenAIChat(server.base_url, "replay"), context=["calc.py", "util.py"],
                   watch_files=False, blink=False)
    try:
        async with app.run_test(size=SIZE) as pilot:
            prompt = app.query_one(PromptInput)
            prompt.value = "swap them"
            await pilot.press("enter")
            await until(pilot, lambda: app.session.turn is not None
                        and app.session.turn.state == "done")
            tree = app.query_one(FileTree)
            await until(pilot, lambda: tree.pending == {"calc.py": 1, "util.py": 1})
    finally:
        await server.close()
