"""Shared by the Pilot tests: a real loopback server streaming real Chat Completions SSE
into the real app, in a real git repository, and helpers that wait for the app."""

from __future__ import annotations

import time
from pathlib import Path

from app.bench.demo import CALC_ANSWER
from app.providers.openai_chat import OpenAIChat
from app.server.chat_server import ChatServer
from app.server.generation import Faults, split_tokens
from app.ui.app import SteerApp
from app.ui.widgets.diff_view import DiffView
from app.ui.widgets.prompt import PromptInput

SIZE = (160, 48)
# stall inside the second block, right after its line "    if b == 0:"
STALL = len(split_tokens(CALC_ANSWER[: CALC_ANSWER.index("if b == 0:") + len("if b == 0:\n")]))


async def until(pilot, cond, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the app")
        await pilot.pause(0.02)


class Rig:
    def __init__(self, root: Path, answers, rate: float = 0, faults: Faults | None = None,
                 watch: bool = False, context: tuple[str, ...] = ("calc.py",)) -> None:
        self.server = ChatServer(replay=answers, rate=rate, faults=faults)
        self.root = root
        self.watch = watch
        self.context = list(context)

    async def __aenter__(self):
        await self.server.start()
        self.app = SteerApp(self.root, OpenAIChat(self.server.base_url, "replay"),
                            context=self.context, watch_files=self.watch, blink=False)
        return self

    async def __aexit__(self, *exc):
        await self.server.close()

    @property
    def pending(self):
        return self.app.session.pending

    def hunks(self):
        return self.pending.files["calc.py"].hunks if self.pending and "calc.py" in self.pending.files else []


async def reviewing(pilot) -> None:
    """The answer is done and the user goes to the review, as a user does (the app never
    moves the focus itself): Tab from an empty prompt, Ctrl+D from a draft."""
    app = pilot.app
    diff = app.query_one(DiffView)
    await until(pilot, lambda: app.session.turn.state == "done")
    if app.focused is not diff:
        prompt = app.query_one(PromptInput)
        await pilot.press("tab" if app.focused is prompt and not prompt.value else "ctrl+d")
    await until(pilot, lambda: app.focused is diff)


async def ask(pilot, text: str) -> None:
    prompt = pilot.app.query_one(PromptInput)
    prompt.value = text
    await pilot.press("enter")


def disk(root: Path) -> str:
    return (root / "calc.py").read_text()
