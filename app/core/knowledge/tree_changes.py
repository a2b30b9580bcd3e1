"""Which files of the map a change touches: a watcher's batch, where a folder moved in, moved
away or deleted stands for the files in it (`expand`); and a whole-tree comparison after a
branch switch or whatever a watcher may miss (`differing`). builder.py re-reads what these
name.
"""

from __future__ import annotations

import os
from pathlib import Path

from app.core.git.files import SKIP_DIRS
from app.core.knowledge.index import Index


def expand(root: Path, paths: set[str], index: Index) -> set[str]:
    """Folders among `paths` (moved in, moved away, deleted) as the files in them."""
    out = set()
    known_folders: set[str] | None = None
    for rel in paths:
        if rel in index.files:
            out.add(rel)
            continue
        full = root / rel
        if full.is_dir() and not full.is_symlink():
            for dirpath, dirs, names in os.walk(full):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
                base = os.path.relpath(dirpath, root).replace(os.sep, "/")
                out.update(f"{base}/{n}" for n in names)
            continue
        out.add(rel)
        if full.exists():
            continue
        if known_folders is None:  # every folder holding a known file, and its parents
            known_folders = set()
            for d in index.folders:
                while d and d not in known_folders:
                    known_folders.add(d)
                    d = d.rpartition("/")[0]
        if rel in known_folders:  # a folder that went away: its files did too
            out.update(p for p in index.files if p.startswith(rel + "/"))
    return out


def differing(root: Path, index: Index, listed_now: list[str]) -> set[str]:
    """Every path whose presence or stat differs from the index (after a branch switch or
    anything the watcher may have missed)."""
    listed = set(listed_now)
    top = str(root)
    out = set(index.files) ^ listed
    for rel in listed & set(index.files):
        try:
            st = os.stat(os.path.join(top, rel), follow_symlinks=False)
        except OSError:
            out.add(rel)
            continue
        if (st.st_mtime_ns, st.st_size, st.st_ino) != index.files[rel][1]:
            out.add(rel)
    return out

