"""The working tree: which paths an edit may touch, reading bases, and writing atomically.

Every write steer makes goes through `write_atomic`/`delete` here, and only the review's
accept and undo call them.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from pathlib import Path, PurePosixPath

from app.core.snapshot import Snapshot
from app.core.textfile import NotText, decode, digest


class PathRefused(ValueError):
    """An edit aimed somewhere steer must not write."""


class Workspace:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(os.path.realpath(root))
        if not self.root.is_dir():
            raise FileNotFoundError(f"workspace {root} is not a directory")
        self._git_dir: Path | None | bool = False  # False: not looked up yet

    # -- paths ---------------------------------------------------------------------------
    def check_path(self, raw: str) -> str:
        """The workspace-relative POSIX path for `raw`, or PathRefused saying why not."""
        p = raw.strip().strip("`'\"").strip()
        if not p or "\0" in p:
            raise PathRefused(f"refused an edit with an empty or invalid file name {raw!r}")
        if p.startswith(("/", "\\", "~")) or (len(p) > 1 and p[1] == ":"):
            raise PathRefused(f"refused {p}: absolute paths are outside the workspace")
        if "\\" in p:
            raise PathRefused(f"refused {p}: backslashes in file names are not allowed")
        parts = [s for s in PurePosixPath(p).parts if s != "."]
        if not parts:
            raise PathRefused(f"refused {p}: not a file")
        if ".." in parts:
            raise PathRefused(f"refused {p}: '..' leads outside the workspace")
        if any(s.lower() == ".git" for s in parts):
            raise PathRefused(f"refused {p}: steer never writes inside .git/")
        rel = "/".join(parts)
        full = os.path.realpath(self.root / rel)
        if os.path.commonpath([full, self.root]) != str(self.root):
            raise PathRefused(f"refused {rel}: a symlink leads outside the workspace")
        real_rel = os.path.relpath(full, self.root)
        if any(s.lower() == ".git" for s in Path(real_rel).parts):
            raise PathRefused(f"refused {rel}: a symlink leads into .git/")
        if os.path.isdir(full):
            raise PathRefused(f"refused {rel}: it is a directory")
        return rel

    def abspath(self, rel: str) -> Path:
        return self.root / rel

    # -- reading -------------------------------------------------------------------------
    def read_bytes(self, rel: str) -> bytes | None:
        try:
            with open(self.root / rel, "rb") as fh:
                return fh.read()
        except FileNotFoundError:
            return None

    def snapshot(self, rel: str, keep_raw: bool = False) -> Snapshot:
        """Read a file as a base. Raises NotText for binary, undecodable or huge files.
        `keep_raw` keeps the bytes read, for callers that must compare them later."""
        path = self.root / rel
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return Snapshot(rel, exists=False)
        if not stat.S_ISREG(st.st_mode):
            raise NotText(f"{rel} is not a regular file")
        raw = self.read_bytes(rel)
        if raw is None:
            return Snapshot(rel, exists=False)
        lines, fmt = decode(raw, rel)
        return Snapshot(rel, True, lines, fmt, digest(raw), stat.S_IMODE(st.st_mode),
                        raw=raw if keep_raw else None)

    # -- writing -------------------------------------------------------------------------
    def write_atomic(self, rel: str, data: bytes, mode: int | None = None) -> None:
        """Temp file in the same folder, fsync, rename over the target, fsync the folder.
        A reader (or a crash) sees either the old file or the new one, never a mix."""
        self.check_path(rel)
        # write through a symlink that stays inside the workspace instead of replacing it
        target = Path(os.path.realpath(self.root / rel))
        target.parent.mkdir(parents=True, exist_ok=True)
        if mode is None:
            try:
                mode = stat.S_IMODE(os.stat(target).st_mode)
            except FileNotFoundError:
                umask = os.umask(0)
                os.umask(umask)
                mode = 0o666 & ~umask
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".steer-tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fchmod(fh.fileno(), mode)
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _fsync_dir(target.parent)

    def delete(self, rel: str) -> None:
        self.check_path(rel)
        target = self.root / rel
        try:
            os.unlink(target)
        except FileNotFoundError:
            return
        _fsync_dir(target.parent)

    # -- git and state -------------------------------------------------------------------
    @property
    def git_dir(self) -> Path | None:
        """The repository's git dir (`git rev-parse --git-dir`), None outside a repo."""
        if self._git_dir is False:
            self._git_dir = None
            try:
                import git  # gitpython; imported here so that plain reads stay fast

                repo = git.Repo(self.root, search_parent_directories=True)
                self._git_dir = Path(repo.git_dir)
            except Exception:  # not a repository, or git missing: journal goes to the state dir
                self._git_dir = None
        return self._git_dir  # type: ignore[return-value]

    def state_dir(self) -> Path:
        """Where steer keeps this workspace's journal and sessions: inside .git when there is
        one (never tracked, removed with the clone), else the user's state directory."""
        if self.git_dir is not None:
            return self.git_dir / "steer"
        base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
        key = hashlib.sha256(str(self.root).encode()).hexdigest()[:16]
        return base / "steer" / "workspaces" / f"{self.root.name}-{key}"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


