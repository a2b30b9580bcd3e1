"""Where a running `steer serve` is found, and the token that opens it.

`$XDG_STATE_HOME/steer/serve.json` (mode 0600) holds a random token, made on first use and
kept, and the servers running a model: {model path: {host, port, pid}}. `steer serve`
requires the token as Bearer on every connection; the `local` provider reads it, finds the
server for its model (checking the pid and a health request), or starts one and waits for
it to register. An flock on serve.lock makes read-modify-write safe between processes, and
makes two steers starting at once share one server instead of starting two.

When the state dir cannot be used ($XDG_STATE_HOME names a file, a folder steer may not
write), the registry lives in a folder of the temp dir private to the user instead: it only
finds running servers, so the default back-end works the same (every steer of the user
makes the same choice), and what cannot be saved is said by the sessions, once.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from app.core.disk.state_home import StateUnusable, ensure, state_home, why_unusable


def directory() -> Path:
    """The state dir, or when it cannot be used, `<temp>/steer-<uid>` (nothing is made)."""
    home = state_home()
    return home if not why_unusable(home) else Path(tempfile.gettempdir()) / f"steer-{os.getuid()}"


def _private(d: Path) -> bool:
    """A folder of this user's that no one else can write (not a link to one)."""
    st = os.lstat(d)
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def _made() -> Path:
    """`directory()`, made; a temp folder that another user could have made or can write
    is refused (it holds the token, and says where the servers are)."""
    d = directory()
    if d == state_home():
        return ensure(d, "steer serve's registry")
    with contextlib.suppress(FileExistsError):
        d.mkdir(mode=0o700)
    if not _private(d):
        raise StateUnusable(f"steer serve's registry cannot be kept in {state_home()} "
                            f"({why_unusable(state_home())}) nor in {d} (not a folder "
                            "private to this user)")
    return d


def state_file() -> Path:
    return directory() / "serve.json"


@contextlib.contextmanager
def locked(name: str = "serve.lock") -> Iterator[None]:
    """Exclusive, across processes, for as long as the block runs."""
    d = _made()
    fd = os.open(d / name, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def read() -> dict:
    try:
        if directory() != state_home() and not _private(directory()):
            return {}  # a temp folder someone else made: nothing in it is believed
        data = json.loads(state_file().read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write(data: dict) -> None:
    path = state_file()
    tmp = path.with_name(f".serve.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def token() -> str:
    """The token, made (and saved 0600) on first use."""
    with locked():
        data = read()
        if not isinstance(data.get("token"), str) or len(data["token"]) < 32:
            data["token"] = secrets.token_urlsafe(32)
            _write(data)
        elif state_file().stat().st_mode & 0o077:
            os.chmod(state_file(), 0o600)  # someone widened it: the token is for this user only
        return data["token"]


def register(model_path: str, host: str, port: int, pid: int, *, log: str | None = None,
             log_offset: int = 0) -> None:
    """`log`: the file the server's stderr goes to (its crash is read there), from
    `log_offset` on."""
    with locked():
        data = read()
        data.setdefault("token", secrets.token_urlsafe(32))
        servers = data.get("servers")
        if not isinstance(servers, dict):
            servers = {}
        servers[model_path] = {"host": host, "port": port, "pid": pid,
                               **({"log": log, "log_offset": log_offset} if log else {})}
        data["servers"] = servers
        _write(data)


def unregister(model_path: str, pid: int) -> None:
    with locked():
        data = read()
        servers = data.get("servers") or {}
        if isinstance(servers, dict) and (servers.get(model_path) or {}).get("pid") == pid:
            del servers[model_path]
            _write(data)


def lookup(model_path: str) -> dict | None:
    entry = (read().get("servers") or {}).get(model_path)
    return entry if isinstance(entry, dict) and {"host", "port", "pid"} <= entry.keys() else None
