"""Line mode shows what `y` writes before it writes it, and flags a pick that leaves the
file unparsable (the `-` line of a replace pair alone, or the `+` alone)."""

from __future__ import annotations

from pilot import Rig, ask, disk, reviewing, until

from app.bench.demo import CALC, CALC_ANSWER
from app.core.edits.hunks import HunkState
from app.ui.widgets.diff_view import DiffView
from app.ui.widgets.key_bar import KeyBar


def bar(app) -> str:
    return app.query_one(KeyBar).plain


def preview(app) -> str:
    return str(app.query_one("#line-preview").render())


def title(app) -> str:
    return app.query_one("#diff-title").text


async def test_line_mode_writes_only_the_lines_marked_and_says_so_in_every_state(demo):
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=(200, 48)) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            assert not app.query_one("#line-preview").display
            assert "Take picked" not in bar(app) and "Pick" not in bar(app)
            await pilot.press("v")  # line mode on hunk #1: "- def add(a, b):", "+ def add(a: ..."
            await pilot.pause(0.1)
            # nothing picked: nothing is written, and every label says so
            assert app.query_one("#line-preview").display
            assert "Nothing picked: y writes nothing" in preview(app)
            assert "⚠" not in preview(app) and "⚠" not in title(app)
            assert "nothing picked: Space picks" in title(app)
            keys = bar(app)
            assert "space Pick" in keys and "y Take picked" in keys and "esc Back" in keys
            assert "y Accept " not in keys
            await pilot.press("y")
            await pilot.pause(0.2)
            assert disk(demo) == CALC and rig.hunks()[0].state == HunkState.PENDING
            assert app.query_one(DiffView).line_mode  # still picking
            # the '-' row alone: the def goes, and the file would not parse
            await pilot.press("space")
            await pilot.pause(0.1)
            text = preview(app)
            assert "def add(a: float, b: float) -> float:" not in text
            assert "the picked − lines go" in text
            assert "⚠ calc.py would no longer parse" in text and "indent" in text
            assert "⚠ the picked lines do not parse" in title(app)
            assert "1 line picked" in title(app)
            await pilot.press("y")  # a first y says why and writes nothing
            await pilot.pause(0.2)
            assert disk(demo) == CALC and rig.hunks()[0].state == HunkState.PENDING
            # both rows picked: the whole pair, which parses
            await pilot.press("down", "space")
            await pilot.pause(0.1)
            text = preview(app)
            assert "def add(a: float, b: float) -> float:" in text and "⚠" not in text
            assert "⚠" not in title(app) and "2 lines picked" in title(app)
            assert disk(demo) == CALC  # a preview writes nothing
            # only the '+' row: the old line stays (it was not picked) and the new one comes in
            await pilot.press("up", "space")
            await pilot.pause(0.1)
            text = preview(app)
            assert "def add(a, b):" in text and "def add(a: float" in text  # kept, then added
            assert "⚠ calc.py would no longer parse" in text
            await pilot.press("y")  # warned (these picks are new)
            await pilot.pause(0.2)
            assert rig.hunks()[0].state == HunkState.PENDING and disk(demo) == CALC
            await pilot.press("y")  # deliberate: accepted as picked
            await until(pilot, lambda: rig.hunks()[0].state == HunkState.ACCEPTED)
            assert "def add(a, b):\ndef add(a: float, b: float) -> float:\n" in disk(demo)
            assert not app.query_one("#line-preview").display
            assert "Take picked" not in bar(app)


async def test_esc_leaves_line_mode_and_its_picks(demo):
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=(200, 48)) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            await pilot.press("v", "space", "escape")
            await pilot.pause(0.1)
            diff = app.query_one(DiffView)
            assert not diff.line_mode and not diff.picked
            assert "Take picked" not in bar(app) and "y Accept" in bar(app)
            await pilot.press("v", "y")  # back in: nothing picked again
            await pilot.pause(0.2)
            assert disk(demo) == CALC and rig.hunks()[0].state == HunkState.PENDING
