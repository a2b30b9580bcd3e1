"""The request's size against the model's context window: estimated, shown, and a file
that would overflow it sent as its outline or not at all, never cut silently."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import init_repo
from pilot import SIZE, Rig, ask, until

from app.core.conversation import context_budget as budgets
from app.core.conversation.session import Session
from app.core.disk.workspace import Workspace
from app.providers.openai_chat import OpenAIChat
from app.ui.dialogs.questions import ChoiceScreen

BIG = "".join(f"def function_{i}(x):\n    return x * {i}  # padding padding padding\n\n"
              for i in range(3000))  # ~200 KB: ≈60k tokens, far over an 8k window


def test_estimates_windows_and_outlines(tmp_path):
    root = init_repo(tmp_path / "r", {"big.py": BIG, "small.py": "x = 1\n"})
    ws = Workspace(root)
    assert budgets.known_window("gpt-oss-120b") == 131_072
    assert budgets.known_window("openai/gpt-oss-120b") == 131_072
    assert budgets.known_window("some-unknown-model") is None
    outline = budgets.outline(ws.snapshot("big.py"))
    assert outline[:2] == ["1: def function_0(x):", "4: def function_1(x):"] and len(outline) == 3000
    b = budgets.Budget(used=7000, window=8192, files={})
    assert b.over and not b.fits(1) and "over" in b.text()
    assert budgets.Budget(used=100, window=None, files={}).fits(10**9)  # unknown: never refuses


async def test_the_session_counts_files_as_they_would_be_sent(tmp_path):
    root = init_repo(tmp_path / "r", {"big.py": BIG, "small.py": "x = 1\n"})
    provider = OpenAIChat("http://127.0.0.1:9/v1", "m")
    provider.context_window = 8192
    session = Session(Workspace(root), provider, fmt="search_replace", context=["small.py"])
    small = session.budget("hi")
    assert not small.over and small.files["small.py"] < 20
    whole = session.files.tokens("big.py", outline=False)
    assert whole > 40_000  # the estimate sees the size
    session.files.add("big.py", outline=True)
    assert session.budget().files["big.py"] < whole / 2  # the outline is what goes
    await provider.aclose()


async def test_a_file_too_big_for_the_window_asks_outline_or_nothing(tmp_path):
    root = init_repo(tmp_path / "r", {"calc.py": "x = 1\n", "big.py": BIG})
    async with Rig(root, "Done.\n") as rig:
        app = rig.app
        app.session.provider.context_window = 8192
        async with app.run_test(size=SIZE) as pilot:
            context = app.query_one("#context")
            await until(pilot, lambda: "≈" in context.text and "of 8.2k tokens" in context.text)
            await ask(pilot, "look at @big.py please")
            await until(pilot, lambda: isinstance(app.screen, ChoiceScreen))
            assert "big.py is ≈" in app.screen.question and rig.server.stats.bodies == []
            await pilot.press("o")  # its outline
            await until(pilot, lambda: rig.server.stats.bodies)
            sent = rig.server.stats.bodies[0]["messages"][1]["content"]
            assert "big.py (outline only: 3000 of its 9000 lines" in sent
            assert "1: def function_0(x):" in sent and "return x * 1  #" not in sent
            assert "big.py (outline)" in context.text
    async with Rig(root, "Done.\n") as rig:
        app = rig.app
        app.session.provider.context_window = 8192
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "look at @big.py please")
            await until(pilot, lambda: isinstance(app.screen, ChoiceScreen))
            await pilot.press("n")  # nothing: the message goes without it
            await until(pilot, lambda: rig.server.stats.bodies)
            assert "big.py" not in app.session.context
            assert "def function_0" not in rig.server.stats.bodies[0]["messages"][1]["content"]


def test_steer_run_refuses_a_request_over_the_window_and_says_how(tmp_path):
    root = init_repo(tmp_path / "r", {"big.py": BIG})
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[1]), "PATH": "/usr/bin:/bin",
           "HOME": str(tmp_path), "STEER_CONTEXT_WINDOW": "8192"}
    out = subprocess.run([sys.executable, "-m", "app", "run", "explain", "-f", "big.py",
                          "--base-url", "http://127.0.0.1:9/v1", "--model", "m"], cwd=root,
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "--outline big.py" in out.stderr and "nothing was sent" in out.stderr
