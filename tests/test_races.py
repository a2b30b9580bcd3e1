"""Nothing is lost, whatever the timing: real races and real kills against `steer run` and
`steer undo` in subprocesses.

A child steer process is told (STEER_STOP_AT, app/core/faults.py) to SIGSTOP itself at a
chosen instruction: between journaling and swapping a file, right after the atomic exchange,
after its 25th file... While it is stopped this process saves the file as an editor would (a
real second writer at exactly that moment), or SIGKILLs it there (a real kill -9). Then it
checks the disk byte for byte, and that the journal, `steer undo` and the reports tell the
truth."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import SRC, git, init_repo, sr

from app.core.disk.journal import Journal
from app.core.disk.workspace import Workspace
from app.server.chat_server import ServerThread

HERE = Path(__file__).resolve().parents[1]


class Child:
    """A steer process whose output goes to files (a stopped child never blocks on a pipe)."""

    def __init__(self, root: Path, *args: str, stop: list[str] = ()) -> None:
        env = {**os.environ, "PYTHONPATH": str(HERE), "STEER_STOP_AT": ",".join(stop)}
        self.out = tempfile.TemporaryFile("w+")
        self.err = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen([sys.executable, "-m", "app", *args], cwd=root, env=env,
                                     stdout=self.out, stderr=self.err, text=True)

    def stderr(self) -> str:
        self.err.seek(0)
        return self.err.read()

    def wait_stopped(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"steer exited ({self.proc.returncode}) without reaching the stop "
                            f"point:\n{self.stderr()}")
            with open(f"/proc/{self.proc.pid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
            if state in ("T", "t"):
                return
            if time.monotonic() > deadline:
                self.proc.kill()
                pytest.fail("steer never reached the stop point")
            time.sleep(0.005)

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def finish(self, timeout: float = 60) -> tuple[int, str]:
        rc = self.proc.wait(timeout)
        return rc, self.stderr()

    def kill9(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)


def steer(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(HERE), "STEER_STOP_AT": ""}
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)


def run_args(server: ServerThread, *extra: str) -> list[str]:
    return ["run", "edit", "--base-url", server.base_url, "--model", "replay", "--format",
            "search_replace", "--accept", "all", "-q", *extra]


def save_in_place(path: Path, text: str) -> None:
    path.write_text(text)  # open(O_TRUNC) + write, as many editors save


def save_by_rename(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".editor~")  # write a copy, rename it over: vim, VS Code
    tmp.write_text(text)
    os.replace(tmp, path)


def leftovers(root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in root.rglob("*")
            if ".git" not in p.parts and ("steer-tmp" in p.name or "steer-saved" in p.name)]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "r", {"f.txt": SRC, "x.txt": "x\n"})


# -- 1. a save landing while steer writes -----------------------------------------------------
@pytest.mark.parametrize("save", [save_in_place, save_by_rename])
def test_a_save_in_the_write_window_is_rebased_onto_not_overwritten(repo, save):
    """The file is journaled and the new content staged; the user saves another region right
    then. steer must see the save at the swap and merge its hunk onto it."""
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
    # the journal recorded the bytes actually replaced: undo gives back the save, not the base
    undo = steer(repo, "undo")
    assert undo.returncode == 0, undo.stderr
    assert (repo / "f.txt").read_text() == mine


@pytest.mark.parametrize("save", [save_in_place, save_by_rename])
def test_a_save_of_the_same_lines_in_the_write_window_wins_and_exit_is_4(repo, save):
    with ServerThread(replay=sr("f.txt", "line 3\n", "line three\n")) as server:
        child = Child(repo, *run_args(server), stop=["swap:staged:f.txt"])
        child.wait_stopped()
        mine = SRC.replace("line 3\n", "line 3, mine\n")
        save(repo / "f.txt", mine)
        child.resume()
        rc, err = child.finish()
    assert rc == 4, err
    assert (repo / "f.txt").read_text() == mine
    assert "f.txt" in err and "changed on disk" in err and "wrote" not in err
    assert leftovers(repo) == []
    undo = steer(repo, "undo")  # nothing was written, so nothing is undone
    assert undo.returncode == 4 and "nothing to undo" in undo.stderr
    assert (repo / "f.txt").read_text() == mine


def test_a_save_right_after_the_exchange_is_kept(repo):
    """A save that lands once steer's file is in place is simply the newer version."""
    with ServerThread(replay=sr("f.txt", "line 3\n", "line three\n")) as server:
        child = Child(repo, *run_args(server), stop=["swap:exchanged:f.txt"])
        child.wait_stopped()
        mine = SRC.replace("line 9\n", "line 9, mine\n")
        save_in_place(repo / "f.txt", mine)
        child.resume()
        rc, err = child.finish()
    assert rc == 0, err
    assert (repo / "f.txt").read_text() == mine
    assert leftovers(repo) == []


def test_undo_does_not_overwrite_a_save_in_its_write_window(repo):
    with ServerThread(replay=sr("f.txt", "line 3\n", "line three\n")) as server:
        assert steer(repo, *run_args(server)).returncode == 0
    accepted = (repo / "f.txt").read_text()
    child = Child(repo, "undo", stop=["swap:staged:f.txt"])
    child.wait_stopped()
    mine = accepted.replace("line 17\n", "line 17, mine\n")
    save_by_rename(repo / "f.txt", mine)
    child.resume()
    rc, err = child.finish()
    assert rc == 0, err
    assert (repo / "f.txt").read_text() == SRC.replace("line 17\n", "line 17, mine\n")

    # the same, when the save touches the lines the undo reverts: refused, save kept
    with ServerThread(replay=sr("f.txt", "line 3\n", "line three\n")) as server:
        assert steer(repo, *run_args(server)).returncode == 0
    child = Child(repo, "undo", stop=["swap:staged:f.txt"])
    child.wait_stopped()
    mine = (repo / "f.txt").read_text().replace("line three\n", "line three, mine\n")
    save_in_place(repo / "f.txt", mine)
    child.resume()
    rc, err = child.finish()
    assert rc == 4 and "f.txt" in err
    assert (repo / "f.txt").read_text() == mine


@pytest.mark.parametrize("same_line", [True, False])
def test_two_steer_processes_accepting_at_once_serialise(repo, same_line):
    """A holds the repository lock, stopped just before its swap; B finishes its answer and
    waits. Both reports must be true: whatever says "wrote" is on disk."""
    b_edit = ("line 3\n", "line three (B)\n") if same_line else ("line 12\n", "line twelve (B)\n")
    answers = [sr("f.txt", "line 3\n", "line three (A)\n"), sr("f.txt", *b_edit)]
    with ServerThread(replay=answers) as server:
        a = Child(repo, *run_args(server), stop=["accept:before:f.txt"])
        a.wait_stopped()
        b = Child(repo, *run_args(server))
        deadline = time.monotonic() + 30
        while len(server.stats.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)  # let B reach the lock (if it is later, it plans after A: the same)
        assert b.proc.poll() is None  # B cannot have written while A holds the lock
        a.resume()
        ra, err_a = a.finish()
        rb, err_b = b.finish()
    text = (repo / "f.txt").read_text()
    assert ra == 0, err_a
    assert "line three (A)\n" in text
    if same_line:
        assert rb == 4 and "line three (B)" not in text
        assert "f.txt" in err_b and "wrote" not in err_b
    else:
        assert rb == 0, err_b
        assert text == SRC.replace("line 3\n", "line three (A)\n").replace("line 12\n", "line twelve (B)\n")


# -- 2. interrupted steps are completed, never skipped -----------------------------------------
def many(n: int) -> dict[str, str]:
    return {f"f{i:03}.txt": SRC for i in range(n)}


def edit_all(n: int) -> str:
    return "".join(sr(f"f{i:03}.txt", "line 3\n", "line three\n") for i in range(n))


def test_an_accept_killed_half_way_is_completed_then_undone_whole(tmp_path):
    root = init_repo(tmp_path / "r", many(50))
    with ServerThread(replay=edit_all(50)) as server:
        child = Child(root, *run_args(server), stop=["accept:after:f024.txt"])
        child.wait_stopped()
        child.kill9()
    after = SRC.replace("line 3\n", "line three\n")
    texts = [(root / f"f{i:03}.txt").read_text() for i in range(50)]
    assert texts[:25] == [after] * 25 and texts[25:] == [SRC] * 25  # torn for real
    journal = Journal.for_workspace(Workspace(root))
    assert journal.torn()
    undo = steer(root, "undo")
    assert undo.returncode == 0, undo.stderr
    assert "completed an interrupted step" in undo.stderr
    assert all((root / f"f{i:03}.txt").read_text() == SRC for i in range(50))
    assert journal.torn() == [] and leftovers(root) == []
    assert git(root, "status", "--porcelain") == ""


def test_an_undo_killed_half_way_is_completed_and_the_previous_accept_is_not_touched(tmp_path):
    """The issue's case: 200 files, undo killed after 100. The next `steer undo` must finish
    that undo, not revert the unrelated accept before it."""
    root = init_repo(tmp_path / "r", {**many(200), "x.txt": "x\n"})
    with ServerThread(replay=[sr("x.txt", "x\n", "X\n"), edit_all(200)]) as server:
        assert steer(root, *run_args(server)).returncode == 0
        assert steer(root, *run_args(server)).returncode == 0
    child = Child(root, "undo", stop=["undo:after:f099.txt"])
    child.wait_stopped()
    child.kill9()
    after = SRC.replace("line 3\n", "line three\n")
    assert (root / "f099.txt").read_text() == SRC and (root / "f100.txt").read_text() == after
    again = steer(root, "undo")
    assert again.returncode == 0, again.stderr
    assert "completed an interrupted step: undo" in again.stderr
    assert all((root / f"f{i:03}.txt").read_text() == SRC for i in range(200))
    assert (root / "x.txt").read_text() == "X\n"  # the earlier accept stays
    third = steer(root, "undo")
    assert third.returncode == 0, third.stderr
    assert (root / "x.txt").read_text() == "x\n"
    assert git(root, "status", "--porcelain") == "" and leftovers(root) == []


@pytest.mark.parametrize("where", ["swap:staged:f.txt", "swap:exchanged:f.txt"])
def test_a_kill_inside_a_write_leaves_no_temp_file_behind(repo, where):
    with ServerThread(replay=sr("f.txt", "line 3\n", "line three\n")) as server:
        child = Child(repo, *run_args(server), stop=[where])
        child.wait_stopped()
        child.kill9()
    assert leftovers(repo)  # the killed write left its temp file
    out = steer(repo, "undo", "--list")
    assert "(interrupted)" in out.stdout
    undo = steer(repo, "undo")
    assert undo.returncode == 0, undo.stderr
    assert (repo / "f.txt").read_text() == SRC
    assert leftovers(repo) == [] and git(repo, "status", "--porcelain") == ""


def test_a_save_displaced_by_a_killed_write_is_put_back(repo):
    """The save lands after staging; the exchange displaces it; steer is killed before it
    could check and give it back. Recovery must give it back."""
    with ServerThread(replay=sr("f.txt", "line 3\n", "line three\n")) as server:
        child = Child(repo, *run_args(server), stop=["swap:staged:f.txt", "swap:exchanged:f.txt"])
        child.wait_stopped()
        mine = SRC.replace("line 3\n", "line 3, mine\n")
        save_in_place(repo / "f.txt", mine)
        child.resume()
        child.wait_stopped()  # exchanged: steer's version in place, the save aside
        child.kill9()
    assert (repo / "f.txt").read_text() != mine
    undo = steer(repo, "undo")
    assert "put back" in undo.stderr, undo.stderr
    assert (repo / "f.txt").read_text() == mine
    assert leftovers(repo) == []


def test_the_next_accept_completes_an_interrupted_one_first(tmp_path):
    root = init_repo(tmp_path / "r", {**many(4), "x.txt": "x\n"})
    with ServerThread(replay=[edit_all(4), sr("x.txt", "x\n", "X\n")]) as server:
        child = Child(root, *run_args(server), stop=["accept:after:f001.txt"])
        child.wait_stopped()
        child.kill9()
        out = steer(root, *run_args(server))
    assert out.returncode == 0, out.stderr
    assert "completed an interrupted accept" in out.stderr
    assert all((root / f"f{i:03}.txt").read_text() == SRC.replace("line 3\n", "line three\n")
               for i in range(4))
    assert (root / "x.txt").read_text() == "X\n"


def test_a_second_save_racing_the_give_back_stays_and_the_first_is_kept_beside(repo):
    """Save D lands before the exchange (displaced), save X lands on steer's file right after
    it: X is the newest and stays at f.txt (steer's hunk merged onto it), D is kept beside."""
    with ServerThread(replay=sr("f.txt", "line 3\n", "line three\n")) as server:
        child = Child(repo, *run_args(server), stop=["swap:staged:f.txt", "swap:exchanged:f.txt"])
        child.wait_stopped()
        first = SRC.replace("line 5\n", "line 5, first save\n")
        save_in_place(repo / "f.txt", first)
        child.resume()
        child.wait_stopped()
        second = SRC.replace("line 9\n", "line 9, second save\n")
        save_in_place(repo / "f.txt", second)
        child.resume()
        rc, err = child.finish()
    assert (repo / "f.txt").read_text() == second.replace("line 3\n", "line three\n")
    (kept,) = [p for p in repo.iterdir() if "steer-saved" in p.name]
    assert kept.read_text() == first
    assert rc == 4 and kept.name in err
