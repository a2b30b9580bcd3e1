"""The working tree: which paths an edit may touch (the name's own rules in paths.py, the
file system's here), reading them, and changing them without ever overwriting something
steer has not seen.

A file is known by its real path inside the workspace (`check_path` resolves symlinks), so
two names for one file share one pending diff. Every change steer makes goes through `swap`,
a compare-and-swap on one path: the new content is staged in a temp file next to the target,
then *exchanged* with the target in one atomic rename (Linux renameat2 RENAME_EXCHANGE), and
only then is the file that was displaced compared with what the caller expected. If it is not
that (the user saved meanwhile), the exchange is undone and `Changed` says what was found:
a save that lands at any instant is either the one that gets checked or it lands after steer's
write, so no check-then-rename window is left for it. (What remains: a writer that opened
the file before the exchange and writes into it after the check writes into the displaced
file, as with any atomic save.) If yet another save lands on steer's file before the
exchange is undone, that newest one stays and the displaced one is kept beside it, never
dropped. Without exchange support (another OS, an old filesystem) `swap` moves the target
aside, checks what it moved, and puts its file in place without replacing anything: a save
landing meanwhile stays (the price: for that instant the path is absent, which `steer bench
cas` measures). Paths are walked from the
root with O_NOFOLLOW directory fds, so a folder swapped for a symlink is refused, not followed.

Only the review's accept, the journal's undo and its crash recovery call `swap`, and they hold
`lock()` (one lock per repository, shared by every steer process) across their check-and-swap.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from app.core.disk.git_dirs import git_dir_of, is_git_dir
from app.core.disk.paths import PathRefused, normalize
from app.core.disk.rename import RENAME_EXCHANGE, RENAME_NOREPLACE, UNSUPPORTED, rename2
from app.core.disk.rename import available as rename_available
from app.core.disk.repo_lock import LOCK_TIMEOUT, RepoLock
from app.core.disk.side_names import TMP_SUFFIX, rescue_name, tmp_head, tmp_name
from app.core.disk.snapshot import Snapshot
from app.core.disk.state_home import ensure, state_home
from app.core.faults import exchange_off, stop_point
from app.core.text.names import odd
from app.core.text.textfile import NotText, decode, digest


@dataclass(frozen=True, slots=True)
class Content:
    """What a path holds: nothing, a regular file's bytes, a symlink, or something steer never
    edits (`special`: a FIFO, a socket, a device, a directory). `mode` is not compared."""

    data: bytes | None = None
    link: str | None = None
    special: str | None = None
    mode: int | None = None

    @property
    def exists(self) -> bool:
        return self.data is not None or self.link is not None or self.special is not None

    def same(self, other: Content) -> bool:
        return (self.data, self.link, self.special) == (other.data, other.link, other.special)

    def describe(self) -> str:
        if self.link is not None:
            return f"a symlink to {self.link}"
        if self.special is not None:
            return self.special
        return "a file" if self.data is not None else "nothing"


ABSENT = Content()


class Changed(Exception):
    """`swap` found something other than what was expected; nothing was changed."""

    def __init__(self, rel: str, found: Content, rescued: str | None = None) -> None:
        self.rel, self.found, self.rescued = rel, found, rescued
        extra = f"; a save that raced steer's write was kept as {rescued}" if rescued else ""
        super().__init__(f"{rel} changed on disk while steer was writing it{extra}")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


class Workspace:
    def __init__(self, root: str | os.PathLike[str], *, allow_read_only: bool = False) -> None:
        self.root = Path(os.path.realpath(root))
        if not self.root.is_dir():
            raise FileNotFoundError(f"workspace {root} is not a directory")
        self.allow_read_only = allow_read_only
        # turned off when the filesystem refuses it (or a test says so: faults.exchange_off)
        self.exchange = rename_available() and not exchange_off()
        self._git_dir: Path | None = None
        self._git_dir_found = False  # looked up once, on first use
        # a workspace inside a git dir (a bare repository's subfolder): everything is git's
        self._in_git_dir = any(is_git_dir(p) for p in self.root.parents)

    # -- paths ---------------------------------------------------------------------------
    def check_path(self, raw: str) -> str:
        """The file's real path relative to the workspace (symlinks inside it resolved, so one
        file has one name), or PathRefused saying why steer must not touch it."""
        rel = normalize(raw)
        full = os.path.realpath(self.root / rel)
        if os.path.commonpath([full, self.root]) != str(self.root):
            raise PathRefused(f"refused {rel}: a symlink leads outside the workspace")
        real_rel = os.path.relpath(full, self.root)
        if real_rel == ".":
            raise PathRefused(f"refused {rel}: it is a directory")
        if any(s.lower() == ".git" for s in Path(real_rel).parts):
            raise PathRefused(f"refused {rel}: a symlink leads into .git/")
        self._refuse_git_dir(rel, real_rel)
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            return real_rel
        except OSError as exc:
            raise PathRefused(f"refused {rel}: {exc.strerror}") from None
        if stat.S_ISDIR(st.st_mode):
            raise PathRefused(f"refused {rel}: it is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise PathRefused(f"refused {rel}: it is {_kind(st.st_mode)}; steer edits regular files only")
        return real_rel

    def has_file(self, raw: str) -> bool:
        """A regular file of this name is in the workspace (and steer may touch it)."""
        try:
            return self.abspath(self.check_path(raw)).is_file()
        except (ValueError, OSError):
            return False

    def _refuse_git_dir(self, rel: str, real_rel: str) -> None:
        if self._in_git_dir or is_git_dir(self.root):
            raise PathRefused(f"refused {rel}: the workspace is a git repository's own folder "
                              "(a bare repository); steer never writes there")
        here = self.root
        for part in Path(real_rel).parts[:-1]:
            here = here / part
            if not os.path.isdir(here):  # nothing below a missing folder is a git dir
                break
            if is_git_dir(here):
                raise PathRefused(f"refused {rel}: {here.relative_to(self.root)} is a git "
                                  "repository's own folder; steer never writes there")

    def check_edit(self, raw: str, *, delete: bool = False) -> str:
        """`check_path` for a file an edit will write: also refuses read-only files (unless
        the user allowed them). Deleting a symlink deletes the link itself: its own path."""
        rel = self.check_path(raw)
        if delete:
            link = self._link_name(raw)
            if link is not None:
                return link
        full = self.root / rel
        try:
            mode = os.stat(full, follow_symlinks=False).st_mode
        except FileNotFoundError:
            if odd(rel) and not delete:  # one that exists is edited; a model makes no new one
                raise PathRefused(f"refused {rel}: steer does not create a file whose name "
                                  "holds a backslash, a control or invisible character, or "
                                  "bytes that are not UTF-8") from None
            return rel
        if not mode & 0o222 and not self.allow_read_only:
            raise PathRefused(f"refused {rel}: it is read-only (mode {stat.S_IMODE(mode):04o}); "
                              "pass --allow-read-only to let steer edit read-only files")
        return rel

    def _link_name(self, raw: str) -> str | None:
        """The symlink's own real location when `raw` names a symlink, else None."""
        logical = normalize(raw)
        parent, name = os.path.split(logical)
        real_parent = os.path.realpath(self.root / parent)
        if not (self.root / logical).is_symlink() or \
                os.path.commonpath([real_parent, self.root]) != str(self.root):
            return None
        rel = os.path.relpath(os.path.join(real_parent, name), self.root)
        if any(s.lower() == ".git" for s in Path(rel).parts):
            raise PathRefused(f"refused {logical}: it lies inside .git/")
        self._refuse_git_dir(logical, rel)
        return rel

    def abspath(self, rel: str) -> Path:
        return self.root / rel

    # -- reading -------------------------------------------------------------------------
    def _open_dir(self, rel: str, *, create: bool = False) -> int:
        """An fd for the folder holding `rel`, walked from the root one component at a time
        without following symlinks. FileNotFoundError when it does not exist (and not `create`)."""
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for part in rel.split("/")[:-1]:
                flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
                try:
                    nfd = os.open(part, flags, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o777, dir_fd=fd)
                    nfd = os.open(part, flags, dir_fd=fd)
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    raise PathRefused(f"refused {rel}: {part} is no longer a folder (a symlink "
                                      "or a file took its place)") from None
                os.close(fd)
                fd = nfd
        except BaseException:  # Ctrl+C too: the descriptor is closed, then the error goes on
            os.close(fd)
            raise
        return fd

    @staticmethod
    def _read_at(dfd: int, name: str) -> Content:
        """What `name` in `dfd` holds, without following a symlink or blocking on a FIFO."""
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return ABSENT
        if stat.S_ISLNK(st.st_mode):
            return Content(link=os.readlink(name, dir_fd=dfd))
        if not stat.S_ISREG(st.st_mode):
            return Content(special=_kind(st.st_mode))
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
        except FileNotFoundError:
            return ABSENT
        except OSError:  # swapped for a link or a FIFO between the stat and the open
            return Content(special="something that changed while steer read it")
        try:
            fst = os.fstat(fd)
            if not stat.S_ISREG(fst.st_mode):
                return Content(special=_kind(fst.st_mode))
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return Content(data=b"".join(chunks), mode=stat.S_IMODE(fst.st_mode))
        finally:
            os.close(fd)

    def read(self, rel: str) -> Content:
        """What the path holds now (no symlink followed, never blocks)."""
        try:
            dfd = self._open_dir(rel)
        except FileNotFoundError:
            return ABSENT
        try:
            return self._read_at(dfd, rel.rsplit("/", 1)[-1])
        finally:
            os.close(dfd)

    def read_file(self, rel: str) -> Content:
        """`read`, following a symlink that stays inside the workspace; refuses what is not a
        regular file (a FIFO would block a plain open for ever)."""
        got = self.read(rel)
        if got.link is not None:
            got = self.read(self.check_path(rel))
        if got.special is not None:
            raise PathRefused(f"{rel} is {got.special}; steer edits regular files only")
        return got

    def read_bytes(self, rel: str) -> bytes | None:
        return self.read_file(rel).data

    def snapshot(self, rel: str, keep_raw: bool = False) -> Snapshot:
        """Read a file as a base. Raises NotText for binary, undecodable or huge files and for
        what is not a regular file. `keep_raw` keeps the bytes read, for later comparison."""
        try:
            got = self.read_file(rel)
        except PathRefused as exc:
            raise NotText(str(exc)) from None
        if got.data is None:
            return Snapshot(rel, exists=False)
        lines, fmt = decode(got.data, rel)
        return Snapshot(rel, True, lines, fmt, digest(got.data), got.mode,
                        raw=got.data if keep_raw else None)

    # -- writing -------------------------------------------------------------------------
    def lock(self, timeout: float = LOCK_TIMEOUT) -> contextlib.AbstractContextManager[None]:
        """The repository's write lock: held across one accept's or undo's check-and-swap.
        StateUnusable when its folder, the journal's, cannot be made: nothing is written."""
        where = ensure(self.state_dir(), "the undo journal every write needs")
        return RepoLock.at(where / "lock").hold(timeout)

    def swap(self, rel: str, expect: Content, new: Content, *, tag: str,
             marks: Callable[[str], None] | None = None) -> None:
        """Make `rel` hold `new` if, and only if, it holds `expect`: atomically, durably (temp
        file, fsync, rename, fsync of the folder), keeping nothing half-written. Otherwise
        raise Changed with what was found, leaving it in place. `tag` (the journal step's id)
        names the temp files so that recovery after a crash knows whose they are. `marks` is
        called at the points `steer bench cas` times."""
        mark = marks or (lambda _label: None)
        name = rel.rsplit("/", 1)[-1]
        dfd = self._open_dir(rel, create=new.exists)
        try:
            self._check_writable(dfd, name, rel)
            if not new.exists:
                self._remove(dfd, name, rel, expect, tag)
            else:
                tmp = self._stage(dfd, name, new, expect, tag)
                try:
                    if not expect.exists:
                        self._create(dfd, tmp, name, rel)
                    else:
                        self._replace(dfd, tmp, name, rel, expect, new, tag, mark)
                finally:
                    with contextlib.suppress(FileNotFoundError):
                        if self._read_at(dfd, tmp).same(new):
                            os.unlink(tmp, dir_fd=dfd)
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def _check_writable(self, dfd: int, name: str, rel: str) -> None:
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISREG(st.st_mode) and not st.st_mode & 0o222 and not self.allow_read_only:
            raise PathRefused(f"refused {rel}: it is read-only (mode {stat.S_IMODE(st.st_mode):04o}); "
                              "pass --allow-read-only to let steer edit read-only files")

    def _stage(self, dfd: int, name: str, new: Content, expect: Content, tag: str) -> str:
        tmp = tmp_name(name, tag)
        if new.link is not None:
            os.symlink(new.link, tmp, dir_fd=dfd)
            return tmp
        mode = new.mode if new.mode is not None else expect.mode
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600, dir_fd=dfd)
        try:
            view = memoryview(new.data or b"")
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, mode)
            os.fsync(fd)
        except BaseException:  # Ctrl+C too: no temp file is left beside the user's file
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
        os.close(fd)
        stop_point(f"swap:staged:{name}")
        return tmp

    def _create(self, dfd: int, tmp: str, name: str, rel: str) -> None:
        """Put `tmp` at `name` only if nothing is there."""
        try:
            self.place_new(dfd, tmp, name)
        except FileExistsError:
            raise Changed(rel, self._read_at(dfd, name)) from None

    def place_new(self, dfd: int, src: str, dst: str) -> None:
        """Rename without replacing: FileExistsError when `dst` exists."""
        try:
            rename2(dfd, src, dst, RENAME_NOREPLACE)
            return
        except OSError as exc:
            if exc.errno == errno.EEXIST:
                raise FileExistsError(errno.EEXIST, "exists", dst) from None
            if exc.errno not in UNSUPPORTED:
                raise
        try:  # link(2) never replaces either; works for files and symlinks
            os.link(src, dst, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
            os.unlink(src, dir_fd=dfd)
        except FileExistsError:
            raise
        except OSError:  # no hard links here: check, then rename (a small window remains)
            if self._read_at(dfd, dst).exists:
                raise FileExistsError(errno.EEXIST, "exists", dst) from None
            os.rename(src, dst, src_dir_fd=dfd, dst_dir_fd=dfd)

    def _replace(self, dfd: int, tmp: str, name: str, rel: str, expect: Content, new: Content,
                 tag: str, mark: Callable[[str], None]) -> None:
        if self.exchange:
            try:
                rename2(dfd, tmp, name, RENAME_EXCHANGE)
            except OSError as exc:
                if exc.errno == errno.ENOENT:
                    raise Changed(rel, ABSENT) from None
                if exc.errno not in UNSUPPORTED:
                    raise
                self.exchange = False
            else:
                stop_point(f"swap:exchanged:{name}")
                mark("check")
                displaced = self._read_at(dfd, tmp)  # what was at `name` the instant we swapped
                mark("checked")
                if displaced.same(expect):
                    os.unlink(tmp, dir_fd=dfd)
                    mark("done")
                    return
                raise self._give_back(dfd, tmp, name, rel, displaced, new, tag)
        # no exchange: move the file aside (atomic), check what was moved, then put steer's
        # file at `name` without replacing: a save landing in between is found there and
        # kept. For that instant `name` is absent; `steer bench cas` measures it.
        aside = tmp_name(name, tag)
        mark("check")
        try:
            os.rename(name, aside, src_dir_fd=dfd, dst_dir_fd=dfd)
        except FileNotFoundError:
            raise Changed(rel, ABSENT) from None
        found = self._read_at(dfd, aside)
        mark("checked")
        if not found.same(expect):
            raise self._put_back(dfd, aside, name, rel, found, tag)
        stop_point(f"swap:checked:{name}")
        try:
            self.place_new(dfd, tmp, name)
        except FileExistsError:  # a save while the file was aside: the newest, it stays
            os.unlink(aside, dir_fd=dfd)  # what steer expected (the journal holds it)
            raise Changed(rel, self._read_at(dfd, name)) from None
        mark("done")
        os.unlink(aside, dir_fd=dfd)

    def _put_back(self, dfd: int, aside: str, name: str, rel: str, found: Content,
                  tag: str) -> Changed:
        """A file moved aside that steer must not replace goes back to `name`; beside it when
        a save took `name` meanwhile (the newer one stays at `name`)."""
        try:
            self.place_new(dfd, aside, name)
        except FileExistsError:
            rescued = rescue_name(name, tag)
            os.rename(aside, rescued, src_dir_fd=dfd, dst_dir_fd=dfd)
            return Changed(rel, found, rescued=str(PurePosixPath(rel).with_name(rescued)))
        return Changed(rel, found)

    def _give_back(self, dfd: int, tmp: str, name: str, rel: str, displaced: Content,
                   new: Content, tag: str) -> Changed:
        """A save raced the exchange and was displaced: put it back at `name`."""
        try:
            rename2(dfd, tmp, name, RENAME_EXCHANGE)
        except FileNotFoundError:  # `name` was deleted meanwhile: the save goes back alone
            self.place_new(dfd, tmp, name)
            return Changed(rel, displaced)
        back = self._read_at(dfd, tmp)
        if back.same(new):
            return Changed(rel, displaced)  # `swap` removes steer's file, now at `tmp`
        # another save landed on steer's file in between: it is the newest, so it goes back
        # at `name`; the older one is kept beside it, never dropped
        rename2(dfd, tmp, name, RENAME_EXCHANGE)
        rescued = rescue_name(name, tag)
        os.rename(tmp, rescued, src_dir_fd=dfd, dst_dir_fd=dfd)
        return Changed(rel, back, rescued=str(PurePosixPath(rel).with_name(rescued)))

    def _remove(self, dfd: int, name: str, rel: str, expect: Content, tag: str) -> None:
        """Delete `name` if it holds `expect`: move it aside atomically, check what was moved,
        then unlink it (or put it back)."""
        if not expect.exists:
            found = self._read_at(dfd, name)
            if found.exists:
                raise Changed(rel, found)
            return
        aside = tmp_name(name, tag)
        try:
            os.rename(name, aside, src_dir_fd=dfd, dst_dir_fd=dfd)
        except FileNotFoundError:
            raise Changed(rel, ABSENT) from None
        stop_point(f"swap:aside:{name}")
        found = self._read_at(dfd, aside)
        if found.same(expect):
            os.unlink(aside, dir_fd=dfd)
            return
        raise self._put_back(dfd, aside, name, rel, found, tag)

    def sweep(self, rel: str, tag: str, before: Content, after: Content) -> list[str]:
        """Clear what a killed `swap` of step `tag` left next to `rel`: steer's staged content
        and the original it displaced go (the journal holds both); a save by someone else that
        the swap had displaced goes back to `rel`, or beside it if `rel` changed again."""
        name = rel.rsplit("/", 1)[-1]
        head = tmp_head(name, tag)
        try:
            dfd = self._open_dir(rel)
        except (FileNotFoundError, PathRefused):
            return []
        notes = []
        try:
            for left in os.listdir(dfd):
                if not (left.startswith(head) and left.endswith(TMP_SUFFIX)):
                    continue
                got = self._read_at(dfd, left)
                now = self._read_at(dfd, name)
                if got.same(before) and not now.exists:  # moved aside by a killed swap:
                    self.place_new(dfd, left, name)  # back, for the step to be completed
                    continue
                if got.same(before) or got.same(after):
                    os.unlink(left, dir_fd=dfd)
                    continue
                try:
                    if not now.exists:
                        self.place_new(dfd, left, name)
                    elif now.same(after) or now.same(before):
                        os.rename(left, name, src_dir_fd=dfd, dst_dir_fd=dfd)
                    else:
                        raise FileExistsError(errno.EEXIST, "exists", name)
                    notes.append(f"{rel}: a save made while steer was writing it was put back")
                except FileExistsError:
                    rescued = rescue_name(name, tag)
                    os.rename(left, rescued, src_dir_fd=dfd, dst_dir_fd=dfd)
                    notes.append(f"{rel}: a save made while steer was writing it is kept as "
                                 f"{PurePosixPath(rel).with_name(rescued)}")
            os.fsync(dfd)
        finally:
            os.close(dfd)
        return notes

    # -- git and state -------------------------------------------------------------------
    @property
    def git_dir(self) -> Path | None:
        """The repository's git dir (`git rev-parse --git-dir`), None outside a repo."""
        if not self._git_dir_found:
            self._git_dir = git_dir_of(self.root)  # None: the journal goes to the state dir
            self._git_dir_found = True
        return self._git_dir

    def state_dir(self) -> Path:
        """Where steer keeps this workspace's journal and sessions: inside .git when there is
        one (never tracked, removed with the clone), else the user's state directory."""
        if self.git_dir is not None:
            return self.git_dir / "steer"
        key = hashlib.sha256(str(self.root).encode()).hexdigest()[:16]
        return state_home() / "workspaces" / f"{self.root.name}-{key}"

