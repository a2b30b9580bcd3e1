"""Where steer keeps, per user, what is not the user's files: `$XDG_STATE_HOME/steer`, else
`~/.local/state/steer`. The journal of a workspace outside git (app/core/disk/workspace.py),
the saved sessions (app/core/storage/store.py), `steer serve`'s registry and log
(app/providers/serve_registry.py), the repository map's cache, `steer doctor`'s log and the
UI's remembered choices live under it; nothing is ever written into the working tree.

The directory can be unusable ($XDG_STATE_HOME names a file, a folder steer may not write,
a path that cannot be made). Its users then say so in one line (`StateUnusable`) and do
without: sessions are not saved, an accept outside git is refused (its journal is what
makes undo work: rule 5), a cache is not kept."""

from __future__ import annotations

import os
import stat
from pathlib import Path


class StateUnusable(OSError):
    """A folder steer keeps its state in cannot be made or written. The message is one line:
    what cannot be kept, where, why, and what moves it."""


def state_home() -> Path:
    """steer's directory in the user's state dir (read from the environment at each call:
    tests and benchmarks move it)."""
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "steer"


def ensure(path: Path, what: str) -> Path:
    """`path` as a folder this user can write, made if need be (mode 0700); else
    StateUnusable, naming `what` ("sessions") cannot be kept there and why."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied", str(path))
    except OSError as exc:
        hint = ""
        if path == state_home() or state_home() in path.parents:
            hint = " (point $XDG_STATE_HOME at a folder steer can write)"
        raise StateUnusable(f"{what} cannot be kept in {path}: {why_unusable(path, exc)}"
                            f"{hint}") from None
    return path


def why_unusable(path: Path, exc: OSError | None = None) -> str:
    """Why `path` is not a folder this user can write ("" when it is, or seems it can be
    made; nothing is made): the part of it that is in the way, else what the system said."""
    for p in (path, *path.parents):
        try:
            st = os.stat(p)
        except (FileNotFoundError, NotADirectoryError):  # not there, or a file above it
            continue
        except OSError as err:  # a name too long, a folder above it this user cannot enter
            return f"{p}: {(err.strerror or str(err)).lower()}"
        if not stat.S_ISDIR(st.st_mode):
            return f"{p} is not a directory"
        if not os.access(p, os.W_OK | os.X_OK):
            return f"{p} is not writable"
        break
    if exc is None:
        return ""
    where = f" ({exc.filename})" if exc.filename else ""
    return f"{(exc.strerror or str(exc)).lower()}{where}"
