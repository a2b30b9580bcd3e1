"""Review: accepting, rejecting, partial accepts, 3-way rebase against edits made on disk
meanwhile, the journal and undo. Real files in real temp git repositories."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SRC, init_repo, sr, stream
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.disk.journal import Journal, UndoRefused
from app.core.disk.workspace import Workspace
from app.core.edits.diff import PendingDiff
from app.core.edits.formats import make_parser
from app.core.edits.hunks import HunkState
from app.core.review.review import Review

TWO_EDITS = sr("f.txt", "line 3\n", "line three\n") + sr("f.txt", "line 15\n", "line fifteen\n")


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(init_repo(tmp_path / "r", {"f.txt": SRC}))


def read(ws: Workspace, name: str = "f.txt") -> str:
    return (ws.root / name).read_text()


def test_nothing_is_written_until_accept_then_exactly_the_hunk(ws):
    pending = stream(ws, TWO_EDITS, context=["f.txt"])
    assert read(ws) == SRC
    h1, h2 = pending.files["f.txt"].hunks
    review = Review(ws, pending)
    out = review.accept([h1.id])
    assert out.accepted == [h1.id] and out.written == ["f.txt"]
    assert read(ws) == SRC.replace("line 3\n", "line three\n")
    review.reject([h2.id])
    assert h2.state == HunkState.REJECTED and read(ws) == SRC.replace("line 3\n", "line three\n")


def test_user_edit_elsewhere_rebases_and_user_edit_in_region_conflicts(ws):
    pending = stream(ws, TWO_EDITS, context=["f.txt"])
    h1, h2 = pending.files["f.txt"].hunks
    mine = SRC.replace("line 1\n", "line 1\nmy own line\n").replace("line 15\n", "line 15 (mine)\n")
    (ws.root / "f.txt").write_text(mine)
    review = Review(ws, pending)
    out = review.accept_all()
    assert out.accepted == [h1.id] and out.conflicts == [h2.id]
    # (rebased before the accept planned: the conflict shows both sides, not a stale `−` line)
    assert h2.state == HunkState.CONFLICT and "on disk too" in h2.note
    assert (h2.old, h2.new, h2.ancestor) == (["line 15 (mine)"], ["line fifteen"], ["line 15"])
    assert read(ws) == mine.replace("line 3\n", "line three\n")  # my edits both survive


def test_recheck_makes_a_conflict_and_back(ws):
    pending = stream(ws, TWO_EDITS, context=["f.txt"])
    h1, h2 = pending.files["f.txt"].hunks
    review = Review(ws, pending)
    (ws.root / "f.txt").write_text(SRC.replace("line 14\n", "line 14 edited\n"))
    assert review.recheck("f.txt") == [h2]
    assert h2.state == HunkState.CONFLICT and h1.state == HunkState.PENDING
    (ws.root / "f.txt").write_text(SRC)  # the user undoes their edit: no conflict after all
    review.recheck("f.txt")
    assert h2.state == HunkState.PENDING and (h2.base_start, h2.old, h2.new) == (
        14, ["line 15"], ["line fifteen"])


def test_line_mode_writes_exactly_the_chosen_lines(ws):
    answer = sr("f.txt", "line 5\nline 6\n", "five\nsix\n")
    pending = stream(ws, answer, context=["f.txt"])
    (h,) = pending.files["f.txt"].hunks
    assert (h.old, h.new) == (["line 5", "line 6"], ["five", "six"])
    # rows: 0 "-line 5", 1 "-line 6", 2 "+five", 3 "+six": remove line 6, add "six"
    Review(ws, pending).accept_lines(h.id, [1, 3])
    assert read(ws) == SRC.replace("line 6\n", "six\n")
    assert h.state == HunkState.ACCEPTED and h.applied == ["line 5", "six"] and "partly" in h.note


def test_edit_a_hunk_before_accepting(ws):
    pending = stream(ws, sr("f.txt", "line 2\n", "two\n"), context=["f.txt"])
    (h,) = pending.files["f.txt"].hunks
    Review(ws, pending).accept_edited(h.id, ["TWO", "and more"])
    assert read(ws) == SRC.replace("line 2\n", "TWO\nand more\n")


def test_undo_restores_and_refuses_when_the_region_changed(ws):
    pending = stream(ws, TWO_EDITS, context=["f.txt"])
    review = Review(ws, pending)
    review.accept_all()
    after = read(ws)
    review.undo()
    assert read(ws) == SRC and all(h.state == HunkState.PENDING for h in pending.hunks)
    review.accept_all()
    (ws.root / "f.txt").write_text(after.replace("line three\n", "line three!\n"))
    with pytest.raises(UndoRefused, match="changed on disk"):
        review.undo()
    assert read(ws) == after.replace("line three\n", "line three!\n")  # nothing written


def test_undo_keeps_user_edits_made_elsewhere(ws):
    pending = stream(ws, TWO_EDITS, context=["f.txt"])
    Review(ws, pending).accept_all()
    (ws.root / "f.txt").write_text(read(ws).replace("line 9\n", "line 9 mine\n"))
    Journal.for_workspace(ws).undo(ws)
    assert read(ws) == SRC.replace("line 9\n", "line 9 mine\n")


def test_format_and_mode_are_kept(tmp_path):
    raw = b"\xef\xbb\xbfa\r\nb\r\nc"  # BOM, CRLF, no final newline
    root = init_repo(tmp_path / "r", {"w.txt": raw})
    os.chmod(root / "w.txt", 0o755)
    ws = Workspace(root)
    pending = stream(ws, sr("w.txt", "b\n", "B\nB2\n"), context=["w.txt"])
    Review(ws, pending).accept_all()
    assert (root / "w.txt").read_bytes() == b"\xef\xbb\xbfa\r\nB\r\nB2\r\nc"
    assert stat.S_IMODE(os.stat(root / "w.txt").st_mode) == 0o755


def test_create_and_delete_and_move_files(ws):
    answer = ("*** Begin Patch\n*** Add File: new/dir/n.py\n+x = 1\n*** Delete File: f.txt\n"
              "*** End Patch\n")
    pending = stream(ws, answer, fmt="apply_patch")
    assert not (ws.root / "new").exists()
    review = Review(ws, pending)
    review.accept_all()
    assert (ws.root / "new/dir/n.py").read_text() == "x = 1\n" and not (ws.root / "f.txt").exists()
    review.undo()
    assert not (ws.root / "new/dir/n.py").exists() and read(ws) == SRC

    moved = stream(ws, "*** Begin Patch\n*** Update File: f.txt\n*** Move to: g.txt\n@@\n line 1\n"
                   "-line 2\n+two\n*** End Patch\n", fmt="apply_patch")
    fd = moved.files["f.txt"]
    assert fd.move_to == "g.txt"
    Review(ws, moved).accept_file("f.txt")
    assert not (ws.root / "f.txt").exists()
    assert (ws.root / "g.txt").read_text() == SRC.replace("line 2\n", "two\n")


def test_search_replace_can_create_a_file(ws):
    pending = stream(ws, sr("docs/new.md", "", "# New\n"))
    fd = pending.files["docs/new.md"]
    assert fd.created and [h.new for h in fd.hunks] == [["# New"]]
    Review(ws, pending).accept_all()
    assert (ws.root / "docs/new.md").read_text() == "# New\n"


def test_malformed_edit_is_reported_and_the_others_still_apply(ws):
    answer = sr("f.txt", "no such line\n", "x\n") + sr("f.txt", "line 7\n", "seven\n")
    pending = stream(ws, answer, context=["f.txt"])
    assert len(pending.errors) == 1 and "not found" in pending.errors[0].message
    Review(ws, pending).accept_all()
    assert read(ws) == SRC.replace("line 7\n", "seven\n")


def test_ambiguous_search_is_refused(tmp_path):
    ws = Workspace(init_repo(tmp_path / "r", {"d.txt": "x\ny\nx\n"}))
    pending = stream(ws, sr("d.txt", "x\n", "z\n"), context=["d.txt"])
    assert "2 times" in pending.errors[0].message and not pending.hunks


def test_whitespace_tolerant_match_keeps_file_indentation(tmp_path):
    ws = Workspace(init_repo(tmp_path / "r", {"i.py": "def f():\n    a = 1\n    return a\n"}))
    pending = stream(ws, sr("i.py", "  a = 1  \n  return a\n", "    a = 2\n    return a\n"),
                     context=["i.py"])
    Review(ws, pending).accept_all()
    assert (ws.root / "i.py").read_text() == "def f():\n    a = 2\n    return a\n"


def test_interrupted_answer_keeps_complete_hunks_and_marks_the_last(ws):
    answer = sr("f.txt", "line 3\n", "line three\n") + "f.txt\n```\n<<<<<<< SEARCH\nline 10\n=======\nten\nten b"
    pending = stream(ws, answer, context=["f.txt"], complete=False)
    h1, h2 = pending.files["f.txt"].hunks
    assert h1.state == HunkState.PENDING and not h1.incomplete
    # the half-written last line is dropped (not what the model meant to write), and
    # line 10 is not deleted: an unfinished replacement only inserts what has arrived
    assert h2.incomplete and h2.new == ["ten"] and h2.old == []
    out = Review(ws, pending).accept_all()
    assert out.accepted == [h1.id]  # bulk accepts skip the incomplete hunk
    assert read(ws) == SRC.replace("line 3\n", "line three\n")


def test_accept_while_later_hunks_stream_and_ids_never_change(ws):
    pending = PendingDiff(ws, [ws.snapshot("f.txt").prepare()])
    parser = make_parser("search_replace")
    first, second = sr("f.txt", "line 3\n", "line three\n"), sr("f.txt", "line 15\n", "line fifteen\n")
    pending.feed(parser.feed(first + second[:-20]))  # the second block is mid-REPLACE
    h1, h2 = pending.files["f.txt"].hunks
    assert h1.state == HunkState.PENDING and h2.state == HunkState.STREAMING
    review = Review(ws, pending)
    assert review.accept([h2.id]).accepted == []  # a streaming hunk cannot be accepted yet
    assert review.accept([h1.id]).accepted == [h1.id]
    pending.feed(parser.feed(second[-20:]))
    pending.feed(parser.finish())
    pending.finish()
    assert [h.id for h in pending.files["f.txt"].hunks] == [h1.id, h2.id]
    review.accept([h2.id])
    assert read(ws) == SRC.replace("line 3\n", "line three\n").replace("line 15\n", "line fifteen\n")


def test_a_new_answer_supersedes_undecided_edits_but_not_decided_ones(ws):
    pending = stream(ws, TWO_EDITS, context=["f.txt"])
    h1, h2 = pending.files["f.txt"].hunks
    Review(ws, pending).accept([h1.id])
    pending.begin_turn()
    parser = make_parser("search_replace")
    pending.feed(parser.feed(sr("f.txt", "line 15\n", "LINE 15\n") + sr("f.txt", "line 3\n", "3!\n")))
    pending.feed(parser.finish())
    pending.finish()
    hunks = pending.files["f.txt"].hunks
    assert h1 in hunks and h2 not in hunks and h2.id in pending.dropped
    assert [h.new for h in hunks] == [["line three"], ["LINE 15"]]
    assert len(pending.errors) == 1  # line 3 belongs to a decided hunk now


def test_journal_survives_kill_9(tmp_path):
    root = init_repo(tmp_path / "r", {"f.txt": SRC})
    script = f"""
import sys, time
sys.path.insert(0, {str(Path(__file__).parent)!r})
from app.core.disk.workspace import Workspace
from app.core.review.review import Review
from conftest import stream
ws = Workspace({str(root)!r})
answer = "".join("f.txt\\n<<<<<<< SEARCH\\nline %d\\n=======\\nL%d\\n>>>>>>> REPLACE\\n" % (i, i) for i in range(1, 21, 2))
pending = stream(ws, answer, context=["f.txt"])
review = Review(ws, pending)
for h in pending.hunks:
    review.accept([h.id])
    print(h.id, flush=True)
time.sleep(60)
"""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).parent.parent)
    seen = [proc.stdout.readline() for _ in range(4)]
    proc.kill()  # SIGKILL: no cleanup, no flush
    proc.wait()
    assert all(seen)
    text = (root / "f.txt").read_text()
    assert all(f"L{i}\n" in text for i in (1, 3, 5, 7))
    ws = Workspace(root)
    journal = Journal.for_workspace(ws)
    assert journal.dir.is_relative_to(root / ".git")
    accepts = [e for e in journal.entries() if e.op == "accept"]
    assert len(accepts) >= 4
    while journal.last_undoable() is not None:
        journal.undo(ws)
    assert (root / "f.txt").read_text() == SRC


def test_undo_without_git_uses_the_state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "u.txt").write_text("a\nb\n")
    ws = Workspace(plain)
    pending = stream(ws, sr("u.txt", "a\n", "A\n"), context=["u.txt"])
    Review(ws, pending).accept_all()
    assert Journal.for_workspace(ws).dir.is_relative_to(tmp_path / "state")
    Journal.for_workspace(ws).undo(ws)
    assert (plain / "u.txt").read_text() == "a\nb\n"
    with pytest.raises(UndoRefused, match="nothing to undo"):
        Journal.for_workspace(ws).undo(ws)


def test_a_new_answer_clears_the_files_notes_of_the_last_one(ws):
    """An interrupted answer leaves a note on its file; a redirect or follow-up is a new
    answer, and the note must not hang over it (it stays in the history)."""
    answer = "f.txt\n```\n" + SRC.replace("line 3\n", "line three\n")[:40]
    pending = stream(ws, answer, fmt="whole", context=["f.txt"], complete=False)
    fd = pending.files["f.txt"]
    assert fd.errors and "stopped" in fd.errors[0]
    pending.begin_turn()
    assert fd.errors == []
    assert [e.turn for e in pending.errors] == [0] and pending.turn == 1


# -- refused edits, writes that race the plan, the async API ----------------------------------
def test_an_ambiguous_edit_is_refused_whole_and_the_file_untouched(tmp_path):
    doc = "Title\n=======\n\nold text\n"
    ws = Workspace(init_repo(tmp_path / "r", {"i.rst": doc}))
    answer = sr("i.rst", "Title\n=======\nold text\n", "Title\n=======\nnew text\n")
    pending = stream(ws, answer, context=["i.rst"])
    assert not pending.hunks and "ambiguous" in pending.errors[0].message
    Review(ws, pending).accept_all()
    assert (ws.root / "i.rst").read_text() == doc


def test_a_save_between_plan_and_write_is_merged_and_journaled(ws):
    """The UI plans on its loop and writes in a thread: a save in between is seen by the
    compare-and-swap; the hunk is rebased onto it and undo gives the save back."""
    pending = stream(ws, TWO_EDITS, context=["f.txt"])
    review = Review(ws, pending)
    plan = review.plan_all()
    mine = SRC.replace("line 9\n", "line 9 mine\n")
    (ws.root / "f.txt").write_text(mine)
    out = review.commit(review.execute(plan))
    assert out.ok and len(out.accepted) == 2
    assert read(ws) == mine.replace("line 3\n", "line three\n").replace("line 15\n", "line fifteen\n")
    review.undo()
    assert read(ws) == mine


def test_a_save_of_the_same_lines_between_plan_and_write_makes_that_hunk_a_conflict(ws):
    pending = stream(ws, TWO_EDITS, context=["f.txt"])
    h1, h2 = pending.files["f.txt"].hunks
    review = Review(ws, pending)
    plan = review.plan_all()
    mine = SRC.replace("line 15\n", "line 15 mine\n")
    (ws.root / "f.txt").write_text(mine)
    out = review.commit(review.execute(plan))
    assert out.accepted == [h1.id] and out.conflicts == [h2.id]
    assert h2.state == HunkState.CONFLICT and "changed on disk" in out.messages[0]
    # rebased onto the save at once: the conflict shows both sides (issue 20)
    assert (h2.old, h2.new, h2.ancestor) == (["line 15 mine"], ["line fifteen"], ["line 15"])
    assert read(ws) == mine.replace("line 3\n", "line three\n")


def test_a_lone_surrogate_in_the_answer_refuses_that_hunk_only(ws):
    answer = sr("f.txt", "line 3\n", "line \ud800 three\n") + sr("f.txt", "line 15\n", "fifteen\n")
    pending = stream(ws, answer, context=["f.txt"])
    h1, h2 = pending.files["f.txt"].hunks
    out = Review(ws, pending).accept_all()
    assert out.accepted == [h2.id] and out.conflicts == [h1.id] and "surrogate" in h1.note
    assert read(ws) == SRC.replace("line 15\n", "fifteen\n")


async def test_async_apply_undo_and_recheck(ws):
    pending = stream(ws, TWO_EDITS, context=["f.txt"])
    h1, h2 = pending.files["f.txt"].hunks
    review = Review(ws, pending)
    out = await review.apply_async(review.plan_hunks([h1.id]))
    assert out.accepted == [h1.id] and read(ws) == SRC.replace("line 3\n", "line three\n")
    (ws.root / "f.txt").write_text(read(ws).replace("line 14\n", "line 14 mine\n"))
    assert await review.recheck_async(["f.txt"]) == [h2]
    assert h2.state == HunkState.CONFLICT  # the live rebase holds both sides
    label = await review.undo_async()
    assert f"#{h1.id}" in label and h1.state == HunkState.PENDING
    assert read(ws) == SRC.replace("line 14\n", "line 14 mine\n")
    # accepted again, it lands next to the user's line: the rebase and the undo agree
    out = await review.apply_async(review.plan_hunks([h1.id]))
    assert out.accepted == [h1.id]
    assert read(ws) == SRC.replace("line 3\n", "line three\n").replace("line 14\n", "line 14 mine\n")


async def test_in_app_undo_reaches_the_journal_like_steer_undo(ws):
    """A review with nothing of its own to undo reverts the journal's last accept (made by
    another review, or another steer process) instead of saying there is nothing."""
    Review(ws, stream(ws, TWO_EDITS, context=["f.txt"])).accept_all()
    fresh = Review(ws, stream(ws, sr("f.txt", "line 1\n", "one\n"), context=["f.txt"]))
    assert "f.txt" in await fresh.undo_async()
    assert read(ws) == SRC


def test_a_journal_written_before_two_phase_steps_still_undoes(ws):
    """Entries of the one-phase journal (one JSON line per accept or undo) keep working."""
    journal = Journal.for_workspace(ws)
    journal.dir.mkdir(parents=True)
    new = SRC.replace("line 2\n", "two\n").encode()
    journal._put_many([SRC.encode(), new])
    from app.core.text.textfile import digest
    (ws.root / "f.txt").write_bytes(new)
    line = ('{"op":"accept","id":"old1","time":1,"label":"accept: hunks #1 in f.txt","files":'
            f'[{{"path":"f.txt","before":"{digest(SRC.encode())}","after":"{digest(new)}",'
            '"mode":420}],"target":null}\n')
    journal.file.write_text(line)
    assert journal.last_undoable().id == "old1"
    journal.undo(ws)
    assert read(ws) == SRC and journal.last_undoable() is None


def test_a_torn_step_is_never_skipped(ws):
    """A begin record without a commit is the last undoable accept until recovery decides."""
    pending = stream(ws, TWO_EDITS, context=["f.txt"])
    Review(ws, pending).accept_all()
    journal = Journal.for_workspace(ws)
    from app.core.disk.workspace import Content
    torn = journal.begin("accept", "torn", [("f.txt", Content(data=read(ws).encode()),
                                             Content(data=b"torn\n"))])
    assert journal.torn() == [torn.id] and journal.last_undoable().id == torn.id
    done = journal.recover(ws)  # completes it: the file was still as before
    assert [e.id for e in done] == [torn.id] and read(ws) == "torn\n"
    journal.undo(ws)
    assert read(ws) == SRC.replace("line 3\n", "line three\n").replace("line 15\n", "line fifteen\n")


def test_a_file_with_a_long_non_ascii_name_is_written_and_undone(tmp_path):
    name = "é" * 120 + ".txt"  # 244 bytes: a temp name built from it must stay under 255
    ws = Workspace(init_repo(tmp_path / "r", {name: SRC}))
    review = Review(ws, stream(ws, sr(name, "line 3\n", "three\n"), context=[name]))
    assert review.accept_all().ok
    assert read(ws, name) == SRC.replace("line 3\n", "three\n")
    review.undo()
    assert read(ws, name) == SRC and sorted(p.name for p in ws.root.iterdir()) == [".git", name]


def test_a_torn_step_with_a_lost_blob_does_not_wedge_later_accepts(ws):
    journal = Journal.for_workspace(ws)
    from app.core.disk.workspace import Content
    torn = journal.begin("accept", "torn", [("f.txt", Content(data=SRC.encode()),
                                             Content(data=b"lost\n"))])
    for blob in journal.blobs.iterdir():
        if blob.read_bytes() == b"lost\n":
            blob.unlink()
    out = Review(ws, stream(ws, TWO_EDITS, context=["f.txt"])).accept_all()
    assert out.ok and len(out.accepted) == 2, out
    assert any("not written" in n for n in out.recovered)
    assert journal.torn() == [] and torn.id in {e.id for e in journal.entries() if e.done}


def test_a_record_after_a_line_torn_by_a_crash_is_not_lost(ws):
    pending = stream(ws, TWO_EDITS, context=["f.txt"])
    Review(ws, pending).accept_all()
    journal = Journal.for_workspace(ws)
    with open(journal.file, "ab") as fh:
        fh.write(b'{"rec":"commit","id":"half-writ')  # what a kill mid-append leaves
    Review(ws, stream(ws, sr("f.txt", "line 1\n", "one\n"), context=["f.txt"])).accept_all()
    assert [e.done for e in journal.entries()] == [True, True]
    journal.undo(ws)
    journal.undo(ws)
    assert read(ws) == SRC


# -- line mode: a line is written only when it is picked ------------------------------------
_lines = st.lists(st.sampled_from(["a", "b", "c", "x = 1", "", "  y"]), min_size=1, max_size=5)


@settings(max_examples=60)
@given(_lines, _lines, st.data())
def test_line_picks_write_exactly_what_git_add_p_would(tmp_path_factory, old, new, data):
    """Any subset of a hunk's rows, accepted, leaves on disk: the base around the hunk, the
    hunk's - rows that were not picked, then its + rows that were (the oracle below is
    written from `git add -p`'s rule, not from steer's code); no pick writes nothing."""
    if old == new:
        return
    root = init_repo(tmp_path_factory.mktemp("r"), {"g.txt": "top\n" + "".join(
        t + "\n" for t in old) + "bottom\n"})
    ws = Workspace(root)
    answer = sr("g.txt", "top\n" + "".join(t + "\n" for t in old),
                "top\n" + "".join(t + "\n" for t in new))
    pending = stream(ws, answer, context=["g.txt"])
    hunks = pending.files["g.txt"].hunks
    h = data.draw(st.sampled_from(hunks))
    rows = data.draw(st.sets(st.integers(0, len(h.old) + len(h.new) - 1)))
    before = (root / "g.txt").read_text().split("\n")[:-1]
    out = Review(ws, pending).accept_lines(h.id, rows)
    after = (root / "g.txt").read_text().split("\n")[:-1]
    if not rows:
        assert out.accepted == [] and after == before and h.state == HunkState.PENDING
        return
    kept = [t for i, t in enumerate(h.old) if i not in rows]
    added = [t for j, t in enumerate(h.new) if len(h.old) + j in rows]
    want = before[:h.base_start] + kept + added + before[h.base_end:]
    assert out.accepted == [h.id] and after == want
