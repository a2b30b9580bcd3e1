"""No edit leaves the workspace: absolute paths, '..', symlinks out, .git/, binary files and
directories are refused with a clear message, and nothing at all is written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import init_repo, stream

from app.core.review import Review
from app.core.workspace import PathRefused, Workspace


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
