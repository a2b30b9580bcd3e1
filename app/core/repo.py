"""What the file tree shows: the workspace's files (respecting .gitignore) and git status.

Both come from one git command each (through gitpython's command wrapper), so a
50,000-file repository lists in well under a second; outside a repository we walk the
folder ourselves, skipping the usual heavy directories.
"""

from __future__ import annotations

import os
from pathlib import Path

SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache",
             ".pytest_cache", ".ruff_cache", ".tox", "dist", "build", ".steer"}


def _repo(root: Path):
    try:
        import git

        return git.Repo(root, search_parent_directories=False)
    except Exception:  # not a repository: callers fall back to the file system
        return None


def list_files(root: Path, limit: int = 500_000) -> list[str]:
    """Workspace-relative POSIX paths, sorted: tracked and untracked-but-not-ignored files."""
    repo = _repo(root)
    if repo is not None:
        out = repo.git.ls_files("--cached", "--others", "--exclude-standard", "-z")
        files = sorted({p for p in out.split("\0") if p})
        return files[:limit]
    files = []
    for dirpath, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        rel = os.path.relpath(dirpath, root)
        for n in names:
            files.append(n if rel == "." else f"{rel}/{n}".replace(os.sep, "/"))
            if len(files) >= limit:
                return sorted(files)
    return sorted(files)


def status(root: Path) -> dict[str, str]:
    """path -> one-letter badge: M modified, A added, D deleted, R renamed, ? untracked."""
    repo = _repo(root)
    if repo is None:
        return {}
    out = repo.git.status("--porcelain=v1", "-z", "--untracked-files=all")
    badges: dict[str, str] = {}
    entries = out.split("\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        x, y, path = entry[0], entry[1], entry[3:]
        if x == "R" or y == "R":
            i += 1  # the rename's source path follows
        if x == "?":
            badges[path] = "?"
        elif "D" in (x, y):
            badges[path] = "D"
        elif x == "A":
            badges[path] = "A"
        elif x == "R":
            badges[path] = "R"
        else:
            badges[path] = "M"
    return badges
