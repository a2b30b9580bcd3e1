"""The app in step with the working tree and git: real watcher, real processes editing
files and running git beside a real stream from the loopback server."""

from __future__ import annotations

import subprocess
import sys

from conftest import git
from pilot import SIZE, Rig, ask, disk, reviewing, until

from app.bench.demo import CALC, CALC_ANSWER
from app.core.edits.hunks import HunkState
from app.ui.widgets.diff_view import DiffView
from app.ui.widgets.file_tree import FileTree


def outside(root, code: str) -> None:
    """Another process changes the repository (an editor, a formatter, a terminal)."""
    subprocess.run([sys.executable, "-c", code], cwd=root, check=True)


def edit(root, old: str, new: str) -> None:
    outside(root, f"import pathlib; p = pathlib.Path('calc.py'); "
                  f"p.write_text(p.read_text().replace({old!r}, {new!r}))")


async def settled(pilot) -> None:
    await reviewing(pilot)
    await until(pilot, lambda: pilot.app.main.live.watching)


async def test_an_edit_elsewhere_moves_the_hunks_and_they_still_apply(demo):
    async with Rig(demo, CALC_ANSWER, watch=True) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await settled(pilot)
            h1, h2, h3 = rig.hunks()
            edit(demo, '"""A tiny calculator."""\n', '"""A tiny calculator."""\nimport math\n\n')
            await until(pilot, lambda: h1.base_start == 5)  # two lines further down, same id
            assert [h.state for h in (h1, h2, h3)] == [HunkState.PENDING] * 3
            diff = app.query_one(DiffView)
            await until(pilot, lambda: any(r.kind == "hunk" and r.hunk is h1 and r.old_no == 6
                                           for r in diff.rows))  # the pane shows the new numbers
            await pilot.press("A")
            await until(pilot, lambda: h3.state == HunkState.ACCEPTED)
            text = disk(demo)
            assert "import math" in text and "def add(a: float, b: float) -> float:" in text
            assert "def main() -> None:" in text


async def test_an_edit_inside_a_hunk_is_a_conflict_and_keep_mine_keeps_it(demo):
    async with Rig(demo, CALC_ANSWER, watch=True) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await settled(pilot)
            h2 = rig.hunks()[1]
            edit(demo, "def div(a, b):", "def div(a, b):  # mine")
            await until(pilot, lambda: h2.state == HunkState.CONFLICT)
            assert h2.old == ["def div(a, b):  # mine"] and h2.new[0].startswith("def div(a: float")
            diff = app.query_one(DiffView)
            diff.select(h2.id)
            await pilot.press("y")  # a plain accept never writes over the user's line
            await pilot.pause(0.2)
            assert h2.state == HunkState.CONFLICT and "# mine" in disk(demo)
            await pilot.press("m")
            await until(pilot, lambda: h2.state == HunkState.REJECTED)
            assert "def div(a, b):  # mine" in disk(demo) and "ZeroDivisionError" not in disk(demo)


async def test_take_theirs_writes_the_proposal_over_the_users_lines(demo):
    async with Rig(demo, CALC_ANSWER, watch=True) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await settled(pilot)
            h2 = rig.hunks()[1]
            edit(demo, "def div(a, b):", "def div(a, b):  # mine")
            await until(pilot, lambda: h2.state == HunkState.CONFLICT)
            app.query_one(DiffView).select(h2.id)
            await pilot.press("T")
            await until(pilot, lambda: h2.state == HunkState.ACCEPTED)
            assert "# mine" not in disk(demo) and "ZeroDivisionError" in disk(demo)


async def test_git_in_another_terminal_shows_in_the_app(demo):
    async with Rig(demo, CALC_ANSWER, watch=True) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            tree = app.query_one(FileTree)
            await until(pilot, lambda: app.main.branch == "main" and "main" in app.screen.sub_title)
            await until(pilot, lambda: app.main.live.watching)
            (demo / "README.md").write_text("# Demo\n\nchanged\n")
            await until(pilot, lambda: tree.git.get("README.md") == ("", "M"))  # unstaged
            git(demo, "add", "README.md")
            await until(pilot, lambda: tree.git.get("README.md") == ("M", ""))  # staged
            git(demo, "commit", "-qm", "readme")
            await until(pilot, lambda: "README.md" not in tree.git)
            git(demo, "checkout", "-qb", "feature")
            await until(pilot, lambda: app.main.branch == "feature" and "feature" in app.screen.sub_title)
            del rig


async def test_stage_exactly_the_accepted_hunk_then_commit_from_the_app(demo):
    async with Rig(demo, CALC_ANSWER, watch=True) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await settled(pilot)
            h1 = rig.hunks()[0]
            edit(demo, "    main()\n", "    main()  # my own change, not to be staged\n")
            await until(pilot, lambda: "my own change" in app.query_one(FileTree).label("calc.py")
                        or app.query_one(FileTree).git.get("calc.py") == ("", "M"))
            await pilot.press("y")
            await until(pilot, lambda: h1.state == HunkState.ACCEPTED)
            await pilot.press("S")
            await until(pilot, lambda: git(demo, "diff", "--cached").strip() != "")
            staged = git(demo, "diff", "--cached")
            assert "+def add(a: float, b: float) -> float:" in staged
            assert "my own change" not in staged  # the user's change stays unstaged
            assert "my own change" in git(demo, "diff")
            await pilot.press("C")
            await until(pilot, lambda: app.screen.id != "main-screen" and app.screen.query("#commit-message"))
            app.screen.query_one("#commit-message").text = "Type hints for add"
            await pilot.press("ctrl+s")
            await until(pilot, lambda: "Type hints for add" in git(demo, "log", "-1", "--format=%s"))
            assert git(demo, "show", "HEAD", "--stat").count("calc.py") == 1


async def test_d_shows_what_git_sees(demo):
    async with Rig(demo, CALC_ANSWER, watch=True) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await settled(pilot)
            await pilot.press("y")  # now the working tree differs from HEAD
            await until(pilot, lambda: rig.hunks()[0].state == HunkState.ACCEPTED)
            diff = app.query_one(DiffView)
            await pilot.press("d")
            await until(pilot, lambda: any(r.kind == "add" and "a: float" in r.text for r in diff.rows)
                        and diff.fd is None)
            assert "Working tree vs HEAD" in app.query_one("#diff-title").text
            assert diff.hunk is None  # read-only: nothing to accept here
            await pilot.press("d")
            await until(pilot, lambda: any("no differences" in r.text for r in diff.rows))
            await pilot.press("d")  # back to the pending diff
            await until(pilot, lambda: diff.fd is not None)
            assert CALC != disk(demo)
