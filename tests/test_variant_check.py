"""app/core/variants/check.py against real repositories and real processes: a check command
runs on each variant in a worktree of its own that looks like the user's working tree now
(uncommitted changes, untracked files, deletions) with the variant's files on top; the first
to pass wins and the others are stopped; timeouts, Ctrl+C and a SIGKILLed steer leave no
process and no worktree behind; the user's files, index and refs are never touched."""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from conftest import git, init_repo

from app.core.variants.check import CheckRefused, Checks, command_error, refusal

REPO_ROOT = Path(__file__).resolve().parents[1]

# The CMD used by most tests: passes only when it sees the variant's a.py (NEW), the user's
# uncommitted b.txt, the untracked u.txt, not the ignored file, not the deleted files, and the
# executable bit of run.sh. `HANG` in a.py makes it hang after noting its pid in $MARK.
CMD = ('if grep -q HANG a.py; then echo $$ > "$MARK"; sleep 300; fi; '
       'cat a.py b.txt sub/u.txt; grep -q NEW a.py && grep -q USERMOD b.txt && '
       'test -f sub/u.txt && test ! -e ignored.log && test ! -e gone.txt && '
       'test ! -e userdel.txt && test -x run.sh && grep -q STAGED staged.txt')


def group_members(pgid: int) -> list[int]:
    """Processes of group `pgid` that still run (zombies do not), from /proc."""
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in "ZX":
            alive.append(int(entry))
    return alive


def my_check_dirs(pid: int | None = None) -> list[Path]:
    return sorted(Path(tempfile.gettempdir()).glob(f"steer-check-{pid or os.getpid()}-*"))


def worktrees(root: Path) -> list[str]:
    return [line for line in git(root, "worktree", "list", "--porcelain").splitlines()
            if line.startswith("worktree ")]


def wait_for(path: Path, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def snapshot(root: Path) -> dict[str, bytes]:
    """Everything of the user's that a check must not change."""
    git(root, "status")  # let git refresh its index now, not during the test
    files = {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
             if ".git" not in p.relative_to(root).parts and p.is_file()}
    return {
        "status": git(root, "status", "--porcelain").encode(),
        "cached": git(root, "diff", "--cached").encode(),
        "diff": git(root, "diff").encode(),
        "refs": git(root, "for-each-ref").encode() + git(root, "rev-parse", "HEAD").encode(),
        "index": hashlib.sha256((root / ".git" / "index").read_bytes()).digest(),
        **{f"file:{k}": v for k, v in files.items()},
    }


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    r = init_repo(tmp_path / "r", {
        "a.py": "OLD\n", "b.txt": "b\n", "gone.txt": "g\n", "userdel.txt": "d\n",
        "run.sh": "#!/bin/sh\n", "staged.txt": "s\n", ".gitignore": "*.log\n"})
    (r / "run.sh").chmod(0o755)
    git(r, "add", "run.sh")
    git(r, "commit", "-qm", "x")
    (r / "b.txt").write_text("b\nUSERMOD\n")  # the user's uncommitted change
    (r / "userdel.txt").unlink()  # the user's uncommitted deletion
    (r / "sub").mkdir()
    (r / "sub" / "u.txt").write_text("untracked\n")
    (r / "ignored.log").write_text("ignored\n")
    (r / "staged.txt").write_text("s\nSTAGED\n")
    git(r, "add", "staged.txt")
    (r / "run.sh").write_text("#!/bin/sh\necho user\n")  # modified, keeps its x bit
    monkeypatch.setenv("MARK", str(tmp_path / "mark"))
    return r


def variant(a: str) -> dict[str, bytes | None]:
    return {"a.py": a.encode(), "gone.txt": None, "run.sh": b"#!/bin/sh\necho variant\n"}


# -- what a check sees, who wins ------------------------------------------------------------
async def test_first_pass_picks_the_passing_variant_which_saw_the_users_tree(root):
    checks = Checks(root, CMD, timeout=60)
    try:
        checks.start(1, variant("OLDER\n"))
        checks.start(2, variant("NEW\n"))
        checks.close_starts()
        winner = await asyncio.wait_for(checks.first_pass(), 60)
    finally:
        await checks.aclose()
    assert winner is not None and winner.variant == 2 and winner.passed, winner
    assert winner.exit_code == 0 and winner.error == "" and winner.seconds >= 0
    assert "NEW\nb\nUSERMOD\nuntracked\n" in winner.output
    assert "NEW\n" in winner.output and "USERMOD" in winner.output and "untracked" in winner.output
    assert not checks.results[1].passed


async def test_run_all_reports_each_variant(root):
    checks = Checks(root, CMD, timeout=60)
    try:
        checks.start(1, variant("OLDER\n"))
        checks.start(2, variant("NEW\n"))
        checks.start(3, {"a.py": b"NEW\n"})  # does not delete gone.txt: fails
        results = await asyncio.wait_for(checks.run_all(), 60)
    finally:
        await checks.aclose()
    assert [(r.variant, r.exit_code, r.passed) for r in results] == \
        [(1, 1, False), (2, 0, True), (3, 1, False)]
    assert "OLDER" in results[0].output and results[0].error == ""
    assert checks.results[2].passed


async def test_the_others_are_cancelled_when_one_passes(root, tmp_path):
    checks = Checks(root, CMD, timeout=120)
    try:
        checks.start(1, variant("HANG\n"))
        pgid = int(await asyncio.to_thread(wait_for, tmp_path / "mark"))
        waiting = asyncio.create_task(checks.first_pass())
        await asyncio.sleep(0.2)
        assert not waiting.done()  # a variant started while first_pass waits still counts
        checks.start(2, variant("NEW\n"))
        winner = await asyncio.wait_for(waiting, 60)
        assert winner is not None and winner.variant == 2
        assert checks.results[1].error == "cancelled: variant 2 passed first"
        assert checks.results[1].exit_code is None and not checks.results[1].passed
        assert group_members(pgid) == []
    finally:
        await checks.aclose()


async def test_first_pass_is_none_when_nothing_passes(root):
    checks = Checks(root, "exit 3", timeout=60)
    try:
        checks.start(1, variant("NEW\n"))
        checks.start(2, variant("NEW\n"))
        checks.close_starts()
        assert await asyncio.wait_for(checks.first_pass(), 60) is None
        assert {r.exit_code for r in checks.results.values()} == {3}
        with pytest.raises(RuntimeError):
            checks.start(3, variant("NEW\n"))
    finally:
        await checks.aclose()


async def test_aclose_leaves_the_users_repository_as_it_was(root):
    before = snapshot(root)
    checks = Checks(root, CMD, timeout=60)
    try:
        checks.start(1, variant("NEW\n"))
        checks.start(2, variant("HANG\n"))  # still running at aclose
        pgid = int(await asyncio.to_thread(wait_for, Path(os.environ["MARK"])))
        assert len(worktrees(root)) >= 2 and my_check_dirs() and group_members(pgid)
    finally:
        await checks.aclose()
    assert group_members(pgid) == []
    await checks.aclose()  # idempotent
    assert [line for line in worktrees(root)] == [f"worktree {root}"]
    wt_meta = root / ".git" / "worktrees"
    assert not wt_meta.exists() or list(wt_meta.iterdir()) == []
    assert my_check_dirs() == []
    index_after = hashlib.sha256((root / ".git" / "index").read_bytes()).digest()
    assert index_after == before["index"]
    assert snapshot(root) == before


async def test_from_a_subdirectory_the_command_runs_in_the_same_one(root):
    checks = Checks(root / "sub", "test -f u.txt && test -f ../a.py && pwd", timeout=60)
    try:
        checks.start(1, variant("NEW\n"))
        [r] = await asyncio.wait_for(checks.run_all(), 60)
    finally:
        await checks.aclose()
    assert r.passed, r
    assert "/steer-check-" in r.output and r.output.rstrip().endswith("/sub")


# -- how a check can fail -------------------------------------------------------------------
async def test_a_hanging_command_times_out_with_its_children(root, tmp_path):
    mark = tmp_path / "mark"
    checks = Checks(root, f"echo $$ > {mark}; sh -c 'sleep 300 & sleep 300'", timeout=1)
    try:
        checks.start(1, variant("NEW\n"))
        [result] = await asyncio.wait_for(checks.run_all(), 60)
    finally:
        await checks.aclose()
    assert result.exit_code is None and not result.passed
    assert result.error == "timed out after 1 s; killed with its children"
    pgid = int(mark.read_text())
    assert group_members(pgid) == []


async def test_a_command_that_ignores_sigterm_gets_sigkill(root, tmp_path):
    mark = tmp_path / "mark"
    checks = Checks(root, f"trap '' TERM; echo $$ > {mark}; sleep 300 & sleep 300", timeout=0.5)
    try:
        checks.start(1, {})
        [result] = await asyncio.wait_for(checks.run_all(), 60)
    finally:
        await checks.aclose()
    assert result.error.startswith("timed out after 0.5 s")
    assert group_members(int(mark.read_text())) == []


async def test_not_found_and_crash_are_named(root):
    checks = Checks(root, "true && nosuchcmd-xyz --flag", timeout=60)
    try:
        checks.start(1, {})
        [nf] = await asyncio.wait_for(checks.run_all(), 60)
    finally:
        await checks.aclose()
    assert nf.error == "check command not found: nosuchcmd-xyz" and nf.exit_code == 127
    checks = Checks(root, "echo before; kill -SEGV $$", timeout=60)
    try:
        checks.start(1, {})
        [crash] = await asyncio.wait_for(checks.run_all(), 60)
    finally:
        await checks.aclose()
    assert not crash.passed and "SIGSEGV" in crash.error and "before" in crash.output


async def test_a_variant_path_that_leaves_the_worktree_is_refused(root, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, root / "out")
    git(root, "add", "out")
    git(root, "commit", "-qm", "link")
    checks = Checks(root, "true", timeout=60)
    try:
        checks.start(1, {"out/x.txt": b"evil"})
        checks.start(2, {"../x.txt": b"evil"})
        checks.start(3, {".git/config": b"evil"})
        results = await asyncio.wait_for(checks.run_all(), 60)
    finally:
        await checks.aclose()
    assert [r.passed for r in results] == [False, False, False]
    assert all(r.error.startswith("refused path") for r in results), results
    assert list(outside.iterdir()) == [] and not (tmp_path / "x.txt").exists()


@pytest.mark.parametrize("names", [("GIT_DIR", "GIT_INDEX_FILE"), ("GIT_INDEX_FILE",)])
async def test_the_environment_points_git_at_the_worktree(root, monkeypatch, names):
    # steer started from a git hook (which sets GIT_INDEX_FILE, maybe GIT_DIR): the check's
    # worktree is its own, and — pinning the isolation of app/core/git/command.py — its
    # `git worktree add` never writes the user's index: the staged change stays staged
    index = root / ".git" / "index"
    staged, index_bytes = git(root, "diff", "--cached"), index.read_bytes()
    assert "+STAGED" in staged
    values = {"GIT_DIR": str(root / ".git"), "GIT_INDEX_FILE": str(index)}
    for name in names:
        monkeypatch.setenv(name, values[name])
    checks = Checks(root, "git rev-parse --absolute-git-dir | grep /worktrees/steer-check- && "
                          "git status --porcelain", timeout=60)
    try:
        checks.start(1, variant("NEW\n"))
        [r] = await asyncio.wait_for(checks.run_all(), 60)
    finally:
        await checks.aclose()
    for name in names:
        monkeypatch.delenv(name)
    assert index.read_bytes() == index_bytes
    assert git(root, "diff", "--cached") == staged
    assert r.passed, r
    assert " M a.py" in r.output and " D gone.txt" in r.output


# -- up front -------------------------------------------------------------------------------
def test_command_error():
    msg = command_error("nosuchcmd-xyz --flag")
    assert msg is not None and "nosuchcmd-xyz" in msg and "not found" in msg
    assert command_error("true") is None
    assert command_error("python3 -c 'x'") is None
    assert command_error("test -f x && [ -d y ]") is None
    assert command_error("cd sub && make") is None
    assert command_error("FOO=1 python3 -c 1") is None
    assert "nosuch-zz" in (command_error("FOO=1 nosuch-zz") or "")
    bad = command_error("echo 'unbalanced")
    assert bad is not None and "quotation" in bad
    assert command_error("   ") == "check command is empty"


def test_refusal(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    assert "not a git repository" in (refusal(plain) or "")
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    assert "bare" in (refusal(bare) or "")
    unborn = init_repo(tmp_path / "unborn")
    assert "no commit" in (refusal(unborn) or "")
    r = init_repo(tmp_path / "m", {"f.txt": "base\n"})
    assert refusal(r) is None and refusal(r / ".git") is not None
    git(r, "checkout", "-qb", "side")
    (r / "f.txt").write_text("side\n")
    git(r, "commit", "-qam", "side")
    git(r, "checkout", "-q", "main")
    (r / "f.txt").write_text("main\n")
    git(r, "commit", "-qam", "main")
    merge = subprocess.run(["git", "merge", "side"], cwd=r, capture_output=True, text=True)
    assert merge.returncode != 0 and (r / ".git" / "MERGE_HEAD").exists()
    assert "merge is in progress" in (refusal(r) or "")
    with pytest.raises(CheckRefused, match="merge"):
        Checks(r, "true")
    with pytest.raises(CheckRefused, match="nosuchcmd"):
        Checks(init_repo(tmp_path / "ok", {"f": "x"}), "nosuchcmd-xyz")
    assert my_check_dirs() == []


# -- Ctrl+C and a SIGKILLed steer -------------------------------------------------------------
DRIVER = textwrap.dedent("""
    import asyncio, signal, sys
    from pathlib import Path
    from app.core.variants.check import Checks

    # Ctrl+C as a terminal delivers it, however the suite was started: a shell starts a
    # background job (`make test &`) with SIGINT ignored, and the child would inherit that
    signal.signal(signal.SIGINT, signal.default_int_handler)

    async def main():
        checks = Checks(Path(sys.argv[1]), sys.argv[2], timeout=600)
        try:
            checks.start(1, {"a.py": b"NEW\\n"})
            await checks.run_all()
        finally:
            await checks.aclose()

    asyncio.run(main())
""")


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp dir of this test's own for the check worktrees: a steer in another test run at
    the same time would otherwise clean up the dead drivers' leftovers before we look."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setenv("TMPDIR", str(tmp))
    return tmp


def start_driver(root: Path, mark: Path) -> tuple[subprocess.Popen[str], int]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(root), f"echo $$ > {mark}; sh -c 'sleep 300 & sleep 300'"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pgid = int(wait_for(mark))
    except AssertionError:
        proc.kill()
        raise AssertionError(proc.communicate()[1]) from None
    return proc, pgid


def test_ctrl_c_leaves_no_worktree_and_no_process(root, tmp_path, private_tmp):
    proc, pgid = start_driver(root, tmp_path / "mark")
    assert group_members(pgid) and len(worktrees(root)) == 2 and my_check_dirs(proc.pid)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "KeyboardInterrupt" in err, err
    assert group_members(pgid) == []
    assert worktrees(root) == [f"worktree {root}"]
    assert my_check_dirs(proc.pid) == []


async def test_a_killed_steers_leftovers_go_with_the_next_checks(root, tmp_path, private_tmp):
    proc, pgid = start_driver(root, tmp_path / "mark")
    proc.kill()
    proc.communicate(timeout=60)
    [stale] = my_check_dirs(proc.pid)
    assert stale.parent == private_tmp
    assert f"worktree {stale}" in worktrees(root) and group_members(pgid)  # left behind
    checks = Checks(root, "true")
    try:  # gone with the construction, not only with aclose
        assert not stale.exists() and my_check_dirs(proc.pid) == []
        assert worktrees(root) == [f"worktree {root}"]
        assert group_members(pgid) == []
    finally:
        await checks.aclose()


async def test_a_users_own_worktree_keeps_its_metadata(root, tmp_path):
    """Not a `git worktree prune`: a user's worktree whose folder is away (an unmounted
    drive) is not forgotten by the checks."""
    git(root, "worktree", "add", "-q", "--detach", str(tmp_path / "userwt"))
    (tmp_path / "userwt").rename(tmp_path / "away")
    checks = Checks(root, "true")
    try:
        checks.start(1, {})
        [r] = await asyncio.wait_for(checks.run_all(), 60)
    finally:
        await checks.aclose()
    assert r.passed
    assert [p.name for p in (root / ".git" / "worktrees").iterdir()] == ["userwt"]


async def test_a_killed_steers_metadata_goes_also_when_its_folder_is_gone(root, tmp_path, private_tmp):
    proc, pgid = start_driver(root, tmp_path / "mark")
    proc.kill()
    proc.communicate(timeout=60)
    os.killpg(pgid, signal.SIGKILL)  # as a reboot would: the processes and /tmp are gone
    [stale] = my_check_dirs(proc.pid)
    shutil.rmtree(stale)
    assert len(list((root / ".git" / "worktrees").iterdir())) == 1
    checks = Checks(root, "true")
    try:  # gone with the construction, not only with aclose
        assert not (root / ".git" / "worktrees").exists()
        assert worktrees(root) == [f"worktree {root}"]
    finally:
        await checks.aclose()
