"""What a path a model names may be, before any file-system call: a workspace-relative POSIX
path, with no `..`, nothing in `.git/`, nothing absolute, and within the kernel's limits.
A name carried escaped (app/core/text/names.py: one that is not UTF-8, or holds a control
character) stands for the exact name it escapes. The workspace (workspace.py `check_path`)
then resolves symlinks and asks the file system the rest.

The limits: past Linux's PATH_MAX (4096 bytes) or NAME_MAX (255 bytes a name) the kernel
fails anyway, with an ENAMETOOLONG that the checks after this do not expect; and those checks
walk a path folder by folder: a model's `util.py/x/x/...`, 3,000 levels deep, cost thousands
of stats and then an exception that left its look-up unanswered. No real tree is 64 folders
deep.
"""

from __future__ import annotations

import os
from pathlib import PurePosixPath

from app.core.text.names import unescape


class PathRefused(ValueError):
    """An edit (or a look-up) aimed somewhere steer must not go."""


PATH_BYTES = 4096
NAME_BYTES = 255
PATH_DEPTH = 64


def too_long(p: str) -> str | None:
    """Why steer refuses path `p` (relative, POSIX) for its length or depth; None when it
    is within the limits. Costs no file-system call."""
    def size(s: str) -> int:  # (in UTF-8; never raises, whatever a model sent)
        return len(s.encode("utf-8", "surrogatepass"))

    parts = [s for s in p.split("/") if s not in ("", ".")]
    name = max(map(size, parts), default=0)
    total = size(p)
    if total <= PATH_BYTES and name <= NAME_BYTES and len(parts) <= PATH_DEPTH:
        return None
    shown = p if len(p) <= 60 else p[:60] + "…"
    why = (f"it is {total:,} bytes long" if total > PATH_BYTES
           else f"it is {len(parts):,} levels deep" if len(parts) > PATH_DEPTH
           else f"one of its names is {name:,} bytes long")
    return (f"refused {shown}: {why}. steer takes paths of at most {PATH_BYTES:,} bytes, "
            f"{PATH_DEPTH} levels and {NAME_BYTES} bytes a name.")


def normalize(raw: str) -> str:
    """`raw` as a workspace-relative POSIX path, refusing what can never be one."""
    p = raw.strip().strip("`'\"").strip()
    if not p or "\0" in p:
        raise PathRefused(f"refused an edit with an empty or invalid file name {raw!r}")
    if p.startswith(("/", "~")) or (len(p) > 1 and p[1] == ":") or \
            (p.startswith("\\") and unescape(p) is None):  # \\src\\a.py, not \\udce9.py
        raise PathRefused(f"refused {p}: absolute paths are outside the workspace")
    # a name the model copied from the map or a look-up, where one that is not plain text
    # is carried escaped (app/core/text/names.py): the exact name it stands for. (Messages
    # quote names raw: the screen's boundary and the request's escape them.)
    shown, name = p, unescape(p)
    if name is None:
        raise PathRefused(f"refused {shown}: a backslash in a file name starts no escape "
                          "steer writes (\\xe9, \\udce9, \\n, \\\\); paths use /")
    p = name
    if not p or "\0" in p:
        raise PathRefused(f"refused {shown}: an empty or invalid file name")
    try:
        os.fsencode(p)
    except UnicodeEncodeError:
        raise PathRefused(f"refused {shown}: a file name that is not valid text "
                          "(a surrogate no file name on this system holds)") from None
    if why := too_long(p):
        raise PathRefused(why)
    parts = [s for s in PurePosixPath(p).parts if s != "."]
    if not parts:
        raise PathRefused(f"refused {p}: not a file")
    if ".." in parts:
        raise PathRefused(f"refused {p}: '..' leads outside the workspace")
    if any(s.lower() == ".git" for s in parts):
        raise PathRefused(f"refused {p}: steer never writes inside .git/")
    return "/".join(parts)
