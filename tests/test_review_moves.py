"""Where the review's cursor goes, as a reviewer meets it: on to the next file in the tree's
order after a file's last decision, the cursor always on screen (k, g, G), a file never
opened scrolled sideways, and the commit dialog's Enter."""

from __future__ import annotations

from conftest import git, init_repo
from pilot import SIZE, Rig, ask, reviewing, until

from app.core.edits.hunks import HunkState
from app.ui.widgets.diff_view import DiffView

FILES = {"zeta.py": "z = 1\n", "alpha.py": "a = 1\n", "pkg/mid.py": "m = 1\n", "README.md": "# r\n"}


def sr(path: str, old: str, new: str) -> str:
    return f"{path}\n```\n<<<<<<< SEARCH\n{old}=======\n{new}>>>>>>> REPLACE\n```\n"


# written in an order that is neither the tree's nor the alphabet's
THREE = sr("zeta.py", "z = 1\n", "z = 2\n") + sr("alpha.py", "a = 1\n", "a = 2\n") + \
    sr("pkg/mid.py", "m = 1\n", "m = 2\n")


async def test_after_a_files_last_hunk_the_cursor_goes_to_the_next_file_in_tree_order(tmp_path):
    root = init_repo(tmp_path / "r", FILES)
    async with Rig(root, THREE, context=("zeta.py", "alpha.py", "pkg/mid.py")) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "bump them")
            await reviewing(pilot)
            review = app.main.review
            seen = []
            for _ in range(3):
                path = review.selected
                seen.append(path)
                await pilot.press("y")
                await until(pilot, lambda p=path: app.session.pending.files[p].hunks[0].state
                            == HunkState.ACCEPTED)
                await pilot.pause(0.05)
            # the review starts at the answer's first (zeta.py); then the tree's order, which
            # lists pkg/ first (folders first), then alpha.py: past zeta.py it wraps around
            assert seen == ["zeta.py", "pkg/mid.py", "alpha.py"], seen
            assert (root / "zeta.py").read_text() == "z = 2\n"


TALL_OLD = "".join(f"x{i} = {i}\n" for i in range(60))
TALL = sr("tall.py", "x0 = 0\n", "x0 = 'zero'\n") + sr("tall.py", TALL_OLD[len("x0 = 0\n"):],
                                                        TALL_OLD[len("x0 = 0\n"):].replace(" = ", " == "))


def header_on_screen(diff: DiffView) -> bool:
    row = diff._hunk_rows[diff.hunk.id]
    top = int(diff.scroll_offset.y)
    return top <= row < top + diff.scrollable_content_region.height


async def test_k_g_and_G_keep_the_cursor_on_screen(tmp_path):
    root = init_repo(tmp_path / "r", {"tall.py": TALL_OLD, "z.py": "z = 1\n"})
    answer = TALL + sr("z.py", "z = 1\n", "z = 2\n")
    async with Rig(root, answer, context=("tall.py", "z.py")) as rig:
        app = rig.app
        async with app.run_test(size=(80, 24)) as pilot:
            await ask(pilot, "change it")
            await reviewing(pilot)
            diff = app.query_one(DiffView)
            await pilot.press("G")  # the last hunk: taller than the view
            await pilot.pause(0.05)
            assert diff.hunk is diff.hunks[-1] and header_on_screen(diff)
            await pilot.press("k")
            await pilot.pause(0.05)
            assert diff.hunk is diff.hunks[0] and header_on_screen(diff)
            await pilot.press("j", "g")
            await pilot.pause(0.05)
            assert diff.hunk is diff.hunks[0] and header_on_screen(diff)
            await pilot.press("G", "j")  # past the last hunk: the next file
            await until(pilot, lambda: app.main.review.selected == "z.py")
            await pilot.press("k")  # back into tall.py, onto its last hunk
            await until(pilot, lambda: app.main.review.selected == "tall.py")
            await pilot.pause(0.1)
            assert diff.hunk is diff.hunks[-1] and header_on_screen(diff)
            del rig


WIDE = "value = compute(" + ", ".join(f"argument_{i}" for i in range(12)) + ")\n"


async def test_the_diff_never_opens_scrolled_sideways_at_80_columns(tmp_path):
    root = init_repo(tmp_path / "r", {"wide.py": WIDE})
    answer = sr("wide.py", WIDE, WIDE.replace("argument_11", "argument_eleven"))
    async with Rig(root, answer, context=("wide.py",)) as rig:
        app = rig.app
        async with app.run_test(size=(80, 24)) as pilot:
            await ask(pilot, "rename")
            await reviewing(pilot)
            diff = app.query_one(DiffView)
            await pilot.pause(0.1)
            assert diff.hscroll == 0  # opened at column 0, though the change is far right
            del rig


async def test_enter_commits_a_one_line_message_and_ctrl_j_adds_a_line(demo):
    from app.bench.demo import CALC_ANSWER

    async with Rig(demo, CALC_ANSWER, watch=True) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            await until(pilot, lambda: app.main.live.watching)
            await pilot.press("y")
            await until(pilot, lambda: rig.hunks()[0].state == HunkState.ACCEPTED)
            git(demo, "add", "calc.py")
            await pilot.press("C")
            await until(pilot, lambda: app.screen.query("#commit-message"))
            area = app.screen.query_one("#commit-message")
            await pilot.press("enter")  # empty: nothing committed, said
            await pilot.pause(0.2)
            assert app.screen.query("#commit-message")
            assert "type a message first" in str(app.screen.query_one("#commit-result").render())
            for ch in "Hints":
                await pilot.press(ch)
            await pilot.press("ctrl+j")  # a second line: Enter now adds lines
            for ch in "body":
                await pilot.press(ch)
            await pilot.press("enter")
            assert area.text == "Hints\nbody\n" and app.screen.query("#commit-message")
            area.text = "One line"
            area.move_cursor((0, len("One line")))
            await pilot.press("enter")  # one line: Enter commits it
            await until(pilot, lambda: git(demo, "log", "-1", "--format=%s").strip() == "One line")
            assert not app.screen.query("#commit-message")
