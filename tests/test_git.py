"""app/core/git/repository.py against real repositories in temp dirs: status with staged and unstaged
apart, the branch (also detached, unborn, in a linked worktree), HEAD and index diffs,
staging exactly the accepted hunks (checked with `git diff --cached` byte for byte while
the user has other unstaged changes in the same file), commits with real hooks, and the
refusals during a merge, rebase or cherry-pick."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import SRC, git, init_repo, sr, stream

from app.core.disk.git_dirs import find_root
from app.core.disk.workspace import Workspace
from app.core.edits.hunks import HunkState
from app.core.git import files as repo_mod
from app.core.git.repository import GitRepo
from app.core.review.review import Review


def gitb(cwd: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True).stdout


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "r", {"f.txt": SRC, "g.txt": "g\n", "old.txt": "old\n"})


# -- status, branch, diffs ---------------------------------------------------------------------
def test_status_tells_staged_from_unstaged(root):
    (root / "f.txt").write_text(SRC + "staged\n")
    git(root, "add", "f.txt")
    (root / "f.txt").write_text(SRC + "staged\nunstaged\n")
    (root / "g.txt").write_text("g2\n")
    (root / "new.txt").write_text("n\n")
    (root / "added.txt").write_text("a\n")
    git(root, "add", "added.txt")
    git(root, "mv", "old.txt", "moved.txt")
    with GitRepo.open(root) as repo:
        st = repo.status()
    assert (st["f.txt"].index, st["f.txt"].worktree) == ("M", "M")
    assert st["f.txt"].staged and st["f.txt"].unstaged
    assert not st["g.txt"].staged and st["g.txt"].unstaged
    assert st["new.txt"].untracked and st["new.txt"].badge == "?"
    assert st["added.txt"].staged and not st["added.txt"].unstaged and st["added.txt"].badge == "A"
    assert st["moved.txt"].badge == "R" and st["moved.txt"].source == "old.txt"
    assert repo_mod.status(root) == {p: s.badge for p, s in st.items()}


def test_branch_detached_and_unborn(root, tmp_path):
    with GitRepo.open(root) as repo:
        assert repo.branch() == "main"
        git(root, "checkout", "-q", "-b", "feature")
        assert repo.branch() == "feature"  # the same long-lived Repo sees the switch
        sha = git(root, "rev-parse", "HEAD").strip()
        git(root, "checkout", "-q", "--detach")
        assert repo.branch() == f"detached at {sha[:7]}"
    empty = init_repo(tmp_path / "empty")
    with GitRepo.open(empty) as repo:
        assert repo.branch() == "main" and repo.status() == {}
        (empty / "a").write_text("a\n")
        assert "+a" in repo.diff_head("a")


def test_linked_worktree_finds_its_own_git_dir(root, tmp_path):
    wt = tmp_path / "wt"
    git(root, "worktree", "add", "-q", "-b", "side", str(wt))
    assert (wt / ".git").is_file()
    assert find_root(wt / "") == wt
    with GitRepo.open(wt) as repo:
        assert repo.git_dir == (root / ".git" / "worktrees" / "wt").resolve()
        assert repo.common_dir == (root / ".git").resolve()
        assert repo.branch() == "side"
        (wt / "f.txt").write_text("changed\n")
        assert repo.status()["f.txt"].unstaged


def test_head_and_index_diffs_are_gits_own(root):
    (root / "f.txt").write_text(SRC.replace("line 3\n", "three\n"))
    git(root, "add", "f.txt")
    (root / "f.txt").write_text(SRC.replace("line 3\n", "three\n").replace("line 9\n", "nine\n"))
    with GitRepo.open(root) as repo:
        assert repo.diff_head("f.txt") == git(root, "diff", "HEAD", "--", "f.txt")
        assert repo.diff_index("f.txt") == git(root, "diff", "--cached", "--", "f.txt")
        assert repo.diff_unstaged("f.txt") == git(root, "diff", "--", "f.txt")
        assert "+three" in repo.diff_index("f.txt") and "nine" not in repo.diff_index("f.txt")
        (root / "u.txt").write_text("untracked\n")
        assert "+untracked" in repo.diff_head("u.txt")


def test_outside_a_repository_everything_else_works(tmp_path):
    plain = tmp_path / "plain"
    (plain / "src").mkdir(parents=True)
    (plain / "src" / "a.py").write_text("a\n")
    (plain / "node_modules").mkdir()
    (plain / "node_modules" / "x.js").write_text("x\n")
    assert GitRepo.open(plain) is None
    assert repo_mod.status(plain) == {}
    assert repo_mod.list_files(plain) == ["src/a.py"]
    assert find_root(plain) == plain


def test_a_folder_inside_a_repository_is_not_its_repository(root):
    (root / "sub").mkdir()
    assert GitRepo.open(root / "sub") is None
    assert find_root(root / "sub") == root


# -- staging exactly the accepted hunks ---------------------------------------------------------
def _accept_line_10(root: Path, src: str, eol: str = "\n"):
    """The user edits line 2 before asking; steer proposes lines 10 and 18; the user
    accepts only the first. Returns the pending diff."""
    ws = Workspace(root)
    answer = sr("f.txt", "line 10\n", "line ten\nline ten b\n") + sr("f.txt", "line 18\n", "eighteen\n")
    pending = stream(ws, answer, context=["f.txt"])
    h10, h18 = pending.files["f.txt"].hunks
    review = Review(ws, pending)
    assert review.accept([h10.id]).accepted == [h10.id]
    review.reject([h18.id])
    return ws, pending, review


@pytest.mark.parametrize("eol,final", [("\n", True), ("\r\n", True), ("\n", False)])
def test_stage_accepted_hunks_only_byte_for_byte(tmp_path, eol, final):
    head = "".join(f"line {i}{eol}" for i in range(1, 21))
    if not final:
        head = head[: -len(eol)]
    root = init_repo(tmp_path / "r", {"f.txt": head.encode()})
    mine = head.replace(f"line 2{eol}", f"line 2 (mine, unstaged){eol}")
    (root / "f.txt").write_bytes(mine.encode())
    ws, pending, _ = _accept_line_10(root, mine, eol)
    with GitRepo.open(root) as repo:
        result = repo.stage_accepted(pending)
    assert result.ok and result.staged == ["f.txt"], result.messages
    # the reference: the same repository where someone staged exactly steer's hunk by hand
    ref = tmp_path / "ref"
    shutil.copytree(root, ref)
    git(ref, "reset", "-q")
    want = head.replace(f"line 10{eol}", f"line ten{eol}line ten b{eol}")
    (ref / "f.txt").write_bytes(want.encode())
    git(ref, "add", "f.txt")
    assert gitb(root, "diff", "--cached") == gitb(ref, "diff", "--cached")
    assert b"line ten b" in gitb(root, "diff", "--cached")
    unstaged = gitb(root, "diff").decode()
    assert "(mine, unstaged)" in unstaged and "line ten" not in unstaged  # still the user's
    assert (root / "f.txt").read_bytes() == mine.replace(
        f"line 10{eol}", f"line ten{eol}line ten b{eol}").encode()
    with GitRepo.open(root) as repo:  # staging again changes nothing
        again = repo.stage_accepted(pending)
    assert again.ok and again.staged == [] and again.unchanged == ["f.txt"]
    assert gitb(root, "diff", "--cached") == gitb(ref, "diff", "--cached")


def test_stage_after_a_live_rebase_and_partial_lines(root):
    ws = Workspace(root)
    answer = sr("f.txt", "line 10\nline 11\n", "ten\neleven\n") + sr("f.txt", "line 18\n", "eighteen\n")
    pending = stream(ws, answer, context=["f.txt"])
    review = Review(ws, pending)
    (root / "f.txt").write_text("top (mine)\n" + SRC)
    review.recheck("f.txt")
    h10, h18 = pending.files["f.txt"].hunks
    # rows: 0 -line 10, 1 -line 11, 2 +ten, 3 +eleven: only "line 11" -> "eleven"
    assert review.accept_lines(h10.id, [1, 3]).accepted == [h10.id]
    with GitRepo.open(root) as repo:
        assert repo.stage_accepted(pending).ok
    cached = git(root, "diff", "--cached", "-U0")
    assert "-line 11\n+eleven\n" in cached and "top (mine)" not in cached
    assert "eighteen" not in cached and "ten\n" not in cached.replace("eleven", "")


def test_stage_a_file_steer_created_and_one_it_deleted(root):
    ws = Workspace(root)
    answer = ("*** Begin Patch\n*** Add File: new.txt\n+hello\n+world\n"
              "*** Delete File: g.txt\n*** End Patch\n")
    pending = stream(ws, answer, fmt="apply_patch")
    assert Review(ws, pending).accept_all().written
    with GitRepo.open(root) as repo:
        result = repo.stage_accepted(pending)
        st = repo.status()
    assert result.ok and sorted(result.staged) == ["g.txt", "new.txt"]
    assert (st["new.txt"].index, st["new.txt"].worktree) == ("A", " ")
    assert (st["g.txt"].index, st["g.txt"].worktree) == ("D", " ")


def test_an_untracked_file_is_not_staged_by_surprise(root):
    (root / "mine.txt").write_text("a\nb\n")
    ws = Workspace(root)
    pending = stream(ws, sr("mine.txt", "b\n", "B\n"), context=["mine.txt"])
    Review(ws, pending).accept_all()
    with GitRepo.open(root) as repo:
        result = repo.stage_accepted(pending)
        assert repo.status()["mine.txt"].untracked
    assert not result.ok and "not tracked" in result.messages[0]


def test_staging_refuses_when_the_index_moved_under_the_hunk(root):
    ws, pending, _ = _accept_line_10(root, SRC)
    other = SRC.replace("line 10\n", "line 10 staged by hand\n")
    (root / "f.txt").write_text(other)
    git(root, "add", "f.txt")
    before = git(root, "diff", "--cached")
    with GitRepo.open(root) as repo:
        result = repo.stage_accepted(pending)
    assert not result.ok and "stage it by hand" in result.messages[0]
    assert git(root, "diff", "--cached") == before


def _conflicted(root: Path, how: str) -> None:
    git(root, "checkout", "-q", "-b", "other")
    (root / "g.txt").write_text("theirs\n")
    git(root, "commit", "-qam", "other")
    git(root, "checkout", "-q", "main")
    (root / "g.txt").write_text("ours\n")
    git(root, "commit", "-qam", "ours")
    cmd = {"merge": ["merge", "other"], "rebase": ["rebase", "other"],
           "cherry-pick": ["cherry-pick", "other"]}[how]
    assert subprocess.run(["git", *cmd], cwd=root, capture_output=True).returncode != 0


@pytest.mark.parametrize("how", ["merge", "rebase", "cherry-pick"])
def test_refuses_during_an_operation_in_progress_changing_nothing(root, how):
    ws, pending, _ = _accept_line_10(root, SRC)
    _conflicted(root, how)
    index = (root / ".git" / "index").read_bytes()
    head = git(root, "rev-parse", "HEAD")
    with GitRepo.open(root) as repo:
        result = repo.stage_accepted(pending)
        committed = repo.commit("should not happen")
    assert not result.ok and f"{'a ' + how} is in progress" in result.messages[0]
    assert not committed.ok and "in progress" in committed.message
    assert (root / ".git" / "index").read_bytes() == index and git(root, "rev-parse", "HEAD") == head


def test_refuses_with_unmerged_entries_even_without_merge_head(root):
    _conflicted(root, "merge")
    (root / ".git" / "MERGE_HEAD").unlink()  # e.g. a stash pop that conflicted
    with GitRepo.open(root) as repo:
        assert "unresolved conflicts (g.txt)" in repo.refusal()


# -- committing ----------------------------------------------------------------------------------
def test_commit_the_staged_hunks(root):
    ws, pending, _ = _accept_line_10(root, SRC)
    (root / "f.txt").write_text((root / "f.txt").read_text().replace("line 1\n", "mine\n"))
    with GitRepo.open(root) as repo:
        assert repo.stage_accepted(pending).ok
        result = repo.commit("Spell out line ten\n\nA body line.")
    assert result.ok and result.sha == git(root, "rev-parse", "HEAD").strip()
    assert git(root, "log", "-1", "--format=%B").strip() == "Spell out line ten\n\nA body line."
    shown = git(root, "show", "--format=", "HEAD")
    assert "+line ten b" in shown and "mine" not in shown
    assert git(root, "diff").count("+mine") == 1  # the user's edit is still theirs, unstaged


def test_a_failing_pre_commit_hook_is_shown_and_nothing_is_committed(root):
    hook = root / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'lint: trailing whitespace in f.txt' >&2\nexit 1\n")
    hook.chmod(0o755)
    ws, pending, _ = _accept_line_10(root, SRC)
    head = git(root, "rev-parse", "HEAD")
    with GitRepo.open(root) as repo:
        assert repo.stage_accepted(pending).ok
        result = repo.commit("x")
    assert not result.ok and "lint: trailing whitespace in f.txt" in result.message
    assert git(root, "rev-parse", "HEAD") == head
    assert "line ten" in git(root, "diff", "--cached")  # still staged


def test_a_passing_hook_runs(root):
    hook = root / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\ntouch {root}/hook-ran\n")
    hook.chmod(0o755)
    ws, pending, _ = _accept_line_10(root, SRC)
    with GitRepo.open(root) as repo:
        repo.stage_accepted(pending)
        assert repo.commit("ok").ok
    assert (root / "hook-ran").exists()


def test_nothing_staged_or_empty_message(root):
    with GitRepo.open(root) as repo:
        empty = repo.commit("  ")
        nothing = repo.commit("nothing")
    assert not empty.ok and "empty" in empty.message
    assert not nothing.ok and "nothing" in nothing.message.lower()


def test_the_accepted_states_are_what_is_staged(root):
    ws, pending, review = _accept_line_10(root, SRC)
    h10 = pending.files["f.txt"].hunks[0]
    review.undo()
    assert h10.state == HunkState.PENDING
    with GitRepo.open(root) as repo:
        result = repo.stage_accepted(pending)
    assert result.ok and result.staged == [] and git(root, "diff", "--cached") == ""


# -- a commit message proposed by the model -------------------------------------------------------
async def test_the_model_proposes_a_message_from_the_staged_diff(root):
    from app.core.git.commit_message import propose
    from app.providers.openai_chat import OpenAIChat
    from app.server.chat_server import ChatServer

    ws, pending, _ = _accept_line_10(root, SRC)
    server = ChatServer(replay="```\nCommit message: Spell out line ten\n\nThe number reads better.\n```\n")
    await server.start()
    provider = OpenAIChat(server.base_url, "replay")
    try:
        with GitRepo.open(root) as repo:
            repo.stage_accepted(pending)
            diff = repo.staged_diff()
            message = await propose(provider, diff)
            assert message == "Spell out line ten\n\nThe number reads better."
            assert repo.commit(message).ok
        sent = server.stats.bodies[0]["messages"]
        assert "+line ten b" in sent[-1]["content"] and "commit message" in sent[0]["content"]
        assert git(root, "log", "-1", "--format=%s").strip() == "Spell out line ten"
    finally:
        await provider.aclose()
        await server.close()


async def test_a_failing_back_end_says_why(root):
    from app.core.git.commit_message import ProposalFailed, propose
    from app.providers.openai_chat import OpenAIChat
    from app.server.chat_server import ChatServer
    from app.server.generation import Faults

    server = ChatServer(replay="x", faults=Faults(status=500))
    await server.start()
    provider = OpenAIChat(server.base_url, "replay", retries=0)
    try:
        with pytest.raises(ProposalFailed, match="injected failure|500"):
            await propose(provider, "diff --git a/x b/x\n+x\n")
        with pytest.raises(ProposalFailed, match="nothing is staged"):
            await propose(provider, "")
    finally:
        await provider.aclose()
        await server.close()


def test_tidy_gives_git_shape():
    from app.core.git.commit_message import tidy

    assert tidy('"Fix the parser"') == "Fix the parser"
    long = "Make the thing that does the other thing do it a great deal faster than before today"
    out = tidy(long)
    assert len(out) <= 72 and long.startswith(out)
    assert tidy("\n\nSummary: Add x\nbody line\n") == "Add x\n\nbody line"
