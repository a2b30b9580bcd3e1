"""The change-set room's decisions, checked where a planted bug survived (make mutants):
replaying a session's decision records rebuilds the review they were made in (an oracle: a
second change set over the same answer, fed only what the live one told its subscribers),
accepts that fail with the path named, undo of a move and a partial undo, and the exact
messages and records. Real files in real temp git repositories; a partial undo is a real
save landing while a child process's undo writes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SRC, init_repo, sr, wait_stopped

from app.core.disk.journal import Journal, UndoRefused
from app.core.disk.workspace import Content, Workspace
from app.core.edits import rebase
from app.core.edits.formats import make_parser
from app.core.edits.hunks import HunkState
from app.core.review.change_set import ChangeSet
from app.core.review.events import Decided, Rebasing, Settled
from app.core.review.review import Review
from app.core.storage.records import RECORD, Accept, Reject, Snap, Undo

HERE = Path(__file__).resolve().parents[1]
X = "".join(f"x {i}\n" for i in range(1, 11))


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(init_repo(tmp_path / "r", {"f.txt": SRC, "x.txt": X}))


def open_answer(cs: ChangeSet, answer: str, context: list[str], fmt: str) -> None:
    pending = cs.open([cs.ws.snapshot(p).prepare() for p in context])
    parser = make_parser(fmt, frozenset(pending.bases))
    pending.feed(parser.feed(answer))
    pending.feed(parser.finish(True))
    pending.finish()


def state(review: Review) -> tuple[list, list]:
    """Every hunk as a reviewer and the model see it, and what each undo would reopen."""
    hunks = [(h.id, h.path, h.state, h.note, h.reason, h.applied, h.old, h.new, h.ancestor,
              h.base_start) for h in review.pending.hunks]
    undo = [(tx.entry_id, [(h.id, s, a, n) for h, s, a, n in tx.hunks]) for tx in review._undo]
    return hunks, undo


class Mirror:
    """A live change set, and a second one over the same answer rebuilt only from what the
    live one told its subscribers: each decision's record (through JSON, as the session's
    log keeps it) and each live rebase's disk read, replayed as a resume replays them."""

    def __init__(self, ws: Workspace, answer: str, context: list[str],
                 fmt: str = "search_replace") -> None:
        self.live, self.copy = ChangeSet(ws), ChangeSet(ws)
        self.told: list[object] = []
        self.live.subscribe(self.told.append)
        for cs in (self.live, self.copy):
            open_answer(cs, answer, context, fmt)
        self.heard: list[object] = []
        self.copy.subscribe(self.heard.append)
        assert self.live.review is not None and self.copy.review is not None
        self.review, self.again = self.live.review, self.copy.review

    def records(self) -> list:
        return [e.record for e in self.told if isinstance(e, Decided)]

    def sync(self) -> None:
        """Replay what was told since the last sync; the copy must equal the live review."""
        assert self.copy.pending is not None
        for ev in self.told:
            if isinstance(ev, Decided):
                rec = RECORD.validate_json(ev.record.model_dump_json())
                self.heard.clear()
                self.again.replay(rec)
                if isinstance(rec, Accept):
                    assert self.heard == [Settled()]
            elif isinstance(ev, Rebasing):
                snap = None if ev.snapshot is None else Snap.of(ev.snapshot).snapshot().prepare()
                rebase.apply(self.copy.pending.files[ev.path],
                             rebase.DiskRead(ev.path, snap, ev.reason))
        self.told.clear()
        assert state(self.again) == state(self.review)


def edit(ws: Workspace, name: str, old: str, new: str) -> None:
    p = ws.root / name
    p.write_text(p.read_text().replace(old, new))


ANSWER = (sr("f.txt", "line 3\n", "line three\n") + sr("f.txt", "line 7\n", "line \ud800 seven\n")
          + sr("f.txt", "line 11\n", "line eleven\n") + sr("f.txt", "line 15\n", "line fifteen\n")
          + sr("f.txt", "line 18\n", "eighteen\nand more\n") + sr("x.txt", "x 2\n", "x two\n")
          + sr("x.txt", "x 5\n", "x five\n") + sr("x.txt", "x 8\n", "x eight\n"))


def test_a_replayed_log_rebuilds_the_review_decision_by_decision(ws):
    m = Mirror(ws, ANSWER, ["f.txt", "x.txt"])
    review, journal = m.review, m.live.journal
    h1, h2, h3, h4, h5, x1, x2, x3 = review.pending.hunks
    assert [h.path for h in (h5, x1)] == ["f.txt", "x.txt"]

    review.accept([h1.id])
    assert journal.entries()[-1].label == f"hunk #{h1.id} in f.txt"
    m.sync()

    out = review.accept([h2.id])  # text the file's encoding cannot hold: a conflict, not written
    assert h2.state == HunkState.CONFLICT and "cannot be written as utf-8" in h2.note
    assert out.messages == [f"f.txt: {h2.note}; 1 hunk not written"]
    assert m.records() == [Accept(entry=None, hunks=[], conflicts=[(h2.id, h2.note)])]
    m.sync()

    review.reject([h3.id], "  not\n this ")
    review.reject([h1.id])  # accepted: nothing rejected, nothing recorded
    assert (h3.state, h3.note, h3.reason) == (HunkState.REJECTED, "", "not this")
    assert m.records() == [Reject(ids=[h3.id], reason="not this")]
    m.sync()

    edit(ws, "f.txt", "line 15\n", "line 15 mine\n")
    review.recheck("f.txt")
    assert h4.state == HunkState.CONFLICT and h4.ancestor == ["line 15"]
    review.accept([h4.id])  # a plain accept leaves a conflict alone
    m.sync()
    review.take_mine(h4.id)
    review.take_mine(h4.id)  # decided already: no second record
    review.take_mine(h2.id)  # no disk side to keep: no note
    assert (h4.state, h4.note, h4.reason) == (HunkState.REJECTED, "kept your version", "")
    assert (h2.state, h2.note, h2.reason) == (HunkState.REJECTED, "", "")
    assert m.records()[-2:] == [Reject(ids=[h4.id], mine=True), Reject(ids=[h2.id], mine=True)]
    m.sync()

    review.accept_lines(h5.id, [0, 1])  # "-line 18", "+eighteen": not "+and more"
    assert h5.applied == ["eighteen"] and h5.note.startswith("partly accepted")
    m.sync()

    plan = review.plan_hunks([x3.id])  # a save of the same lines lands before the write
    edit(ws, "x.txt", "x 8\n", "x 8 mine\n")
    out = review.commit(review.execute(plan))
    assert out.accepted == [] and out.conflicts == [x3.id]
    assert out.not_written == ["x.txt: the lines changed on disk since the request; not written"]
    (rec,) = m.records()
    assert rec.entry and rec.hunks == []  # journaled, nothing of it to undo
    m.sync()

    review.accept_all()
    assert journal.entries()[-1].label == f"accept all: hunks #{x1.id}, #{x2.id} in x.txt"
    m.sync()
    assert review.undo() == f"hunks #{x1.id}, #{x2.id} in x.txt"
    assert (ws.root / "x.txt").read_text() == X.replace("x 8\n", "x 8 mine\n")
    m.sync()
    assert review.undo() == f"hunk #{h5.id} in f.txt" and h5.state == HunkState.PENDING
    m.sync()

    review.reject([x1.id])
    review.reject_all()
    assert x1.reason == "" and x3.reason == ""
    assert m.records() == [Reject(ids=[x1.id]), Reject(ids=[h5.id, x2.id, x3.id])]
    m.sync()
    review.undo()
    m.sync()
    assert state(m.again)[1] == [] and h1.state == HunkState.PENDING
    with pytest.raises(UndoRefused) as refused:
        review.undo()
    assert str(refused.value) == "nothing to undo in this session"


def test_replay_skips_what_the_answer_no_longer_has_and_what_is_decided(ws):
    m = Mirror(ws, ANSWER, ["f.txt"])
    review = m.again  # fed by hand: records a log may hold once a resumed answer differs
    h1, h2, h3, *_ = review.pending.hunks
    review.replay(Reject(ids=[99, h1.id], reason="no"))
    assert (h1.state, h1.reason) == (HunkState.REJECTED, "no")
    review.replay(Reject(ids=[98, h3.id], mine=True))
    assert h3.state == HunkState.REJECTED
    review.replay(Accept(entry="e1", hunks=[(97, ["gone"], ""), (h1.id, ["one"], ""),
                                            (h2.id, ["two"], "edited")],
                         conflicts=[(96, "gone"), (h1.id, "late")]))
    assert (h1.state, h1.note, h1.applied) == (HunkState.REJECTED, "", None)
    assert (h2.state, h2.applied, h2.note) == (HunkState.ACCEPTED, ["two"], "edited")
    assert state(review)[1] == [("e1", [(h2.id, HunkState.PENDING, None, "")])]
    review.replay(Undo())  # an undo that reverted every file
    assert h2.state == HunkState.PENDING and not review.can_undo


def test_an_undo_done_elsewhere_reopens_every_hunk_and_replays(ws):
    m = Mirror(ws, ANSWER, ["f.txt", "x.txt"])
    m.review.accept([h.id for h in m.review.pending.hunks if h.path == "x.txt"])
    m.sync()
    Journal.for_workspace(ws).undo(ws)  # as `steer undo` does
    m.review.undo_commit()
    assert m.records() == [Undo(written=None)]
    assert all(h.state == HunkState.PENDING for h in m.review.pending.hunks)
    m.sync()


def undo_in_a_child(ws: Workspace, stop: str, save) -> None:
    """`Journal.undo` in another process, stopped before it writes `stop`: `save()` runs then."""
    code = ("import sys; from app.core.disk.workspace import Workspace; "
            "from app.core.disk.journal import Journal; ws = Workspace(sys.argv[1]); "
            "Journal.for_workspace(ws).undo(ws)")
    env = {**os.environ, "PYTHONPATH": str(HERE), "STEER_STOP_AT": f"undo:before:{stop}"}
    proc = subprocess.Popen([sys.executable, "-c", code, str(ws.root)], env=env,
                            stderr=subprocess.PIPE, text=True)
    wait_stopped(proc)
    save()
    os.kill(proc.pid, signal.SIGCONT)
    assert proc.wait(60) == 0, proc.communicate()[1]


def test_a_partial_undo_reopens_the_reverted_files_hunks_only(ws):
    m = Mirror(ws, sr("f.txt", "line 3\n", "line three\n") + sr("x.txt", "x 5\n", "x five\n"),
               ["f.txt", "x.txt"])
    review = m.review
    hf, hx = review.pending.hunks
    review.accept_all()
    m.sync()
    accepted = (ws.root / "x.txt").read_text()
    undo_in_a_child(ws, "x.txt", lambda: edit(ws, "x.txt", "x five\n", "x five!\n"))
    done = review.journal.entries()[-1]
    assert done.op == "undo" and done.written == ["f.txt"]
    assert review.undo_commit(done) == f"hunk #{hf.id} in f.txt"
    assert (hf.state, hx.state) == (HunkState.PENDING, HunkState.ACCEPTED)
    assert review.can_undo and m.records() == [Undo(written=["f.txt"])]
    m.sync()
    (ws.root / "x.txt").write_text(accepted)  # the user takes their save back: x.txt undoes
    assert review.undo() == f"hunk #{hx.id} in x.txt"
    assert hx.state == HunkState.PENDING and not review.can_undo
    assert (ws.root / "x.txt").read_text() == X
    m.sync()


MOVE = ("*** Begin Patch\n*** Update File: f.txt\n*** Move to: g.txt\n@@\n line 1\n-line 2\n+two\n"
        "*** End Patch\n")


def test_undo_of_a_move_whose_source_was_kept_reopens_its_hunks(ws):
    m = Mirror(ws, MOVE, ["f.txt"], fmt="apply_patch")
    review = m.review
    (h,) = review.pending.hunks
    plan = review.plan_file("f.txt")
    (ws.root / "f.txt").write_text(SRC + "mine\n")  # saved: the move writes g.txt, keeps f.txt
    out = review.commit(review.execute(plan))
    assert out.written == ["g.txt"] and h.state == HunkState.ACCEPTED
    m.sync()
    review.undo()  # reverts g.txt only: the move's own file
    assert m.records() == [Undo(written=["g.txt"])]
    assert h.state == HunkState.PENDING and not review.can_undo
    assert not (ws.root / "g.txt").exists() and (ws.root / "f.txt").read_text() == SRC + "mine\n"
    m.sync()


# -- an accept that cannot go: the path named, no hunk of the file written, the file kept ----
TWO = sr("f.txt", "line 3\n", "line three\n") + sr("f.txt", "line 15\n", "line fifteen\n")


def two_hunks(ws: Workspace) -> Review:
    cs = ChangeSet(ws)
    open_answer(cs, TWO, ["f.txt"], "search_replace")
    assert cs.review is not None
    return cs.review


def test_an_accept_of_a_file_deleted_since_the_request_writes_none_of_it(ws):
    review = two_hunks(ws)
    (ws.root / "f.txt").unlink()
    out = review.accept([h.id for h in review.pending.hunks])
    assert out.accepted == [] and out.conflicts == [1, 2]
    assert out.messages == ["f.txt: f.txt was deleted on disk since the request; 2 hunks not written"]
    assert not (ws.root / "f.txt").exists()


def test_an_accept_of_a_file_that_became_binary_says_the_decoders_reason(ws):
    review = two_hunks(ws)
    (ws.root / "f.txt").write_bytes(b"\0\1binary")
    out = review.accept([h.id for h in review.pending.hunks])
    assert out.accepted == [] and out.conflicts == [1, 2]
    assert out.messages == ["f.txt: f.txt is a binary file; steer does not edit binary files; "
                            "2 hunks not written"]
    assert (ws.root / "f.txt").read_bytes() == b"\0\1binary"


def test_a_file_created_on_disk_while_steer_writes_it_is_left_as_it_is(ws):
    cs = ChangeSet(ws)
    open_answer(cs, sr("n.py", "", "x = 1\ny = 2\n"), [], "search_replace")
    review = cs.review
    assert review is not None
    plan = review.plan_hunks([1])
    (ws.root / "n.py").write_text("mine = 0\n")
    out = review.commit(review.execute(plan))
    assert out.accepted == [] and out.conflicts == [1]
    assert out.messages == ["n.py: n.py was created on disk since the request; 1 hunk not written"]
    assert out.not_written == ["n.py: n.py was created on disk since the request; not written"]
    assert (ws.root / "n.py").read_text() == "mine = 0\n"


def test_an_accept_the_journal_cannot_record_says_why_once(ws, tmp_path):
    (tmp_path / "a-file").write_text("")
    cs = ChangeSet(ws, journal=Journal(tmp_path / "a-file" / "journal"))
    open_answer(cs, TWO, ["f.txt"], "search_replace")
    assert cs.review is not None
    out = cs.review.accept([1])
    assert out.conflicts == [1] and len(out.messages) == 1
    assert out.messages[0].startswith("nothing written: ")
    assert (ws.root / "f.txt").read_text() == SRC


# -- messages, labels and records --------------------------------------------------------------
def test_undo_says_when_the_journal_lost_the_accept(ws):
    review = two_hunks(ws)
    review.accept([1])
    review.journal.file.unlink()
    with pytest.raises(UndoRefused) as refused:
        review.undo()
    assert str(refused.value) == "the journal no longer holds the last accept"


async def test_each_review_undoes_its_own_accept_not_the_journals_last(ws):
    """Two change sets over one tree (variants): one journal, each undoing its own accept."""
    first = ChangeSet(ws)
    open_answer(first, TWO, ["f.txt"], "search_replace")
    other = ChangeSet.beside(first)
    open_answer(other, sr("x.txt", "x 5\n", "x five\n"), ["x.txt"], "search_replace")
    assert first.review is not None and other.review is not None
    first.review.accept([1])
    other.review.accept_all()
    first.review.undo()
    assert (ws.root / "f.txt").read_text() == SRC
    assert (ws.root / "x.txt").read_text() == X.replace("x 5\n", "x five\n")
    first.review.accept([1])
    other.review.undo()
    other.review.accept_all()  # the journal's last accept again
    assert await first.review.undo_async() == "hunk #1 in f.txt"
    assert (ws.root / "f.txt").read_text() == SRC
    assert (ws.root / "x.txt").read_text() == X.replace("x 5\n", "x five\n")


def test_no_line_picked_plans_nothing(ws):
    review = two_hunks(ws)
    plan = review.plan_lines(1, [])
    assert (plan.label, plan.writes, plan.merges, plan.decided) == ("no line of hunk #1", [], [], [])


def test_an_edited_accept_keeps_the_proposal_and_says_what_was_written(ws):
    review = two_hunks(ws)
    h = review.pending.hunk(1)
    review.accept_edited(1, ["THREE", "and more"])
    assert h.new == ["line three"] and h.applied == ["THREE", "and more"]
    assert h.note == "edited before accepting: +2 −1 written (shown as written)"


def test_reject_file_rejects_every_hunk_of_the_file_with_the_reason_given(ws):
    review = two_hunks(ws)
    assert review.reject_file("f.txt").rejected == [1, 2]
    assert [h.reason for h in review.pending.hunks] == ["", ""]
    again = two_hunks(ws)
    again.reject_file("f.txt", "not now")
    assert [h.reason for h in again.pending.hunks] == ["not now", "not now"]


def test_a_rejections_reason_is_kept_to_200_characters(ws):
    review = two_hunks(ws)
    review.reject([1], "why " * 100)
    assert review.pending.hunk(1).reason == ("why " * 50)[:200]


async def test_recheck_async_returns_the_hunks_of_every_file(ws):
    cs = ChangeSet(ws)
    open_answer(cs, TWO + sr("x.txt", "x 5\n", "x five\n"), ["f.txt", "x.txt"], "search_replace")
    assert cs.review is not None
    edit(ws, "f.txt", "line 15\n", "line 15 mine\n")
    edit(ws, "x.txt", "x 5\n", "x 5 mine\n")
    flipped = await cs.review.recheck_async(["f.txt", "x.txt"])
    assert sorted(h.id for h in flipped) == [2, 3]


# -- the change set ----------------------------------------------------------------------------
def test_a_change_set_reads_bases_through_the_resolver_it_is_given(ws, tmp_path):
    other = Workspace(init_repo(tmp_path / "other", {"f.txt": "elsewhere\n"}))
    cs = ChangeSet(ws)
    cs.open([])
    cs.read_through(other)
    assert cs.pending is not None
    parser = make_parser("search_replace", frozenset())
    cs.pending.feed(parser.feed(sr("f.txt", "elsewhere\n", "here\n")))
    cs.pending.feed(parser.finish(True))
    cs.pending.finish()
    assert [(h.old, h.new) for h in cs.pending.hunks] == [(["elsewhere"], ["here"])]
    cs.open([])  # and so does the next one
    assert cs.pending is not None
    parser = make_parser("search_replace", frozenset())
    cs.pending.feed(parser.feed(sr("f.txt", "elsewhere\n", "there\n")))
    cs.pending.feed(parser.finish(True))
    assert [(h.old, h.new) for h in cs.pending.hunks] == [(["elsewhere"], ["there"])]
    cs.close()
    assert (cs.pending, cs.review) == (None, None)


async def test_a_change_set_completes_a_torn_step(ws):
    cs = ChangeSet(ws)
    found = ws.read("f.txt")
    torn = cs.journal.begin("accept", "torn", [("f.txt", found, Content(data=b"after\n",
                                                                        mode=found.mode))])
    assert [e.id for e in await cs.recover()] == [torn.id]
    assert (ws.root / "f.txt").read_text() == "after\n"
