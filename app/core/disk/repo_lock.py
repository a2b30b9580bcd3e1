"""The repository lock: steer processes (the app, `steer run`, `steer undo`) serialise their
writes to one repository with an flock in its state dir."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

LOCK_TIMEOUT = 30.0  # seconds to wait for another steer process's accept or undo to finish


class Busy(RuntimeError):
    """Another steer process held the repository's write lock for too long."""


class RepoLock:
    """flock on a file in the state dir: steer processes serialise their writes. Re-entrant
    within a thread; other threads of the process wait like other processes do."""

    _registry: dict[str, RepoLock] = {}
    _registry_lock = threading.Lock()

    def __init__(self, path: Path) -> None:
        self.path = path
        self._mutex = threading.RLock()
        self._depth = 0
        self._fd: int | None = None

    @classmethod
    def at(cls, path: Path) -> RepoLock:
        with cls._registry_lock:
            lock = cls._registry.get(str(path))
            if lock is None:
                lock = cls._registry[str(path)] = cls(path)
            return lock

    @contextlib.contextmanager
    def hold(self, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
        if not self._mutex.acquire(timeout=timeout):
            raise Busy("another write of this steer process is still running")
        try:
            if self._depth == 0:
                self._fd = self._acquire(timeout)
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._fd is not None:
                    os.close(self._fd)  # closing releases the flock
                    self._fd = None
        finally:
            self._mutex.release()

    def _acquire(self, timeout: float) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise Busy(f"another steer process is writing to this repository "
                               f"(lock {self.path}); try again when it is done") from None
                time.sleep(0.01)
