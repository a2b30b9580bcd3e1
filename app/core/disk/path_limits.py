"""How long and how deep a path steer takes: checked before any file-system call, on every
path an edit or a look-up names (workspace.py `check_path`, lookup.py's folders).

Past Linux's PATH_MAX (4096 bytes) or NAME_MAX (255 bytes a name) the kernel fails anyway,
with an ENAMETOOLONG that the checks before it do not expect; and those checks walk a path
folder by folder: a model's `util.py/x/x/...`, 3,000 levels deep, cost thousands of stats
and then an exception that left its look-up unanswered. No real tree is 64 folders deep.
"""

from __future__ import annotations

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
