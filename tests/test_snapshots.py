"""Snapshot tests of the main screens (pytest-textual-snapshot; fixed size, no cursor blink,
frozen timings). The same scenarios render the README's screenshots (`make screenshots`).
Update after an intended change of the UI: `.venv/bin/pytest tests/test_snapshots.py
--snapshot-update`, then look at the SVGs before committing them."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.bench.screenshots import SCENARIOS, SIZE, demo_repo, scenario_app
from app.config import Settings
from app.providers.factory import build_provider
from app.ui.app import SteerApp


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_screen(scenario, snap_compare, tmp_path: Path):
    # a fixed port would collide between runs; the URL never shows on screen
    with scenario_app(scenario, demo_repo(tmp_path)) as app:
        assert snap_compare(app, terminal_size=SIZE, run_before=scenario.run)


async def _first_screen(pilot) -> None:
    from app.bench.screenshots import until

    await until(pilot, lambda: "calc.py" in pilot.app.main.live.files)
    await pilot.pause(0.1)


@pytest.mark.model  # the built-in model's server starts (warm-up) while the picture is taken
@pytest.mark.parametrize("size", [(160, 48), (80, 24)], ids=["160x48", "80x24"])
def test_first_run(size, snap_compare, tmp_path: Path, monkeypatch):
    """Nothing configured, nothing asked yet: the conversation pane teaches, names the
    built-in model a toy and says how to point steer at a real endpoint; at 80×24 too, with
    the tree folded behind its key."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the config file shows as ~/.config/…
    monkeypatch.delenv("XDG_CONFIG_HOME")
    root = demo_repo(tmp_path)
    app = SteerApp(root, build_provider(Settings(), cwd=root), watch_files=False, blink=False)
    assert snap_compare(app, terminal_size=size, run_before=_first_screen)
