"""A redirect's leftovers (issue 30): the open hunks of an answer the user redirected are
marked "before your redirect"; Accept all leaves them (y takes one), unless the redirected
answer proposes that region again; the model is still told which of them were taken. The
engine on a real pending diff, and the real app against a loopback server."""

from __future__ import annotations

from conftest import SRC, init_repo, sr
from pilot import SIZE, STALL, Rig, ask, disk, reviewing, until

from app.bench.demo import CALC, CALC_ANSWER, SUB_ANSWER
from app.core.disk.workspace import Workspace
from app.core.edits.diff import PendingDiff
from app.core.edits.formats import make_parser
from app.core.edits.hunks import REDIRECTED, HunkState
from app.core.review.review import Review
from app.server.generation import Faults
from app.ui.widgets.diff_view import DiffView


def _turn(pending: PendingDiff, answer: str) -> None:
    parser = make_parser("search_replace", frozenset({"f.txt"}))
    pending.feed(parser.feed(answer))
    pending.feed(parser.finish(True))
    pending.finish()


def test_a_redirect_marks_the_open_hunks_before_it_and_a_new_proposal_replaces_one(tmp_path):
    ws = Workspace(init_repo(tmp_path / "r", {"f.txt": SRC}))
    pending = PendingDiff(ws, [ws.snapshot("f.txt").prepare()])
    _turn(pending, sr("f.txt", "line 3\n", "line three\n") + sr("f.txt", "line 8\n", "line 8!\n")
          + sr("f.txt", "line 12\n", "line twelve\n"))
    three, eight, twelve = pending.files["f.txt"].hunks
    review = Review(ws, pending)
    review.accept([three.id])
    pending.begin_turn(redirect=True)  # "only line 12 please"
    assert (three.redirected, eight.redirected, twelve.redirected) == ("", REDIRECTED, REDIRECTED)
    _turn(pending, sr("f.txt", "line 12\n", "line 12 (as asked)\n"))
    hunks = {h.base_start: h for h in pending.files["f.txt"].hunks}
    assert hunks[11].new == ["line 12 (as asked)"] and not hunks[11].redirected  # proposed again
    assert hunks[7] is eight and eight.warning == REDIRECTED
    out = review.accept_all()
    assert out.accepted == [hunks[11].id]  # the leftover is not taken in bulk
    text = (ws.root / "f.txt").read_text()
    assert "line three" in text and "line 12 (as asked)" in text and "line 8!" not in text
    assert review.accept([eight.id]).accepted == [eight.id]  # a deliberate accept takes it
    assert "line 8!" in (ws.root / "f.txt").read_text()
    # a follow-up (not a redirect) marks nothing
    pending.begin_turn()
    assert all(not h.redirected for h in pending.files["f.txt"].hunks if h.state == HunkState.PENDING)


async def test_accept_all_after_a_redirect_writes_only_the_redirected_answers_hunks(demo):
    faults = Faults(stall_after=STALL, only_first=1)
    async with Rig(demo, [CALC_ANSWER, SUB_ANSWER, "Thanks.\n"], faults=faults) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add hints to every function")
            await until(pilot, lambda: len(rig.hunks()) == 2 and app.session.turn.deltas >= STALL)
            await ask(pilot, "only touch sub please")
            await until(pilot, lambda: len(app.session.turns) == 2
                        and app.session.turn.state == "done")
            add = next(h for h in rig.hunks() if h.new[:1] == ["def add(a: float, b: float) -> float:"])
            sub = next(h for h in rig.hunks() if h.new[:1] == ["def sub(a: float, b: float) -> float:"])
            assert add.redirected == REDIRECTED and not sub.redirected
            await reviewing(pilot)
            diff = app.query_one(DiffView)
            diff.select(add.id)
            await pilot.pause(0.1)
            assert "before your redirect" in diff.hunk_label(add)
            assert "⚠ before your redirect" in app.query_one("#stream").text  # its card
            await pilot.press("A")
            await until(pilot, lambda: sub.state == HunkState.ACCEPTED)
            assert add.state == HunkState.PENDING
            written = disk(demo)
            assert "def sub(a: float, b: float)" in written and "def add(a, b):" in written
            diff.select(add.id)
            await pilot.press("y")  # deliberate: taken
            await until(pilot, lambda: add.state == HunkState.ACCEPTED)
            assert "def add(a: float, b: float)" in disk(demo)
            await pilot.press("tab")
            await ask(pilot, "thanks")
            await until(pilot, lambda: len(rig.server.stats.bodies) == 3)
            told = rig.server.stats.bodies[2]["messages"][-1]["content"]
            assert "accepted" in told and "calc.py line 4" in told and "calc.py line 8" in told
            assert disk(demo) != CALC
