"""The compare-and-swap write where renameat2's exchange is not supported (another OS, an old
filesystem): move the file aside, check it, put steer's in place without replacing
(app/core/disk/workspace.py `_replace`). Only
`steer bench cas` used to run it; here a real `steer run` writes that way
(STEER_NO_EXCHANGE, app/core/faults.py) while this process saves the file at the worst
moments it can reach."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SRC, init_repo, sr
from test_races import Child, leftovers, run_args, save_by_rename, save_in_place, steer

from app.core.disk.journal import Journal
from app.core.disk.side_names import tmp_name
from app.core.disk.workspace import Content, Workspace
from app.server.chat_server import ServerThread


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "r", {"f.txt": SRC})


@pytest.fixture(autouse=True)
def _no_exchange(monkeypatch):
    monkeypatch.setenv("STEER_NO_EXCHANGE", "1")


def test_the_switch_turns_exchange_off_as_the_bench_does(tmp_path):
    ws = Workspace(tmp_path)
    assert ws.exchange is False
    (tmp_path / "f.txt").write_text("a\n")
    ws.swap("f.txt", Content(data=b"a\n", mode=0o644), Content(data=b"b\n", mode=0o644), tag="t")
    assert (tmp_path / "f.txt").read_text() == "b\n"


def test_an_accept_without_exchange_writes_exactly_and_goes_through_the_fallback(repo):
    # the fallback's own stop point (after its check, before its rename) is reached: the
    # exchange did not run
    with ServerThread(replay=sr("f.txt", "line 3\n", "line three\n")) as server:
        child = Child(repo, *run_args(server), stop=["swap:checked:f.txt"])
        child.wait_stopped()
        # checked: the original is aside (steer's own file beside it), not yet replaced
        assert not (repo / "f.txt").exists()
        assert sorted(p.read_text() == SRC for p in repo.iterdir() if "steer-tmp" in p.name) \
            == [False, True]
        child.resume()
        rc, err = child.finish()
    assert rc == 0, err
    assert (repo / "f.txt").read_bytes() == SRC.replace("line 3\n", "line three\n").encode()
    assert leftovers(repo) == []
    journal = Journal.for_workspace(Workspace(repo))
    (entry,) = journal.entries()
    (fc,) = entry.files
    assert fc.written and journal.content(fc, "before").data == SRC.encode()
    assert journal.content(fc, "after").data == SRC.replace("line 3\n", "line three\n").encode()


@pytest.mark.parametrize("save", [save_in_place, save_by_rename])
def test_a_save_before_the_fallbacks_check_is_kept_and_the_journal_says_what_was_replaced(
        repo, save):
    """The new content is staged; the user saves another region right then. The check sees
    the save: steer's hunk is merged onto it, and the journal records the saved bytes as
    what was replaced, so undo gives the save back (not the base steer planned on)."""
    with ServerThread(replay=sr("f.txt", "line 3\n", "line three\n")) as server:
        child = Child(repo, *run_args(server), stop=["swap:staged:f.txt"])
        child.wait_stopped()
        mine = SRC.replace("line 15\n", "line 15, saved by me\n")
        save(repo / "f.txt", mine)
        child.resume()
        rc, err = child.finish()
    assert rc == 0, err
    assert (repo / "f.txt").read_text() == mine.replace("line 3\n", "line three\n")
    assert leftovers(repo) == []
    journal = Journal.for_workspace(Workspace(repo))
    (entry,) = journal.entries()
    assert [journal.content(fc, "before").data for fc in entry.files] == [mine.encode()]
    undo = steer(repo, "undo")
    assert undo.returncode == 0, undo.stderr
    assert (repo / "f.txt").read_text() == mine


@pytest.mark.parametrize("save", [save_in_place, save_by_rename])
def test_a_save_of_the_same_lines_before_the_fallbacks_check_wins(repo, save):
    with ServerThread(replay=sr("f.txt", "line 3\n", "line three\n")) as server:
        child = Child(repo, *run_args(server), stop=["swap:staged:f.txt"])
        child.wait_stopped()
        mine = SRC.replace("line 3\n", "line 3, mine\n")
        save(repo / "f.txt", mine)
        child.resume()
        rc, err = child.finish()
    assert rc == 4, err
    assert (repo / "f.txt").read_text() == mine
    assert "f.txt" in err and "changed on disk" in err
    assert leftovers(repo) == []


@pytest.mark.parametrize("save", [save_in_place, save_by_rename])
def test_a_save_between_the_fallbacks_check_and_its_rename_is_not_lost(repo, save):
    """The worst moment: steer has checked the file and not yet renamed its own over it."""
    with ServerThread(replay=sr("f.txt", "line 3\n", "line three\n")) as server:
        child = Child(repo, *run_args(server), stop=["swap:checked:f.txt"])
        child.wait_stopped()
        mine = SRC.replace("line 15\n", "line 15, saved by me\n")
        save(repo / "f.txt", mine)
        child.resume()
        rc, err = child.finish()
    # the file was aside: the save made a new one, which stays; steer's hunk is merged onto it
    assert rc == 0, err
    assert (repo / "f.txt").read_text() == mine.replace("line 3\n", "line three\n")
    assert leftovers(repo) == []
    undo = steer(repo, "undo")
    assert undo.returncode == 0, undo.stderr
    assert (repo / "f.txt").read_text() == mine


def test_a_save_of_the_same_lines_between_the_check_and_the_rename_wins(repo):
    with ServerThread(replay=sr("f.txt", "line 3\n", "line three\n")) as server:
        child = Child(repo, *run_args(server), stop=["swap:checked:f.txt"])
        child.wait_stopped()
        mine = SRC.replace("line 3\n", "line 3, mine\n")
        save_by_rename(repo / "f.txt", mine)
        child.resume()
        rc, err = child.finish()
    assert rc == 4, err
    assert (repo / "f.txt").read_text() == mine
    assert leftovers(repo) == []


def test_a_kill_while_the_file_is_aside_is_completed_by_the_next_steer(repo):
    """Killed between moving the file aside and putting its own in place: `f.txt` is not
    there. Recovery puts the original back and completes the step; undo reverts it."""
    with ServerThread(replay=sr("f.txt", "line 3\n", "line three\n")) as server:
        child = Child(repo, *run_args(server), stop=["swap:checked:f.txt"])
        child.wait_stopped()
        child.kill9()
    assert not (repo / "f.txt").exists() and leftovers(repo)
    undo = steer(repo, "undo")
    assert undo.returncode == 0, undo.stderr
    assert "completed an interrupted" in undo.stderr
    assert (repo / "f.txt").read_text() == SRC
    assert leftovers(repo) == []


def test_recovery_puts_back_an_original_left_aside(tmp_path):
    """What a swap killed with the file aside leaves (the path absent, the original beside
    it under the step's tag) is put back by the sweep, for the step to be completed."""
    ws = Workspace(tmp_path)
    before = Content(data=b"mine\n", mode=0o644)
    (tmp_path / tmp_name("f.txt", "step1")).write_bytes(b"mine\n")
    (tmp_path / tmp_name("f.txt", "step1")).write_bytes(b"steer's\n")  # its staged file
    assert ws.sweep("f.txt", "step1", before, Content(data=b"steer's\n", mode=0o644)) == []
    assert (tmp_path / "f.txt").read_bytes() == b"mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]
