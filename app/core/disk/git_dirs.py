"""Git repositories on disk: what a git dir is, and the one place that finds the repository
a path is in (gitpython, which also follows a linked worktree's `.git` file).

Everything that needs the repository asks here: the workspace for where its journal lives
(inside the git dir), the command line for the workspace's root, and the git room for the
long-lived Repo it works through (app/core/git/repository.py). Nothing else opens one. git
commands themselves run through one wrapper, app/core/git/command.py; the variant check
(app/core/variants/worktrees.py) asks git there, isolated, about the folder it checks.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from git import Repo


def is_git_dir(path: Path) -> bool:
    """git's own test (setup.c is_git_directory): HEAD, objects/ and refs/ together. Catches
    bare repositories and git dirs under any name, not only `.git`."""
    return ((path / "HEAD").is_file() or (path / "HEAD").is_symlink()) and \
        (path / "objects").is_dir() and (path / "refs").is_dir()


def find_repo(path: str | os.PathLike[str]) -> Repo | None:
    """The Repo containing `path`, or None (not a repository, no such path, or no git).
    The caller closes it."""
    try:
        import git  # gitpython: imported here, so that plain reads of the disk stay fast
    except ImportError:  # gitpython refuses to load without a git executable
        return None
    try:
        return git.Repo(path, search_parent_directories=True)
    except (git.GitError, OSError):  # not a repository, no such path
        return None


def find_root(start: Path) -> Path:
    """The repository's top level when `start` is inside one, else `start` itself."""
    repo = find_repo(start)
    if repo is None:
        return start
    try:
        top = repo.working_tree_dir
        return Path(top) if top else start
    finally:
        repo.close()


def git_dir_of(path: str | os.PathLike[str]) -> Path | None:
    """The git dir of the repository containing `path` (`git rev-parse --git-dir`), or None."""
    repo = find_repo(path)
    if repo is None:
        return None
    try:
        return Path(repo.git_dir)
    finally:
        repo.close()
