"""The check's throwaway worktrees of the user's repository (app/core/variants/check.py runs
a check command in them): whether one can be made, making one that looks like the user's
tree now, and removing it again with its metadata, also after a steer that died.

Why worktrees and not the user's tree: rule 1 (nothing is written to the working tree
except by an accept) holds for checks too, and several variants are checked at once. A
worktree (`git worktree add --detach`) shares the object store, so it is cheap; it starts at
HEAD and is then made to look like the user's working tree as it is now (uncommitted
changes, untracked non-ignored files, deletions), with the variant's files on top. The
user's index, refs and files are never written: every git command here runs isolated
(app/core/git/command.py drops GIT_DIR, GIT_INDEX_FILE and the like), and the only trace in
the repository is the worktree's metadata under .git/worktrees/, removed again.

A worktree's folder is named after the steer that made it (PREFIX, its pid), so the next
steer can tell a dead one's leftovers from a live one's.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from app.core.disk.processes import pid_alive
from app.core.git.command import Ran, run_git

PREFIX = "steer-check-"
IN_PROGRESS = (("MERGE_HEAD", "a merge"), ("rebase-merge", "a rebase"),
               ("rebase-apply", "a rebase (or git am)"), ("CHERRY_PICK_HEAD", "a cherry-pick"),
               ("REVERT_HEAD", "a revert"), ("BISECT_LOG", "a bisect"))


def _git(root: Path, *args: str, check: bool = True, options: tuple[str, ...] = ()) -> Ran:
    return run_git(root, args, options=options, isolated=True, check=check)


def _text(out: bytes) -> str:
    return os.fsdecode(out).strip()


# -- the repository ------------------------------------------------------------------------------
def refusal(root: Path) -> str | None:
    """Why a check worktree cannot be made for the repository at `root`, or None."""
    if not Path(root).is_dir():
        return f"not a directory: {root}"
    try:
        out = _git(root, "rev-parse", "--is-bare-repository", "--is-inside-git-dir",
                   "--absolute-git-dir", check=False)
    except OSError:
        return "git is not installed"
    if out.status != 0:
        return f"not a git repository: {root}"
    bare, inside_git_dir, git_dir = os.fsdecode(out.out).splitlines()[:3]
    if bare == "true":
        return f"a bare repository has no working tree to check: {root}"
    if inside_git_dir == "true":
        return f"inside a git dir, not a working tree: {root}"
    for name, what in IN_PROGRESS:
        if os.path.lexists(os.path.join(git_dir, name)):
            return f"{what} is in progress: finish or abort it before checking variants"
    if _git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False).status != 0:
        return "no commit yet: a check worktree starts from HEAD, so make a first commit"
    return None


def top_level(root: Path) -> tuple[Path, str]:
    """(the working tree's top level, `root`'s folder under it: "" or "sub/dir/")."""
    return (Path(_text(_git(root, "rev-parse", "--show-toplevel").out)),
            _text(_git(root, "rev-parse", "--show-prefix").out))


def common_dir(root: Path) -> Path:
    """The git dir the worktrees share (their metadata is in its worktrees/)."""
    return Path(_text(_git(root, "rev-parse", "--path-format=absolute", "--git-common-dir").out))


def changed_paths(root: Path) -> list[str]:
    """Paths that differ between HEAD and the user's working tree (staged, unstaged,
    untracked, deleted), without writing the index (`--no-optional-locks`)."""
    out = _git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames",
               "--ignore-submodules=all", options=("--no-optional-locks",)).out
    return [os.fsdecode(rec[3:]) for rec in out.split(b"\0") if len(rec) > 3]


# -- making and removing worktrees -----------------------------------------------------------
def new_folder(variant: int) -> Path:
    """An empty folder for variant `variant`'s worktree, named after this steer."""
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-v{variant}-"))


def add(root: Path, tree: Path, lock: threading.Lock) -> None:
    """A detached worktree of HEAD at `tree`, hooks off. One `worktree add` at a time (under
    `lock`): git reads the other worktrees' metadata while it adds, and a half-made one fails
    it (another steer's too: hence the retries)."""
    for attempt in range(3):
        with lock:
            made = _git(root, "worktree", "add", "--detach", "--quiet", str(tree), "HEAD",
                        check=False, options=("-c", "core.hooksPath=/dev/null"))
        if made.status == 0:
            return
        if attempt == 2:
            raise RuntimeError(f"git worktree add failed: {made.err.strip()[-300:]}")
        time.sleep(0.2)


def remove(root: Path, path: Path) -> None:
    _git(root, "worktree", "remove", "--force", "--force", str(path), check=False)
    shutil.rmtree(path, ignore_errors=True)


def owner(folder: str) -> int | None:
    """The pid of the steer that made a check worktree folder (it is in the name)."""
    m = re.match(re.escape(PREFIX) + r"(\d+)-", os.path.basename(folder))
    return int(m.group(1)) if m else None


def _ours_or_dead(folder: str) -> bool:
    pid = owner(folder)
    return pid is not None and (pid == os.getpid() or not pid_alive(pid))


def forget(common: Path) -> None:
    """Drop the metadata (.git/worktrees/<name>) of check worktrees whose folder is gone and
    whose steer is this one or dead. Not `git worktree prune`: that would also drop the
    metadata of a user's own worktree whose folder is only unmounted for now."""
    meta = common / "worktrees"
    with contextlib.suppress(OSError):
        for entry in meta.iterdir():
            try:
                folder = os.path.dirname((entry / "gitdir").read_text().strip())
            except OSError:
                continue
            if _ours_or_dead(folder) and not os.path.lexists(folder):
                shutil.rmtree(entry, ignore_errors=True)
        meta.rmdir()  # as git leaves it: no worktrees/ folder once the last one is gone


def dead_folders() -> list[Path]:
    """Check worktree folders whose steer is gone (its pid is in the folder's name)."""
    found = []
    with contextlib.suppress(OSError):
        for entry in Path(tempfile.gettempdir()).iterdir():
            pid = owner(entry.name)
            if pid is not None and entry.is_dir() and not entry.is_symlink() and not pid_alive(pid):
                found.append(entry)
    return found


# -- filling a worktree ------------------------------------------------------------------------
def copy_entry(src: Path, dst: Path) -> None:
    """Make `dst` what `src` is now: a file (mode kept), a symlink, or nothing."""
    try:
        st = src.lstat()
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        return  # a submodule or nested repository: left as HEAD has it
    if dst.is_dir() and not dst.is_symlink():
        shutil.rmtree(dst)
    elif os.path.lexists(dst):
        dst.unlink()
    if st is None:
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dst, follow_symlinks=False)


def plain(rel: str) -> None:
    """ValueError unless `rel` is a plain repo-relative path (no absolute, `..` or .git)."""
    parts = Path(rel).parts
    if not rel or Path(rel).is_absolute() or ".." in parts or ".git" in parts:
        raise ValueError(f"refused path: {rel}")


def inside(base: Path, rel: str) -> Path:
    """`base/rel` when it stays inside `base` (no absolute path, `..`, .git, or a symlinked
    folder leading out), else ValueError."""
    plain(rel)
    target = base / rel
    real_base = os.path.realpath(base)
    parent = os.path.realpath(target.parent)
    if os.path.commonpath([real_base, parent]) != real_base:
        raise ValueError(f"refused path (leaves the worktree): {rel}")
    return target


def write_variant(tree: Path, files: Mapping[str, bytes | None]) -> None:
    """The variant's files into the worktree (None: deleted)."""
    for rel, content in files.items():
        target = inside(tree, rel)
        if content is None:
            if os.path.lexists(target) and not target.is_dir():
                target.unlink()
            continue
        if target.is_symlink():
            target.unlink()
        target.parent.mkdir(parents=True, exist_ok=True)
        inside(tree, rel)  # again: mkdir may have walked through a symlink
        with open(target, "wb") as fh:  # an existing file keeps its mode
            fh.write(content)
