"""What the file tree shows: the workspace's files (respecting .gitignore) and git badges.

Inside a repository both come from git (app/core/git/repository.py: one git command each, so a
50,000-file repository lists in well under a second); outside one we walk the folder
ourselves, skipping the usual heavy directories. One-shot helpers for callers that hold no
GitRepo; a long-running caller keeps a GitRepo open instead (app/core/git/sync.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from app.core.git.repository import GitRepo, badges

SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache",
             ".pytest_cache", ".ruff_cache", ".tox", "dist", "build", ".steer"}


def walk_files(root: Path, limit: int = 500_000) -> list[str]:
    """Workspace-relative POSIX paths of a folder that is not a repository, sorted."""
    files = []
    for dirpath, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        rel = os.path.relpath(dirpath, root)
        for n in names:
            files.append(n if rel == "." else f"{rel}/{n}".replace(os.sep, "/"))
            if len(files) >= limit:
                return sorted(files)
    return sorted(files)


def list_files(root: Path, limit: int = 500_000) -> list[str]:
    """Workspace-relative POSIX paths, sorted: tracked and untracked-but-not-ignored files."""
    repo = GitRepo.open(root)
    if repo is None:
        return walk_files(root, limit)
    with repo:
        return repo.list_files(limit)


def status(root: Path) -> dict[str, str]:
    """path -> one-letter badge: M modified, A added, D deleted, R renamed, ? untracked."""
    repo = GitRepo.open(root)
    if repo is None:
        return {}
    with repo:
        return badges(repo.status())
