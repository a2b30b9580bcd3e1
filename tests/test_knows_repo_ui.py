"""The repository map in the app: built after launch, shown on the context line, kept
current by the real file watcher; files a draft names shown and dropped with one key."""

from __future__ import annotations

import asyncio

from conftest import init_repo
from pilot import SIZE, until

from app.core.knowledge.service import Knowledge
from app.providers.openai_chat import OpenAIChat
from app.server.chat_server import ChatServer
from app.ui.app import SteerApp
from app.ui.widgets.prompt import PromptInput

FILES = {"pkg/cli.py": "def build_parser():\n    return None\n",
         "pkg/util.py": "def greet(name):\n    return name\n", "README.md": "# r\n"}


async def test_the_context_line_shows_the_map_and_named_files_one_key_drops(tmp_path):
    root = init_repo(tmp_path / "r", FILES)
    server = ChatServer(replay="nothing to change.\n")
    await server.start()
    know = Knowledge(root, cache=False, workers=0)
    app = SteerApp(root, OpenAIChat(server.base_url, "replay"), watch_files=True, blink=False,
                   knowledge=know)
    try:
        async with app.run_test(size=SIZE) as pilot:
            line = app.query_one("#context")
            await until(pilot, lambda: "map: 3 files" in line.text, timeout=30)
            prompt = app.query_one(PromptInput)
            prompt.focus()
            await pilot.press(*"greet in util.py")
            await until(pilot, lambda: "◇ pkg/util.py" in line.text)
            assert "Ctrl+N drops" in line.text
            await pilot.press("ctrl+n")
            await until(pilot, lambda: "◇ pkg/util.py" not in line.text)
            assert know.dropped == {"pkg/util.py"}
            # the watcher's events keep the map current (a real watchfiles event)
            await until(pilot, lambda: app.main.live.watching, timeout=30)
            (root / "pkg/new.py").write_text("def fresh_name():\n    pass\n")
            await until(pilot, lambda: "map: 4 files" in line.text, timeout=30)
            m = know.builder.current("fresh_name")
            assert "pkg/new.py:\n1: def fresh_name():" in m.text
            await pilot.press("enter")
            await until(pilot, lambda: len(server.stats.bodies) == 1)
            await until(pilot, lambda: app.session.turn.state == "done")
            msgs = server.stats.bodies[0]["messages"]
            assert "def greet" not in msgs[-1]["content"]  # dropped: not in the request
            assert know.dropped == set()  # for that one request
    finally:
        await server.close()
        await asyncio.to_thread(know.close)
