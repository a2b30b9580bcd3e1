"""The check that picks a variant: each finished answer is written into a throwaway git
worktree of its own (worktrees.py: why worktrees, and how the user's repository stays
untouched), a user's command (tests, a linter) runs there, and the first answer whose
command exits 0 wins.

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
import subprocess
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from pathlib import Path

from app.core.disk.processes import group_alive
from app.core.git.command import without_repo_env
from app.core.variants import worktrees
from app.core.variants.worktrees import refusal

OUTPUT_CHARS = 4000
KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL
ENV_MARK = "STEER_CHECK_WORKTREE"  # every check process carries its worktree here
# sh builtins and keywords a check command may start with (shutil.which finds some of them).
SH_WORDS = frozenset(
    ": . [ [[ ! { } ( alias bg break case cd command continue do done echo elif else esac eval "
    "exec exit export false fg fi for getopts hash if jobs kill local printf pwd read readonly "
    "return set shift source test then times trap true type ulimit umask unalias unset until "
    "wait while".split())


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


# pytest's summary ("FAILED tests/test_calc.py::test_sub - assert 1 == 2", "ERROR ..."), and
# unittest's ("FAIL: test_sub (test_calc.CalcTest)")
_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+?)(?: - .*)?$|^(?:FAIL|ERROR): (\w+)", re.M)


def failed_tests(output: str) -> list[str]:
    """The tests a check's output names as failed, by their short names, in order."""
    names = [(m[1] or m[2]).rsplit("::", 1)[-1] for m in _FAILED.finditer(output)]
    return list(dict.fromkeys(names))


_TELLING = re.compile(r"^(?:E |FAILED |ERROR |FAIL: |\S*Error\b|error)")


def gist(output: str, n: int = 3) -> list[str]:
    """The `n` lines of a failing check's output that say most: pytest's `E` lines and its
    summary, an error's name; else its last lines."""
    lines = [line.rstrip() for line in output.splitlines() if line.strip()]
    telling = [line for line in lines if _TELLING.match(line)]
    return (telling or lines[-n:])[:n]


def verdict(result: CheckResult) -> str:
    """One line: "✓ check 2.1 s", "✗ check: 1 failed (test_sub)", "✗ check: exited 2"..."""
    if result.passed:
        return f"✓ check {result.seconds:.1f} s"
    if result.error:
        return f"✗ check: {result.error}"
    failed = failed_tests(result.output)
    if failed:
        shown = ", ".join(failed[:3]) + (", …" if len(failed) > 3 else "")
        return f"✗ check: {len(failed)} failed ({shown})"
    return f"✗ check: exited {result.exit_code}"


@dataclass(frozen=True)
class CheckCommand:
    """What a check runs and how: the user's command line (None: no check), its time limit,
    and whether it runs in the sandbox (`check_sandbox`)."""

    cmd: str | None = None
    timeout: float = 120.0
    sandbox: bool = False


def sandbox_argv(tree: Path, gitdir: Path | None, cwd: Path) -> list[str]:
    """bubblewrap around a check (`check_sandbox = true`): the whole system read-only, no
    network, and writable only the worktree (and its own git folder, so git works in it;
    `gitdir` is .git/worktrees/NAME)."""
    # /tmp stays as it is, read-only (a venv or the project itself may live there); the
    # temporary files of the check go in a folder of its worktree (TMPDIR)
    tmp = tree / ".steer-tmp"
    tmp.mkdir(exist_ok=True)
    argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--bind", str(tree), str(tree), "--setenv", "TMPDIR", str(tmp)]
    if gitdir is not None:
        argv += ["--bind", str(gitdir), str(gitdir)]
    return argv + ["--unshare-net", "--die-with-parent", "--chdir", str(cwd)]


def sandbox_problem() -> str | None:
    """Why the check sandbox cannot run here (None: it can): bubblewrap missing, or the
    kernel refusing it the namespaces it needs (some containers do)."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed"
    try:
        run = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-net",
                              "--die-with-parent", "true"], capture_output=True, text=True,
                             timeout=20)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bwrap cannot start: {_one_line(exc)}"
    if run.returncode != 0:
        return "bwrap cannot make its sandbox here: " + (run.stderr.strip().splitlines() or
                                                         [f"exit {run.returncode}"])[-1]
    return None


class CheckRefused(Exception):
    """Checks cannot run here (a one-line reason); raised before anything is made."""


# -- up-front refusals (and worktrees.refusal) -------------------------------------------
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


# -- processes ------------------------------------------------------------------------------
def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _kill_marked(*folders: str) -> None:
    """SIGKILL every process whose environment names one of the worktree `folders`: a dead
    steer's leftovers, or what left its check's process group (setsid) or outlived it in a race."""
    if not folders or not os.path.isdir("/proc"):
        return
    marks = {f"{ENV_MARK}={w}".encode() for w in folders}
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


def remove_stale(root: Path) -> list[Path]:
    """Remove check worktrees left by a steer that is gone, kill what still runs in them,
    and forget their metadata."""
    removed = worktrees.dead_folders()
    for entry in removed:
        _kill_marked(str(entry))
        worktrees.remove(root, entry)
    worktrees.forget(worktrees.common_dir(root))
    return removed


# -- the checks ------------------------------------------------------------------------------
class _Cancelled(Exception):
    """A check was stopped before it could finish (the reason is the message)."""


class Checks:
    """Runs CMD on each finished variant in its own worktree, concurrently, as they finish.

    Construct it on a thread that may block briefly (it refuses, then cleans up after a dead
    steer); start() needs a running event loop. Always `await aclose()` in a finally."""

    def __init__(self, root: Path, cmd: str, *, timeout: float = 120.0,
                 sandbox: bool = False) -> None:
        root = Path(root)
        reason = refusal(root) or command_error(cmd, root)
        if not reason and sandbox:
            why = sandbox_problem()
            reason = f"check_sandbox: {why}" if why else None
        if reason:
            raise CheckRefused(reason)
        self.cmd = cmd
        self.timeout = timeout
        self.sandbox = sandbox
        self.root, self.prefix = worktrees.top_level(root)
        self.common = worktrees.common_dir(self.root)
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
                worktrees.remove(self.root, path)
                self._worktrees.discard(path)
            worktrees.forget(self.common)

    def _remove_one(self, path: Path) -> None:
        with self._lock, self._git_lock:
            if path in self._worktrees:
                _kill_marked(str(path))
                worktrees.remove(self.root, path)
                self._worktrees.discard(path)

    def _prepare(self, variant: int, files: dict[str, bytes | None]) -> Path:
        """A worktree at HEAD made to look like the user's tree now, `files` on top."""
        for rel in files:
            worktrees.plain(rel)  # a path the variant may not write: refused before anything
        with self._lock:
            if self._closing:
                raise _Cancelled(self._cancel_reason)
            tree = worktrees.new_folder(variant)
            self._worktrees.add(tree)
        worktrees.add(self.root, tree, self._git_lock)
        for rel in worktrees.changed_paths(self.root):
            if self._closing:
                raise _Cancelled(self._cancel_reason)
            worktrees.copy_entry(self.root / rel, worktrees.inside(tree, rel))
        worktrees.write_variant(tree, files)
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
        env = {**without_repo_env(), ENV_MARK: str(tree)}  # its git works on the worktree
        began = time.monotonic()
        # shielded: a cancelled spawn would have asyncio SIGKILL the shell alone, leaving
        # whatever it started meanwhile outside our reach
        argv = ["/bin/sh", "-c", self.cmd]
        if self.sandbox:
            gitdir = _gitdir_of(tree)
            argv = [*sandbox_argv(tree, gitdir, cwd), *argv]
        spawn = asyncio.ensure_future(asyncio.create_subprocess_exec(
            *argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
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


def _gitdir_of(tree: Path) -> Path | None:
    """A worktree's own git folder (its `.git` file says where: in the repository's
    worktrees/), which git writes while it works there."""
    try:
        text = (tree / ".git").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return Path(text.removeprefix("gitdir:").strip()) if text.startswith("gitdir:") else None


def _one_line(exc: BaseException) -> str:
    return (" ".join(str(exc).split()) or type(exc).__name__)[:300]
