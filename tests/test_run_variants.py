"""`steer run --variants N` end to end: the real CLI in a subprocess, a real git repository, a
real loopback server handing each concurrent request its own answer. --check picks the
variant whose check passes (run in a throwaway worktree, never in the user's tree, and
removed afterwards), --pick takes one, --json reports each; bad input says why and writes
nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import SRC, git, init_repo, sr

from app.core.disk.processes import pid_alive
from app.server.chat_server import ServerThread

STEER = [sys.executable, "-c", "import sys; from app.cli import main; sys.exit(main())"]

A1 = "One.\n\n" + sr("f.txt", "line 3\n", "line three\n")
A2 = "Two.\n\n" + sr("f.txt", "line 3\n", "line 3 (checked)\n") + sr("f.txt", "line 9\n", "line nine\n")
A3 = "Three.\n\n" + sr("f.txt", "line 15\n", "line fifteen\n")


def steer(root: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run([*STEER, *args], cwd=root, env=env, capture_output=True, text=True,
                          timeout=timeout)


def run_args(server, *extra: str) -> list[str]:
    return ["run", "edit it", "-f", "f.txt", "--base-url", server.base_url, "--model", "replay",
            "--format", "search_replace", "--no-save", *extra]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = init_repo(tmp_path / "r", {"f.txt": SRC, "other.txt": "keep me\n"})
    (root / "other.txt").write_text("keep me, edited and not committed\n")  # the user's work
    return root


def no_worktrees(root: Path) -> None:
    assert git(root, "worktree", "list").count("\n") == 1  # only the user's own tree
    assert not list((root / ".git").glob("worktrees/*"))
    mine = [p for p in Path(tempfile.gettempdir()).glob("steer-check-*") if p.is_dir()]
    for p in mine:  # a check dir of a live steer is another test's; none may be ours
        pid = int(p.name.split("-")[2])
        assert pid != os.getpid()
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            pytest.fail(f"a check worktree was left behind: {p}")


def test_check_picks_the_variant_that_passes_and_leaves_no_worktree(repo):
    # the check passes only where line 3 says "(checked)" AND the user's uncommitted edit of
    # other.txt is there: it runs against the working tree as it is, plus the variant
    check = "grep -q 'line 3 (checked)' f.txt && grep -q 'not committed' other.txt"
    with ServerThread(replay=[A1, A2, A3], rate=2000) as server:
        out = steer(repo, *run_args(server, "--variants", "3", "--check", check, "--json"))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    won = next(v for v in data["variants"] if v["picked"])
    assert data["picked"] == won["variant"] and won["check"]["exit_code"] == 0
    assert data["written"] == ["f.txt"]
    text = (repo / "f.txt").read_text()
    assert "line 3 (checked)" in text and "line nine" in text  # variant two, whole
    assert "line three" not in text and "line fifteen" not in text
    assert (repo / "other.txt").read_text() == "keep me, edited and not committed\n"
    assert len(data["variants"]) == 3
    for v in data["variants"]:
        assert v["state"] == "done" and v["tokens"] > 0 and v["ttft_s"] is not None
        assert v["last_token_s"] >= v["ttft_s"] and v["hunks"] >= 1
    assert "check on variant" in out.stderr and "wrote variant" in out.stderr
    no_worktrees(repo)
    # written through the accept path: the journal undoes it
    undo = steer(repo, "undo")
    assert undo.returncode == 0, undo.stderr
    assert (repo / "f.txt").read_text() == SRC


def test_no_variant_passing_writes_nothing(repo):
    with ServerThread(replay=[A1, A2, A3], rate=2000) as server:
        out = steer(repo, *run_args(server, "--variants", "3", "--check", "false"))
    assert out.returncode == 4
    assert "no variant passed the check; nothing was written" in out.stderr
    assert (repo / "f.txt").read_text() == SRC
    no_worktrees(repo)


def test_pick_writes_that_variant_and_without_a_choice_nothing_is_written(repo):
    with ServerThread(replay=[A1, A2, A3, A1, A2, A3], rate=2000) as server:
        shown = steer(repo, *run_args(server, "--variants", "3"))
        assert shown.returncode == 0, shown.stderr
        assert (repo / "f.txt").read_text() == SRC
        assert shown.stdout.count("# steer variant") == 3
        assert "--pick K writes variant K" in shown.stderr
        picked = steer(repo, *run_args(server, "--variants", "3", "--pick", "2", "--json"))
    assert picked.returncode == 0, picked.stderr
    data = json.loads(picked.stdout)
    assert data["picked"] == 2
    two = data["variants"][1]
    assert two["picked"] and two["accepted"] == two["hunks"]
    # which answer variant 2 got depends on arrival order; whatever it proposed is on disk
    assert (repo / "f.txt").read_text() != SRC


def test_a_hanging_check_is_killed_with_its_children(repo, tmp_path):
    marker = tmp_path / "child.pid"
    check = f"sh -c 'echo $$ > {marker}; sleep 300' & sleep 300"
    with ServerThread(replay=[A1], rate=2000) as server:
        # killed at its timeout: waiting for the check (300 s) would outlast steer()'s give-up
        out = steer(repo, *run_args(server, "--check", check, "--check-timeout", "1"))
    assert out.returncode == 4, out.stderr
    assert "timed out" in out.stderr
    assert (repo / "f.txt").read_text() == SRC
    pid = int(marker.read_text())
    deadline = time.monotonic() + 5
    while pid_alive(pid) and time.monotonic() < deadline:  # (a zombie no one reaped is gone)
        time.sleep(0.05)
    assert not pid_alive(pid)
    no_worktrees(repo)


@pytest.mark.parametrize("args, says", [
    (["--variants", "0"], "--variants takes 1 to 8, not 0"),
    (["--variants", "9"], "--variants takes 1 to 8, not 9"),
    (["--variants", "3", "--check", "no-such-check-cmd-xyz --all"], "not found: no-such-check-cmd-xyz"),
    (["--variants", "2", "--pick", "3"], "--pick 3: there are variants 1 to 2"),
    (["--variants", "2", "--accept", "all"], "--pick K or --check CMD"),
])
def test_bad_input_says_why_and_asks_nothing(repo, args, says):
    with ServerThread(replay=[A1], rate=2000) as server:
        out = steer(repo, *run_args(server, *args))
        asked = len(server.stats.bodies)
    assert out.returncode == 2, out.stderr
    assert says in out.stderr and "Traceback" not in out.stderr
    assert asked == 0
    assert (repo / "f.txt").read_text() == SRC


def test_a_repository_in_a_merge_or_bare_cannot_be_checked(tmp_path):
    root = init_repo(tmp_path / "m", {"f.txt": SRC})
    git(root, "checkout", "-qb", "side")
    (root / "f.txt").write_text(SRC.replace("line 2\n", "side\n"))
    git(root, "commit", "-qam", "side")
    git(root, "checkout", "-q", "main")
    (root / "f.txt").write_text(SRC.replace("line 2\n", "main\n"))
    git(root, "commit", "-qam", "main")
    subprocess.run(["git", "merge", "side"], cwd=root, capture_output=True)  # conflicts
    assert (root / ".git" / "MERGE_HEAD").exists()
    before = (root / "f.txt").read_bytes()
    with ServerThread(replay=[A1], rate=2000) as server:
        out = steer(root, *run_args(server, "--variants", "2", "--check", "true"))
    assert out.returncode == 2 and "merge" in out.stderr, out.stderr
    assert (root / "f.txt").read_bytes() == before
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    with ServerThread(replay=[A1], rate=2000) as server:
        out = steer(bare, *run_args(server, "--check", "true"))
    assert out.returncode == 2 and "--check" in out.stderr and "Traceback" not in out.stderr


def test_an_acp_agent_cannot_run_variants(repo):
    agent = f"{sys.executable} {Path(__file__).with_name('acp_agent.py')}"
    out = steer(repo, "run", "edit it", "--agent", agent, "--variants", "2")
    assert out.returncode == 2
    assert "runs one session at a time" in out.stderr
