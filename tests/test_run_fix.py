"""`steer run --check CMD --fix N` (app/cli/run_check.py): one answer checked in a throwaway
worktree before anything is written; a failing check's output sent back as the next message
(appended: the first request's messages go again unchanged); the first passing proposal
written by --accept all; a check that never passes writes nothing, leaves no worktree and
exits 4. The real CLI, real pytest as the check, a real server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from calc_check import BROKEN, CALC, CHECK, FIXED, GOOD, TESTS
from conftest import git, init_repo

from app.server.chat_server import ServerThread

STEER = [sys.executable, "-c", "import sys; from app.cli import main; sys.exit(main())"]
HERE = Path(__file__).resolve().parents[1]


def repo_at(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "r", {"calc.py": CALC, "test_calc.py": TESTS})


def steer(repo: Path, server, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    return subprocess.run([*STEER, "run", "add sub to calc.py", "-f", "calc.py", "--base-url",
                           server.base_url, "--model", "replay", "--format", "search_replace",
                           "--quiet", "--no-save", "--check", CHECK, *extra], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=600)


def no_worktrees(repo: Path) -> None:
    assert git(repo, "worktree", "list").count("\n") == 1  # the user's own, only
    assert not list((repo / ".git").glob("worktrees/*"))


def test_a_broken_first_answer_is_sent_back_and_the_fix_is_written(tmp_path):
    repo = repo_at(tmp_path)
    head = git(repo, "rev-parse", "HEAD")
    with ServerThread(replay=[BROKEN, FIXED]) as server:
        out = steer(repo, server, "--fix", "2", "--accept", "all", "--json")
        first, second = server.stats.bodies
    assert out.returncode == 0, out.stderr
    assert (repo / "calc.py").read_text() == GOOD
    assert "round 1: ✗ check: 1 failed (test_sub)" in out.stderr
    assert "round 2: ✓ check" in out.stderr
    # the second request: the first one's messages unchanged, the answer, then the failure
    sent = second["messages"]
    assert sent[:len(first["messages"])] == first["messages"]
    assert sent[len(first["messages"])] == {"role": "assistant", "content": BROKEN}
    failure = sent[-1]["content"]
    assert len(sent) == len(first["messages"]) + 2 and sent[-1]["role"] == "user"
    assert CHECK in failure and "test_sub" in failure and "assert 3 == 1" in failure
    rounds = json.loads(out.stdout)["rounds"]
    assert [(r["round"], r["check"]["passed"], r["check"]["failed_tests"]) for r in rounds] == \
        [(1, False, ["test_sub"]), (2, True, [])]
    assert all(r["tokens"] > 0 for r in rounds)
    # the broken version was only ever in a worktree, now gone; index and refs as they were
    no_worktrees(repo)
    assert git(repo, "rev-parse", "HEAD") == head and git(repo, "diff", "--cached") == ""


def test_a_check_that_never_passes_writes_nothing_and_exits_4(tmp_path):
    repo = repo_at(tmp_path)
    with ServerThread(replay=[BROKEN, BROKEN.replace("Added", "Again")]) as server:
        out = steer(repo, server, "--fix", "1", "--accept", "all")
        asked = len(server.stats.bodies)
    assert out.returncode == 4, out.stderr
    assert asked == 2  # the first answer and one fix, no more
    assert "no proposal passed the check; nothing was written" in out.stderr
    assert (repo / "calc.py").read_text() == CALC
    no_worktrees(repo)


def test_without_fix_the_verdict_is_said_and_a_failing_proposal_is_not_written(tmp_path):
    repo = repo_at(tmp_path)
    with ServerThread(replay=[BROKEN]) as server:
        out = steer(repo, server, "--accept", "all")
        asked = len(server.stats.bodies)
    assert out.returncode == 4 and asked == 1, out.stderr
    assert "round 1: ✗ check: 1 failed (test_sub)" in out.stderr
    assert (repo / "calc.py").read_text() == CALC
    right = BROKEN.replace("a + b\n>>>>>>>", "a - b\n>>>>>>>")
    assert right != BROKEN
    with ServerThread(replay=[right]) as server:
        good = steer(repo, server, "--accept", "all")
    assert good.returncode == 0, good.stderr
    no_worktrees(repo)


def test_fix_without_a_check_and_a_missing_command_say_why_and_ask_nothing(tmp_path):
    repo = repo_at(tmp_path)
    with ServerThread(replay=[BROKEN]) as server:
        env = {**os.environ, "PYTHONPATH": str(HERE)}
        base = [*STEER, "run", "x", "-f", "calc.py", "--base-url", server.base_url, "--model",
                "replay", "--no-save"]
        no_check = subprocess.run([*base, "--fix", "1"], cwd=repo, env=env, capture_output=True,
                                  text=True, timeout=300)
        missing = subprocess.run([*base, "--check", "no-such-cmd-xyz -q"], cwd=repo, env=env,
                                 capture_output=True, text=True, timeout=300)
        asked = len(server.stats.bodies)
    assert no_check.returncode == 2 and "--fix N sends a failing check back" in no_check.stderr
    assert missing.returncode == 2 and "not found: no-such-cmd-xyz" in missing.stderr
    assert asked == 0
