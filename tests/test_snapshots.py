"""Snapshot tests of the main screens (pytest-textual-snapshot; fixed size, no cursor blink,
frozen timings). The same scenarios render the README's screenshots (`make screenshots`).
Update after an intended change of the UI: `.venv/bin/pytest tests/test_snapshots.py
--snapshot-update`, then look at the SVGs before committing them."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.bench.demo import CALC_ANSWER
from app.bench.screenshots import SCENARIOS, SIZE, demo_repo
from app.providers.openai_chat import OpenAIChat
from app.server.chat_server import ServerThread
from app.ui.app import SteerApp


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_screen(scenario, snap_compare, tmp_path: Path):
    root = demo_repo(tmp_path)
    with ServerThread(replay=CALC_ANSWER, faults=scenario.faults) as server:
        # a fixed port would collide between runs; the URL never shows on screen
        app = SteerApp(root, OpenAIChat(server.base_url, "replay"), context=["calc.py"],
                       watch_files=False, blink=False)
        assert snap_compare(app, terminal_size=SIZE, run_before=scenario.run)
