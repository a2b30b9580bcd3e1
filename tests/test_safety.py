"""No edit leaves the workspace: absolute paths, '..', symlinks out, .git/, binary files and
directories are refused with a clear message, and nothing at all is written."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import init_repo, stream

from app.core.disk.workspace import PathRefused, Workspace
from app.core.review.review import Review


def tree(root: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            p = Path(dirpath, f)
            out[str(p.relative_to(root))] = p.read_bytes() if not p.is_symlink() else b"->"
    return out


@pytest.fixture
def setup(tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("keep\n")
    root = init_repo(tmp_path / "r", {"ok.txt": "a\n", "img.png": b"\x89PNG\r\n\x1a\n\x00\x00data"})
    (root / "out").symlink_to(outside)
    (root / "gitlink").symlink_to(root / ".git")
    (root / "sub").mkdir()
    return root, outside


@pytest.mark.parametrize("path,why", [
    ("/etc/passwd", "absolute"),
    ("../outside/secret.txt", "'..'"),
    ("sub/../../outside/secret.txt", "'..'"),
    ("out/secret.txt", "symlink leads outside"),
    (".git/config", ".git"),
    ("sub/.GIT/hooks/pre-commit", ".git"),
    ("gitlink/config", "into .git"),
    ("sub", "directory"),
    ("C:/Windows/x.txt", "absolute"),
    ("img.png", "binary"),
])
def test_refused_edits_write_nothing(setup, path, why):
    root, outside = setup
    before_in, before_out = tree(root), tree(outside)
    answer = (f"*** Begin Patch\n*** Add File: {path}\n+pwned\n*** Update File: ok.txt\n@@\n-a\n+b\n"
              "*** End Patch\n")
    ws = Workspace(root)
    pending = stream(ws, answer, fmt="apply_patch")
    assert len(pending.errors) == 1 and why in pending.errors[0].message
    assert list(pending.files) == ["ok.txt"]
    review = Review(ws, pending)
    review.accept_all()
    after = tree(root)
    assert after.pop("ok.txt") == b"b\n"
    before_in.pop("ok.txt")
    assert {k: v for k, v in after.items() if not k.startswith(".git")} == {
        k: v for k, v in before_in.items() if not k.startswith(".git")}
    assert tree(outside) == before_out


def test_search_replace_paths_are_checked_too(setup):
    root, outside = setup
    pending = stream(Workspace(root), "../outside/secret.txt\n<<<<<<< SEARCH\nkeep\n=======\nx\n"
                     ">>>>>>> REPLACE\n")
    assert "'..'" in pending.errors[0].message and not pending.files
    assert (outside / "secret.txt").read_text() == "keep\n"


def test_check_path_normalises_harmless_forms(tmp_path):
    ws = Workspace(tmp_path)
    assert ws.check_path("./a/./b.py") == "a/b.py"
    assert ws.check_path("`a.py`") == "a.py"
    with pytest.raises(PathRefused):
        ws.check_path("")
    with pytest.raises(PathRefused, match="backslash"):
        ws.check_path("a\\..\\..\\x")


def test_writing_through_an_inner_symlink_keeps_the_link(tmp_path):
    root = init_repo(tmp_path / "r", {"real.txt": "x\n"})
    (root / "link.txt").symlink_to("real.txt")
    ws = Workspace(root)
    pending = stream(ws, "link.txt\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n")
    Review(ws, pending).accept_all()
    assert (root / "link.txt").is_symlink() and (root / "real.txt").read_text() == "y\n"


def test_not_utf8_file_is_refused_and_untouched(tmp_path):
    raw = "café\n".encode("latin-1")
    root = init_repo(tmp_path / "r", {"l1.txt": raw})
    pending = stream(Workspace(root), "l1.txt\n<<<<<<< SEARCH\ncaf\n=======\nx\n>>>>>>> REPLACE\n")
    assert "not valid UTF-8" in pending.errors[0].message
    assert (root / "l1.txt").read_bytes() == raw


# -- one file, one name; links, FIFOs, sockets, bare repositories, read-only files -------------
def sr(path: str, old: str, new: str) -> str:
    return f"{path}\n<<<<<<< SEARCH\n{old}=======\n{new}>>>>>>> REPLACE\n"


def test_a_symlink_and_its_target_share_one_pending_diff(tmp_path):
    """Both names edited in one answer: both hunks land in the one file, and undo works."""
    src = "".join(f"line {i}\n" for i in range(1, 11))
    root = init_repo(tmp_path / "r", {"real.txt": src})
    (root / "alias.txt").symlink_to("real.txt")
    ws = Workspace(root)
    pending = stream(ws, sr("alias.txt", "line 2\n", "two\n") + sr("real.txt", "line 8\n", "eight\n"))
    assert list(pending.files) == ["real.txt"] and len(pending.hunks) == 2
    review = Review(ws, pending)
    out = review.accept_all()
    assert len(out.accepted) == 2 and out.ok, out
    assert (root / "real.txt").read_text() == src.replace("line 2\n", "two\n").replace("line 8\n", "eight\n")
    assert (root / "alias.txt").is_symlink()
    review.undo()
    assert (root / "real.txt").read_text() == src and (root / "alias.txt").is_symlink()


def test_deleting_a_symlink_deletes_the_link_and_undo_restores_the_link(tmp_path):
    root = init_repo(tmp_path / "r", {"real.txt": "keep\n"})
    (root / "alias.txt").symlink_to("real.txt")
    ws = Workspace(root)
    pending = stream(ws, "*** Begin Patch\n*** Delete File: alias.txt\n*** End Patch\n", fmt="apply_patch")
    assert list(pending.files) == ["alias.txt"]
    review = Review(ws, pending)
    assert review.accept_all().ok
    assert not (root / "alias.txt").is_symlink() and not (root / "alias.txt").exists()
    assert (root / "real.txt").read_text() == "keep\n"
    review.undo()
    assert (root / "alias.txt").is_symlink() and os.readlink(root / "alias.txt") == "real.txt"
    assert (root / "real.txt").read_text() == "keep\n"


def test_moving_a_symlink_is_refused(tmp_path):
    root = init_repo(tmp_path / "r", {"real.txt": "a\n"})
    (root / "alias.txt").symlink_to("real.txt")
    pending = stream(Workspace(root), "*** Begin Patch\n*** Update File: alias.txt\n*** Move to: "
                     "b.txt\n@@\n-a\n+b\n*** End Patch\n", fmt="apply_patch")
    assert "symlink" in pending.errors[0].message and not pending.hunks


@pytest.mark.parametrize("kind", ["fifo", "socket", "device"])
def test_fifos_sockets_and_devices_are_refused_as_edit_targets(tmp_path, kind):
    root = init_repo(tmp_path / "r", {"ok.txt": "a\n"})
    if kind == "fifo":
        os.mkfifo(root / "special.txt")
    elif kind == "device":
        try:  # a character device like /dev/null (1, 3)
            os.mknod(root / "special.txt", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except OSError:
            pytest.skip("mknod is not permitted here")
    else:
        import socket

        s = socket.socket(socket.AF_UNIX)
        s.bind(str(root / "special.txt"))
    ws = Workspace(root)
    pending = stream(ws, "special.txt\n<<<<<<< SEARCH\n=======\nx\n>>>>>>> REPLACE\n")
    assert "regular files only" in pending.errors[0].message and not pending.files
    with pytest.raises(PathRefused):
        ws.read_file("special.txt")  # returns at once: never opens a FIFO for a blocking read


@pytest.mark.parametrize("path", ["config", "hooks/pre-commit", "HEAD"])
def test_a_bare_repository_is_as_protected_as_dot_git(tmp_path, path):
    bare = tmp_path / "b.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    (bare / "hooks" / "pre-commit").write_text("#!/bin/sh\n")
    before = tree(bare)
    ws = Workspace(bare)
    pending = stream(ws, f"*** Begin Patch\n*** Add File: {path}\n+owned\n*** End Patch\n",
                     fmt="apply_patch")
    assert "git repository" in pending.errors[0].message and not pending.files
    assert tree(bare) == before
    # a folder inside a bare repository, and a bare repository nested in a workspace
    with pytest.raises(PathRefused):
        Workspace(bare / "hooks").check_path("pre-commit")
    root = init_repo(tmp_path / "r", {"a.txt": "a\n"})
    subprocess.run(["git", "init", "-q", "--bare", str(root / "vendor" / "lib.git")], check=True)
    with pytest.raises(PathRefused, match="git repository"):
        Workspace(root).check_path("vendor/lib.git/hooks/post-checkout")


def test_read_only_files_are_refused_unless_allowed(tmp_path):
    root = init_repo(tmp_path / "r", {"ro.txt": "a\n"})
    os.chmod(root / "ro.txt", 0o444)
    answer = sr("ro.txt", "a\n", "b\n")
    pending = stream(Workspace(root), answer)
    assert "read-only" in pending.errors[0].message and not pending.files
    ws = Workspace(root, allow_read_only=True)
    assert Review(ws, stream(ws, answer)).accept_all().ok
    assert (root / "ro.txt").read_text() == "b\n"
    assert stat.S_IMODE((root / "ro.txt").stat().st_mode) == 0o444  # and still read-only
    # made read-only while the answer streamed: refused at accept, nothing written
    (root / "w.txt").write_text("a\n")
    ws = Workspace(root)
    pending = stream(ws, sr("w.txt", "a\n", "b\n"))
    os.chmod(root / "w.txt", 0o444)
    out = Review(ws, pending).accept_all()
    assert not out.ok and "read-only" in " ".join(out.not_written)
    assert (root / "w.txt").read_text() == "a\n"


def test_a_file_swapped_for_an_outside_symlink_mid_stream_is_not_written(setup):
    root, outside = setup
    ws = Workspace(root)
    pending = stream(ws, sr("ok.txt", "a\n", "b\n"))
    os.unlink(root / "ok.txt")
    (root / "ok.txt").symlink_to(outside / "secret.txt")
    out = Review(ws, pending).accept_all()
    assert out.conflicts and not out.written and "symlink" in " ".join(out.messages)
    assert (outside / "secret.txt").read_text() == "keep\n"
    assert (root / "ok.txt").is_symlink()


def test_a_folder_swapped_for_a_symlink_is_not_followed(setup):
    root, outside = setup
    (root / "sub" / "s.txt").write_text("a\n")
    ws = Workspace(root)
    pending = stream(ws, sr("sub/s.txt", "a\n", "b\n"))
    os.rename(root / "sub", root / "sub.old")
    (root / "sub").symlink_to(outside)
    (outside / "s.txt").write_text("a\n")  # the same text, outside: must not be written
    out = Review(ws, pending).accept_all()
    assert not out.written and (outside / "s.txt").read_text() == "a\n"


def test_a_move_destination_created_while_streaming_is_not_overwritten(tmp_path):
    root = init_repo(tmp_path / "r", {"f.txt": "a\nb\n"})
    ws = Workspace(root)
    pending = stream(ws, "*** Begin Patch\n*** Update File: f.txt\n*** Move to: g.txt\n@@\n a\n-b\n"
                     "+B\n*** End Patch\n", fmt="apply_patch")
    (root / "g.txt").write_text("the user's new file\n")
    out = Review(ws, pending).accept_all()
    assert out.conflicts and not out.written and "g.txt" in " ".join(out.messages)
    assert (root / "g.txt").read_text() == "the user's new file\n"
    assert (root / "f.txt").read_text() == "a\nb\n"
