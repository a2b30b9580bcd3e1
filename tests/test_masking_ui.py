"""A key value in the model's answer is never drawn by the app (DESIGN rule 6): not in the
conversation as it streams (the key arrives cut across tokens, so a frame could show its
start), not in the raw view, not at the end. Pilot, a real git repository, a real loopback
server streaming at a human-visible rate; every frame's conversation text is checked."""

from __future__ import annotations

import pytest
from conftest import init_repo, sr
from pilot import ask, until

from app.core.text import masking
from app.providers.openai_chat import OpenAIChat
from app.server.chat_server import ChatServer
from app.ui.app import SteerApp
from app.ui.widgets.stream_view import StreamView

KEY = "sk-live-7Qm2Xv9Lp4Rt8Wz1Kc6Nd3Hj5Bf0Gy"
ANSWER = (f"I checked with your key {KEY} and it works.\n\nThe key was {KEY}, so:\n\n"
          + sr("calc.py", "    return 1\n", "    return 2\n") + f"\nAnd once more: {KEY}")


@pytest.fixture
def known_key(monkeypatch):
    monkeypatch.setattr(masking, "_given", {KEY})
    monkeypatch.setattr(masking, "_known", None)
    yield
    monkeypatch.setattr(masking, "_known", None)


def starts_of_key(text: str) -> list[str]:
    """Any run of 8+ characters of the key the text shows (its whole, or a start or middle)."""
    return [KEY[i:i + 8] for i in range(len(KEY) - 7) if KEY[i:i + 8] in text]


async def test_no_frame_of_the_conversation_shows_the_key_or_part_of_it(tmp_path, known_key):
    root = init_repo(tmp_path / "r", {"calc.py": "def f():\n    return 1\n"})
    server = ChatServer(replay=ANSWER, rate=40)
    await server.start()
    try:
        app = SteerApp(root, OpenAIChat(server.base_url, "replay"), context=["calc.py"],
                       watch_files=False, blink=False)
        async with app.run_test(size=(160, 48)) as pilot:
            view = app.query_one(StreamView)
            seen: list[str] = []
            await ask(pilot, "check the key")
            while app.session.turn is None or app.session.turn.live:
                seen.append(view.text)
                await pilot.pause(0.005)
            await until(pilot, lambda: view.text.count(masking.MASK) >= 3)
            seen.append(view.text)
            assert len(set(seen)) >= 3  # the answer was watched as it streamed
            assert all(not starts_of_key(t) for t in seen), [t for t in seen if starts_of_key(t)]
            assert "your key *** and it works" in view.text
            assert "once more: ***" in view.text  # the last words, held until the end, are shown
            await pilot.press("tab")  # to the review
            await pilot.press("w")  # the raw view: what the model sent, masked the same
            await until(pilot, lambda: "once more: ***" in view.text)
            assert not starts_of_key(view.text)
    finally:
        await server.close()
