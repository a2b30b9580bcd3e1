"""`steer run --accept all --stage` end to end: the real CLI in a subprocess against the
loopback server, in real repositories; `git diff --cached` checked byte for byte while the
user keeps other unstaged changes in the same file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SRC, git, init_repo, sr

from app.server.chat_server import ServerThread

STEER = [sys.executable, "-m", "app"]


ANSWER = "Two changes.\n\n" + sr("f.txt", "line 10\n", "line ten\n") + sr("f.txt", "line 15\n", "fifteen\n")


def steer(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run([*STEER, *args], cwd=root, env=env, capture_output=True, text=True,
                          timeout=120)


def run_args(server, *extra: str) -> list[str]:
    return ["run", "edit it", "-f", "f.txt", "--base-url", server.base_url, "--model", "replay",
            "--format", "search_replace", "-q", *extra]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "r", {"f.txt": SRC, "other.txt": "other\n"})


def test_stage_puts_exactly_the_accepted_hunks_in_the_index(repo, tmp_path):
    mine = SRC.replace("line 2\n", "line 2 (mine)\n")
    (repo / "f.txt").write_text(mine)
    (repo / "other.txt").write_text("other (mine)\n")
    with ServerThread(replay=ANSWER) as server:
        out = steer(repo, *run_args(server, "--accept", "all", "--stage", "--json"))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["staged"] == ["f.txt"]
    ref = tmp_path / "ref"
    shutil.copytree(repo, ref)
    git(ref, "reset", "-q")
    (ref / "f.txt").write_text(SRC.replace("line 10\n", "line ten\n").replace("line 15\n", "fifteen\n"))
    git(ref, "add", "f.txt")
    assert git(repo, "diff", "--cached") == git(ref, "diff", "--cached")
    unstaged = git(repo, "diff")
    assert "line 2 (mine)" in unstaged and "other (mine)" in unstaged and "line ten" not in unstaged
    assert (repo / "f.txt").read_text() == mine.replace("line 10\n", "line ten\n").replace(
        "line 15\n", "fifteen\n")


def test_stage_is_refused_before_anything_happens_during_a_merge(repo):
    git(repo, "checkout", "-q", "-b", "b")
    (repo / "other.txt").write_text("b\n")
    git(repo, "commit", "-qam", "b")
    git(repo, "checkout", "-q", "main")
    (repo / "other.txt").write_text("main\n")
    git(repo, "commit", "-qam", "main")
    assert subprocess.run(["git", "merge", "b"], cwd=repo, capture_output=True).returncode != 0
    index = (repo / ".git" / "index").read_bytes()
    with ServerThread(replay=ANSWER) as server:
        out = steer(repo, *run_args(server, "--accept", "all", "--stage"))
        asked = len(server.stats.requests)
    assert out.returncode == 4 and "a merge is in progress" in out.stderr
    assert asked == 0 and (repo / "f.txt").read_text() == SRC
    assert (repo / ".git" / "index").read_bytes() == index


def test_stage_outside_a_repository_says_so_and_changes_nothing(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "f.txt").write_text(SRC)
    with ServerThread(replay=ANSWER) as server:
        out = steer(plain, *run_args(server, "--accept", "all", "--stage"))
        plain_run = steer(plain, *run_args(server, "--accept", "all"))
    assert out.returncode == 2 and "not a git repository" in out.stderr
    assert plain_run.returncode == 0  # everything else works without git
    assert (plain / "f.txt").read_text() == SRC.replace("line 10\n", "line ten\n").replace(
        "line 15\n", "fifteen\n")


def test_stage_needs_accept_all(repo):
    out = steer(repo, "run", "x", "--stage")
    assert out.returncode == 2 and "--accept all" in out.stderr
