"""Line mode shows what `y` writes before it writes it, and flags a pick that leaves the
file unparsable (the `-` line of a replace pair alone, or the `+` alone)."""

from __future__ import annotations

from pilot import SIZE, Rig, ask, disk, reviewing, until

from app.bench.demo import CALC, CALC_ANSWER
from app.core.edits.hunks import HunkState


def preview(app) -> str:
    return str(app.query_one("#line-preview").render())


async def test_a_lone_minus_line_is_previewed_and_flagged_before_y(demo):
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            assert not app.query_one("#line-preview").display
            await pilot.press("v")  # line mode on hunk #1: "- def add(a, b):", "+ def add(a: ..."
            await pilot.pause(0.1)
            assert app.query_one("#line-preview").display
            text = preview(app)
            assert "def add(a: float, b: float) -> float:" not in text  # the cursor's '-' row alone
            assert "(nothing: the lines go)" in text
            assert "⚠ calc.py would no longer parse" in text and "indent" in text
            assert "⚠ the picked lines do not parse" in app.query_one("#diff-title").text
            await pilot.press("space", "space")  # both rows picked: the whole pair
            await pilot.pause(0.1)
            text = preview(app)
            assert "def add(a: float, b: float) -> float:" in text and "⚠" not in text
            assert "⚠" not in app.query_one("#diff-title").text
            assert disk(demo) == CALC  # a preview writes nothing
            await pilot.press("space")  # the '+' row off again: the lone '-'
            await pilot.press("up", "space")  # and the '-' row off, then only '+' picked
            await pilot.press("down", "space")
            await pilot.pause(0.1)
            assert app.query_one("#line-preview").display
            text = preview(app)
            assert "def add(a, b):" in text and "def add(a: float" in text  # kept, then added
            assert "⚠ calc.py would no longer parse" in text
            await pilot.press("y")  # deliberate: accepted as picked, and said again
            await until(pilot, lambda: rig.hunks()[0].state == HunkState.ACCEPTED)
            assert "def add(a, b):\ndef add(a: float, b: float) -> float:\n" in disk(demo)
            assert not app.query_one("#line-preview").display
