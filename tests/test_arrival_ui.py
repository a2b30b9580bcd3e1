"""A conflict found at arrival, as the user meets it in the app: both sides on screen, the
conflict keys in the key bar, and `e` then Ctrl+S writes the merge the user typed (issue 20:
it used to throw the edit away and mark the conflict again). Real app, real loopback
server, a second process saving the file while the answer streams."""

from __future__ import annotations

import asyncio
import subprocess
import sys

from pilot import SIZE, Rig, ask, disk, reviewing, until
from test_review_ui import screen_text

from app.bench.demo import CALC, CALC_ANSWER
from app.core.edits.hunks import HunkState
from app.server.generation import Faults, split_tokens
from app.ui.dialogs.hunk_editor import HunkEditor

# stall before the third block: the user saves `main` while the answer is on `div`
BEFORE_MAIN = len(split_tokens(CALC_ANSWER[: CALC_ANSWER.index("def main():\n    print")]))
MINE = CALC.replace("def main():\n", "def main():  # mine\n")


async def test_a_conflict_at_arrival_shows_both_sides_and_e_saves_the_merge(demo):
    go_on = asyncio.Event()  # the stall ends once the user's save is made, however long that took
    async with Rig(demo, CALC_ANSWER, faults=Faults(stall_after=BEFORE_MAIN, resume=go_on)) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await until(pilot, lambda: len(rig.hunks()) >= 2 and
                        all(h.state == HunkState.PENDING for h in rig.hunks()))
            subprocess.run([sys.executable, "-c", "import sys, pathlib; "
                            "pathlib.Path(sys.argv[1]).write_text(sys.argv[2])",
                            str(demo / "calc.py"), MINE], check=True)
            go_on.set()
            await until(pilot, lambda: app.session.turn.state == "done" and len(rig.hunks()) == 3
                        and rig.hunks()[2].state == HunkState.CONFLICT)
            h = rig.hunks()[2]  # a conflict before any key, holding both sides
            assert h.old == ["def main():  # mine"] and h.new == ["def main() -> None:"]
            await reviewing(pilot)
            await pilot.press("j", "j")
            await until(pilot, lambda: "your lines on disk" in screen_text(app))
            text = screen_text(app)
            assert "Keep mine" in text and "Take theirs" in text  # the key bar offers m / T
            await pilot.press("e")
            await until(pilot, lambda: isinstance(app.screen, HunkEditor))
            app.screen.area.load_text("def main() -> None:  # mine")
            await pilot.press("ctrl+s")
            await until(pilot, lambda: h.state == HunkState.ACCEPTED)
            assert disk(demo) == CALC.replace(
                "def main():\n", "def main() -> None:  # mine\n")
            assert h.note.startswith("edited before accepting")
