"""renameat2 (Linux): exchange two names in one atomic step, or rename without replacing.
The compare-and-swap writes of app/core/disk/workspace.py stand on it; without it (another
OS, an old filesystem) they fall back to a re-check right before a plain rename."""

from __future__ import annotations

import ctypes
import errno
import os

RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
_libc = ctypes.CDLL(None, use_errno=True)
_renameat2 = getattr(_libc, "renameat2", None)
if _renameat2 is not None:
    _renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    _renameat2.restype = ctypes.c_int
UNSUPPORTED = (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP)


def rename2(dfd: int, src: str, dst: str, flags: int) -> None:
    if _renameat2 is None:
        raise OSError(errno.ENOSYS, "renameat2 is not available")
    if _renameat2(dfd, os.fsencode(src), dfd, os.fsencode(dst), flags) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), dst)


def available() -> bool:
    """Whether this system has renameat2 at all (a filesystem may still refuse it)."""
    return _renameat2 is not None
