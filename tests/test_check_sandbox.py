"""`check_sandbox = true` (app/core/variants/check.py): the check runs in bubblewrap, with
the system read-only (/tmp too: its TMPDIR is in its worktree) and no network; it writes in
its worktree (git works there) and nowhere else. The same command without the sandbox writes where it likes: the
difference is the sandbox's. A real bwrap, a real server on 127.0.0.1, a real worktree."""

from __future__ import annotations

import shlex
import shutil
import socket
import sys
from pathlib import Path

import pytest
from conftest import git, init_repo

from app.core.variants.check import CheckRefused, Checks, sandbox_problem

WHY = sandbox_problem()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"the check sandbox: {WHY}")


async def run_check(root, cmd: str, sandbox: bool):
    checks = Checks(root, cmd, timeout=60, sandbox=sandbox)
    try:
        checks.start(1, {"f.txt": b"proposed\n"})
        checks.close_starts()
        await checks.first_pass()
        return checks.results[1]
    finally:
        await checks.aclose()


async def test_the_sandboxed_check_writes_only_in_its_worktree_and_reaches_no_network(tmp_path):
    root = init_repo(tmp_path / "r", {"f.txt": "old\n"})
    outside = tmp_path / "outside.txt"
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    probe = (f"{shlex.quote(sys.executable)} -c "
             + shlex.quote("import socket,sys\ntry:\n socket.create_connection(('127.0.0.1', "
                           f"{port}), timeout=5); print('NET: reached')\n"
                           "except OSError as e: print('NET: refused', e)\n"))
    fixed = Path("/var/tmp") / f"steer-sandbox-{tmp_path.name}.txt"
    cmd = (f"cat f.txt; echo made > inside.txt && cat inside.txt; git status --short; "
           f"{shlex.quote(sys.executable)} -c 'import tempfile; tempfile.mkstemp(); print(\"TMP: ok\")'; "
           f"{probe}; echo leak > {shlex.quote(str(outside))}; "
           f"echo leak > {shlex.quote(str(fixed))} || echo 'OUTSIDE: refused'; true")
    try:
        boxed = await run_check(root, cmd, sandbox=True)
        assert boxed.passed, boxed.output
        out = boxed.output
        assert "proposed" in out and "made" in out  # the proposal, and a write in the worktree
        assert "TMP: ok" in out  # temporary files: in the worktree's TMPDIR
        assert "?? inside.txt" in out and " M f.txt" in out  # git works in it
        assert "NET: refused" in out and "NET: reached" not in out
        assert "OUTSIDE: refused" in out and not fixed.exists() and not outside.exists()
        free = await run_check(root, cmd, sandbox=False)  # the same command, no sandbox
        assert "NET: reached" in free.output and outside.read_text() == "leak\n"
        assert fixed.read_text() == "leak\n"
    finally:
        listener.close()
        fixed.unlink(missing_ok=True)
    assert (root / "f.txt").read_text() == "old\n" and git(root, "status", "--short") == ""
    assert git(root, "worktree", "list").count("\n") == 1


def test_a_sandbox_that_cannot_run_is_refused_before_anything_is_made(tmp_path, monkeypatch):
    root = init_repo(tmp_path / "r", {"f.txt": "old\n"})
    bin_ = tmp_path / "bin"  # git, and no bwrap, to be found
    bin_.mkdir()
    (bin_ / "git").symlink_to(shutil.which("git"))
    monkeypatch.setenv("PATH", str(bin_))
    with pytest.raises(CheckRefused, match="check_sandbox: bubblewrap .bwrap. is not installed"):
        Checks(root, "/bin/true", sandbox=True)
    monkeypatch.undo()
    assert git(root, "worktree", "list").count("\n") == 1
