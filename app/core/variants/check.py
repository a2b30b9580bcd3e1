"""The check that picks a variant: each finished answer is written into a throwaway git
worktree of its own, a user's command (tests, a linter) runs there, and the first answer
whose command exits 0 wins.

Why worktrees and not the user's tree: rule 1 (nothing is written to the working tree
except by an accept) holds for checks too, and several variants are checked at once. A
worktree (`git worktree add --detach`) shares the object store, so it is cheap; it starts at
HEAD and is then made to look like the user's working tree as it is now (uncommitted
changes, untracked non-ignored files, deletions), with the variant's files on top. The
user's index, refs and files are never written; the only trace in the repository is the
worktree's metadata under .git/worktrees/, which `aclose()` removes again.

Why process groups: a check command forks (make, pytest-xdist, `cmd &`). It runs in a
session of its own, so a timeout, a cancellation or Ctrl+C ends the whole group, and a steer
that was SIGKILLed is cleaned up by the next one (the worktree dirs carry its pid, and the
processes carry the worktree in their environment).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from pathlib import Path

from app.core.disk.processes import group_alive, pid_alive

OUTPUT_CHARS = 4000
KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL
PREFIX = "steer-check-"
ENV_MARK = "STEER_CHECK_WORKTREE"  # every check process carries its worktree here
# Variables that would point CMD's (and our) git at the user's repository instead of the worktree.
GIT_ENV_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_PREFIX")
# sh builtins and keywords a check command may start with (shutil.which finds some of them).
SH_WORDS = frozenset(
    ": . [ [[ ! { } ( alias bg break case cd command continue do done echo elif else esac eval "
    "exec exit export false fg fi for getopts hash if jobs kill local printf pwd read readonly "
    "return set shift source test then times trap true type ulimit umask unalias unset until "
    "wait while".split())
IN_PROGRESS = (("MERGE_HEAD", "a merge"), ("rebase-merge", "a rebase"),
               ("rebase-apply", "a rebase (or git am)"), ("CHERRY_PICK_HEAD", "a cherry-pick"),
               ("REVERT_HEAD", "a revert"), ("BISECT_LOG", "a bisect"))


@dataclass
class CheckResult:
    variant: int  # the caller's index (1-based)
    exit_code: int | None  # None: it did not finish (timed out, could not start, cancelled)
    seconds: float  # wall time of CMD
    output: str  # the last OUTPUT_CHARS characters of its stdout and stderr together
    error: str = ""  # one line when it could not run or finish, or crashed

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.error


class CheckRefused(Exception):
    """Checks cannot run here (a one-line reason); raised before anything is made."""


# -- up-front refusals ---------------------------------------------------------------------
def git_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in GIT_ENV_DROP}


def _git(root: Path, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          env=git_env(), stdin=subprocess.DEVNULL, check=check)


def command_error(cmd: str, root: Path | None = None) -> str | None:
    """Why `cmd` cannot run as a check command, or None. Only its first word is looked up
    (after `VAR=value` assignments); a path with a slash is looked up under `root` if given."""
    if not cmd.strip():
        return "check command is empty"
    try:
        words = shlex.split(cmd)
    except ValueError as exc:
        return f"check command cannot be parsed ({exc}): {cmd}"
    words = [w for w in words if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", w)]
    if not words:
        return None  # only assignments: sh runs it and exits 0
    first = words[0].lstrip("({")
    if not first or first in SH_WORDS or words[0] in SH_WORDS:
        return None
    if "/" in first:
        path = Path(first).expanduser()
        if not path.is_absolute():
            if root is None:
                return None  # relative to the worktree: cannot be told before it exists
            path = root / path
        if not path.is_file():
            return f"check command not found: {first}"
        if not os.access(path, os.X_OK):
            return f"check command is not executable: {first}"
        return None
    if shutil.which(first) is None:
        return f"check command not found: {first}"
    return None


def refusal(root: Path) -> str | None:
    """Why a check worktree cannot be made for the repository at `root`, or None."""
    if not Path(root).is_dir():
        return f"not a directory: {root}"
    try:
        out = _git(root, "rev-parse", "--is-bare-repository", "--is-inside-git-dir",
                   "--absolute-git-dir")
    except OSError:
        return "git is not installed"
    if out.returncode != 0:
        return f"not a git repository: {root}"
    bare, inside_git_dir, git_dir = out.stdout.splitlines()[:3]
    if bare == "true":
        return f"a bare repository has no working tree to check: {root}"
    if inside_git_dir == "true":
        return f"inside a git dir, not a working tree: {root}"
    for name, what in IN_PROGRESS:
        if os.path.lexists(os.path.join(git_dir, name)):
            return f"{what} is in progress: finish or abort it before checking variants"
    if _git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}").returncode != 0:
        return "no commit yet: a check worktree starts from HEAD, so make a first commit"
    return None


# -- processes ------------------------------------------------------------------------------
def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _kill_marked(*worktrees: str) -> None:
    """SIGKILL every process whose environment names one of `worktrees`: a dead steer's
    leftovers, or what left its check's process group (setsid) or outlived it in a race."""
    if not worktrees or not os.path.isdir("/proc"):
        return
    marks = {f"{ENV_MARK}={w}".encode() for w in worktrees}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = fh.read().split(b"\0")
        except OSError:
            continue
        if marks.intersection(env):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry), signal.SIGKILL)


def _signal_name(num: int) -> str:
    return signal.Signals(num).name if num in signal.valid_signals() else f"signal {num}"


# -- worktrees -------------------------------------------------------------------------------
def remove_worktree(root: Path, path: Path) -> None:
    _git(root, "worktree", "remove", "--force", "--force", str(path))
    shutil.rmtree(path, ignore_errors=True)


def git_common_dir(root: Path) -> Path:
    out = _git(root, "rev-parse", "--path-format=absolute", "--git-common-dir", check=True)
    return Path(out.stdout.strip())


def _owner(folder: str) -> int | None:
    """The pid of the steer that made a check worktree folder (it is in the name)."""
    m = re.match(re.escape(PREFIX) + r"(\d+)-", os.path.basename(folder))
    return int(m.group(1)) if m else None


def _ours_or_dead(folder: str) -> bool:
    pid = _owner(folder)
    return pid is not None and (pid == os.getpid() or not pid_alive(pid))


def forget(common: Path) -> None:
    """Drop the metadata (.git/worktrees/<name>) of check worktrees whose folder is gone and
    whose steer is this one or dead. Not `git worktree prune`: that would also drop the
    metadata of a user's own worktree whose folder is only unmounted for now."""
    meta = common / "worktrees"
    with contextlib.suppress(OSError):
        for entry in meta.iterdir():
            try:
                folder = os.path.dirname((entry / "gitdir").read_text().strip())
            except OSError:
                continue
            if _ours_or_dead(folder) and not os.path.lexists(folder):
                shutil.rmtree(entry, ignore_errors=True)
        meta.rmdir()  # as git leaves it: no worktrees/ folder once the last one is gone


def remove_stale(root: Path) -> list[Path]:
    """Remove check worktrees left by a steer that is gone (its pid is in the dir's name),
    kill what still runs in them, and forget their metadata."""
    removed = []
    tmp = Path(tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for entry in tmp.iterdir():
            pid = _owner(entry.name)
            if pid is None or not entry.is_dir() or entry.is_symlink() or pid_alive(pid):
                continue
            _kill_marked(str(entry))
            remove_worktree(root, entry)
            removed.append(entry)
    forget(git_common_dir(root))
    return removed


def _copy_entry(src: Path, dst: Path) -> None:
    """Make `dst` what `src` is now: a file (mode kept), a symlink, or nothing."""
    try:
        st = src.lstat()
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        return  # a submodule or nested repository: left as HEAD has it
    if dst.is_dir() and not dst.is_symlink():
        shutil.rmtree(dst)
    elif os.path.lexists(dst):
        dst.unlink()
    if st is None:
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dst, follow_symlinks=False)


def _status_paths(root: Path) -> list[str]:
    """Paths that differ between HEAD and the user's working tree (staged, unstaged,
    untracked, deleted), without writing the index (`--no-optional-locks`)."""
    out = subprocess.run(
        ["git", "--no-optional-locks", "-C", str(root), "status", "--porcelain=v1", "-z",
         "--untracked-files=all", "--no-renames", "--ignore-submodules=all"],
        capture_output=True, env=git_env(), stdin=subprocess.DEVNULL, check=True).stdout
    return [os.fsdecode(rec[3:]) for rec in out.split(b"\0") if len(rec) > 3]


def _plain(rel: str) -> None:
    """ValueError unless `rel` is a plain repo-relative path (no absolute, `..` or .git)."""
    parts = Path(rel).parts
    if not rel or Path(rel).is_absolute() or ".." in parts or ".git" in parts:
        raise ValueError(f"refused path: {rel}")


def _inside(base: Path, rel: str) -> Path:
    """`base/rel` when it stays inside `base` (no absolute path, `..`, .git, or a symlinked
    folder leading out), else ValueError."""
    _plain(rel)
    target = base / rel
    real_base = os.path.realpath(base)
    parent = os.path.realpath(target.parent)
    if os.path.commonpath([real_base, parent]) != real_base:
        raise ValueError(f"refused path (leaves the worktree): {rel}")
    return target


def _write_variant(tree: Path, files: Mapping[str, bytes | None]) -> None:
    for rel, content in files.items():
        target = _inside(tree, rel)
        if content is None:
            if os.path.lexists(target) and not target.is_dir():
                target.unlink()
            continue
        if target.is_symlink():
            target.unlink()
        target.parent.mkdir(parents=True, exist_ok=True)
        _inside(tree, rel)  # again: mkdir may have walked through a symlink
        with open(target, "wb") as fh:  # an existing file keeps its mode
            fh.write(content)


# -- the checks ------------------------------------------------------------------------------
class _Cancelled(Exception):
    """A check was stopped before it could finish (the reason is the message)."""


class Checks:
    """Runs CMD on each finished variant in its own worktree, concurrently, as they finish.

    Construct it on a thread that may block briefly (it refuses, then cleans up after a dead
    steer); start() needs a running event loop. Always `await aclose()` in a finally."""

    def __init__(self, root: Path, cmd: str, *, timeout: float = 120.0) -> None:
        root = Path(root)
        reason = refusal(root) or command_error(cmd, root)
        if reason:
            raise CheckRefused(reason)
        self.cmd = cmd
        self.timeout = timeout
        self.root = Path(_git(root, "rev-parse", "--show-toplevel", check=True).stdout.strip())
        self.prefix = _git(root, "rev-parse", "--show-prefix", check=True).stdout.strip()
        self.common = git_common_dir(self.root)
        remove_stale(self.root)
        self._results: dict[int, CheckResult] = {}
        self._order: list[int] = []  # variants in the order their checks ended
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._groups: set[int] = set()  # process groups that may still run
        self._worktrees: set[Path] = set()
        self._preps: list[Future[Path]] = []
        self._lock = threading.Lock()  # the set of worktrees, their removal
        self._git_lock = threading.Lock()  # `git worktree add`
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="steer-check")
        self._changed = asyncio.Event()
        self._cancel_reason = "cancelled"
        self._starts_closed = False
        self._closing = False
        self._closed = False

    # -- the caller's side
    @property
    def results(self) -> dict[int, CheckResult]:
        return dict(self._results)

    def start(self, variant: int, files: Mapping[str, bytes | None]) -> None:
        """Check `variant`, whose changed files are `files` (None: deleted), from now on."""
        if self._closing:
            raise RuntimeError("checks are closed")
        if self._starts_closed:
            raise RuntimeError("no more variants may start (close_starts() was called)")
        if variant in self._tasks:
            raise ValueError(f"variant {variant} was already started")
        self._tasks[variant] = asyncio.get_running_loop().create_task(
            self._check(variant, dict(files)), name=f"steer-check-{variant}")
        self._changed.set()

    def close_starts(self) -> None:
        self._starts_closed = True
        self._changed.set()

    async def first_pass(self) -> CheckResult | None:
        """The first check to pass (the others are stopped), or None when every started check
        ended without passing and close_starts() was called."""
        while True:
            winner = next((self._results[v] for v in self._order if self._results[v].passed),
                          None)
            if winner is not None:
                await self._stop_all(f"cancelled: variant {winner.variant} passed first")
                return winner
            if self._starts_closed and len(self._results) == len(self._tasks):
                return None
            self._changed.clear()
            await self._changed.wait()

    async def run_all(self) -> list[CheckResult]:
        """Every started check (also those started meanwhile) to its end, by variant."""
        while pending := [t for t in self._tasks.values() if not t.done()]:
            await asyncio.wait(pending)
        return [self._results[v] for v in sorted(self._results)]

    async def aclose(self) -> None:
        """Stop every check (SIGTERM to its group, SIGKILL after KILL_GRACE) and remove every
        worktree and its metadata. Idempotent; a cancellation meanwhile still cleans up."""
        if self._closed:
            return
        self._closing = True
        try:
            await self._stop_all("cancelled: checks closed")
            for fut in list(self._preps):
                with contextlib.suppress(Exception):
                    await asyncio.wrap_future(fut)
            await asyncio.wrap_future(self._pool.submit(self._remove_all))
            self._closed = True
            self._pool.shutdown(wait=False)
        finally:
            if not self._closed:  # interrupted: finish the cleanup here, blocking
                self._closed = True
                for pgid in list(self._groups):
                    _signal_group(pgid, signal.SIGKILL)
                wait_futures(self._preps, timeout=60)
                self._remove_all()
                self._pool.shutdown(wait=False, cancel_futures=True)

    # -- inside
    async def _stop_all(self, reason: str) -> None:
        self._cancel_reason = reason
        running = [t for t in self._tasks.values() if not t.done()]
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running)

    def _record(self, result: CheckResult) -> None:
        if result.variant not in self._results:
            self._order.append(result.variant)
        self._results[result.variant] = result
        self._changed.set()

    def _remove_all(self) -> None:
        with self._lock, self._git_lock:
            _kill_marked(*map(str, self._worktrees))
            for path in list(self._worktrees):
                remove_worktree(self.root, path)
                self._worktrees.discard(path)
            forget(self.common)

    def _remove_one(self, path: Path) -> None:
        with self._lock, self._git_lock:
            if path in self._worktrees:
                _kill_marked(str(path))
                remove_worktree(self.root, path)
                self._worktrees.discard(path)

    def _prepare(self, variant: int, files: dict[str, bytes | None]) -> Path:
        """A worktree at HEAD made to look like the user's tree now, `files` on top."""
        for rel in files:
            _plain(rel)  # a path the variant may not write: refused before anything
        with self._lock:
            if self._closing:
                raise _Cancelled(self._cancel_reason)
            tree = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-v{variant}-"))
            self._worktrees.add(tree)
        for attempt in range(3):
            # one `worktree add` at a time: git reads the other worktrees' metadata while it
            # adds, and a half-made one fails it (another steer's too: hence the retries)
            with self._git_lock:
                add = subprocess.run(
                    ["git", "-c", "core.hooksPath=/dev/null", "-C", str(self.root), "worktree",
                     "add", "--detach", "--quiet", str(tree), "HEAD"],
                    capture_output=True, text=True, env=git_env(), stdin=subprocess.DEVNULL)
            if add.returncode == 0:
                break
            if attempt == 2:
                raise RuntimeError(f"git worktree add failed: {add.stderr.strip()[-300:]}")
            time.sleep(0.2)
        for rel in _status_paths(self.root):
            if self._closing:
                raise _Cancelled(self._cancel_reason)
            _copy_entry(self.root / rel, _inside(tree, rel))
        _write_variant(tree, files)
        return tree

    async def _check(self, variant: int, files: dict[str, bytes | None]) -> None:
        fut: Future[Path] = self._pool.submit(self._prepare, variant, files)
        self._preps.append(fut)
        try:
            tree = await asyncio.shield(asyncio.wrap_future(fut))
        except asyncio.CancelledError:
            self._record(CheckResult(variant, None, 0.0, "", self._cancel_reason))
            raise
        except (_Cancelled, ValueError, RuntimeError, OSError, subprocess.SubprocessError) as e:
            self._record(CheckResult(variant, None, 0.0, "", _one_line(e)))
            return
        try:
            self._record(await self._run(variant, tree))
        except asyncio.CancelledError:
            if variant not in self._results:  # stopped before its command started
                self._record(CheckResult(variant, None, 0.0, "", self._cancel_reason))
            raise
        finally:
            # the result is out; the worktree goes (aclose sweeps it if this is cancelled)
            await asyncio.wrap_future(self._pool.submit(self._remove_one, tree))

    async def _run(self, variant: int, tree: Path) -> CheckResult:
        cwd = tree / self.prefix
        cwd.mkdir(parents=True, exist_ok=True)
        env = {**git_env(), ENV_MARK: str(tree)}
        began = time.monotonic()
        # shielded: a cancelled spawn would have asyncio SIGKILL the shell alone, leaving
        # whatever it started meanwhile outside our reach
        spawn = asyncio.ensure_future(asyncio.create_subprocess_exec(
            "/bin/sh", "-c", self.cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True))
        try:
            proc = await asyncio.shield(spawn)
        except OSError as exc:
            return CheckResult(variant, None, 0.0, "", f"could not start /bin/sh: {exc}")
        except asyncio.CancelledError:
            with contextlib.suppress(OSError):
                proc = await spawn
                self._groups.add(proc.pid)
                try:
                    await _end_group(proc)
                finally:
                    self._groups.discard(proc.pid)
            self._record(CheckResult(variant, None, time.monotonic() - began, "",
                                     self._cancel_reason))
            raise
        self._groups.add(proc.pid)
        tail = bytearray()
        assert proc.stdout is not None
        reader = asyncio.create_task(_read_tail(proc.stdout, tail))
        timed_out = False
        try:
            try:
                await asyncio.wait_for(proc.wait(), self.timeout)
            except TimeoutError:
                timed_out = True
            seconds = time.monotonic() - began
            await _end_group(proc)
        except asyncio.CancelledError:
            await _end_group(proc)
            reader.cancel()
            self._record(CheckResult(variant, None, time.monotonic() - began,
                                     _decode_tail(tail), self._cancel_reason))
            raise
        finally:
            self._groups.discard(proc.pid)
        await asyncio.wait({reader}, timeout=1.0)  # the last output, unless a pipe stays open
        reader.cancel()
        output = _decode_tail(tail)
        if timed_out:
            return CheckResult(variant, None, seconds, output,
                               f"timed out after {self.timeout:g} s; killed with its children")
        code = proc.returncode
        assert code is not None
        error = ""
        if code < 0:
            error = f"killed by {_signal_name(-code)}"
        elif code == 127:
            found = re.findall(r"([^\s:]+): (?:command )?not found", output)
            error = f"check command not found: {found[-1] if found else self.cmd.split()[0]}"
        elif 128 < code <= 128 + 64 and code - 128 in signal.valid_signals():
            error = f"exit {code}: a process it ran was killed by {_signal_name(code - 128)}"
        return CheckResult(variant, code, seconds, output, error)


async def _read_tail(stream: asyncio.StreamReader, tail: bytearray) -> None:
    while chunk := await stream.read(65536):
        tail += chunk
        if len(tail) > OUTPUT_CHARS * 4:
            del tail[:-OUTPUT_CHARS * 4]


def _decode_tail(tail: bytearray) -> str:
    return bytes(tail).decode("utf-8", errors="replace")[-OUTPUT_CHARS:]


async def _end_group(proc: asyncio.subprocess.Process) -> None:
    """End the process group `proc` leads: SIGTERM, then SIGKILL after KILL_GRACE; returns
    once `proc` is reaped and no other member runs."""
    pgid = proc.pid
    reaped = asyncio.ensure_future(proc.wait())
    try:
        if proc.returncode is None or group_alive(pgid):
            _signal_group(pgid, signal.SIGTERM)
            deadline = time.monotonic() + KILL_GRACE
            while time.monotonic() < deadline:
                if reaped.done() and not group_alive(pgid):
                    return
                await asyncio.wait({reaped}, timeout=0.05)
            _signal_group(pgid, signal.SIGKILL)
        await reaped
    finally:
        reaped.cancel()
    deadline = time.monotonic() + KILL_GRACE
    while group_alive(pgid) and time.monotonic() < deadline:
        _signal_group(pgid, signal.SIGKILL)
        await asyncio.sleep(0.02)


def _one_line(exc: BaseException) -> str:
    return (" ".join(str(exc).split()) or type(exc).__name__)[:300]
