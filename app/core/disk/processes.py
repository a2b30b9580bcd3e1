"""Whether a process, or a process group, still runs: read from /proc (a zombie waiting for
its parent counts as gone), else asked of the kernel. The check runner's worktrees and the
embedded model's server both need to know (app/core/variants/check.py and worktrees.py,
app/providers/serve_crash.py)."""

from __future__ import annotations

import os


def proc_stat(pid: str) -> tuple[str, int] | None:
    """(state, process group) of a process from /proc, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[2])


def group_alive(pgid: int) -> bool:
    """Whether any process of group `pgid` still runs (zombies waiting for a reaper do not)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc"):
        return True
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = proc_stat(entry)
            if st and st[1] == pgid and st[0] not in "ZX":
                return True
    return False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc"):
        return True
    st = proc_stat(str(pid))
    return st is not None and st[0] not in "ZX"  # a zombie waiting for its parent is dead
