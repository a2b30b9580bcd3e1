"""Changes to the working tree and to git's state, as they happen (watchfiles).

watchfiles' default filter hides `.git/`, and with it everything git does outside steer: a
commit, `git add`, a branch switch, a stash, a pull. Here the working tree is filtered our
way (heavy folders and steer's own temp files out) and the git dir is watched too, keeping
only what says the repository's state moved: HEAD, the index, refs, packed-refs and the
markers of a merge, rebase or cherry-pick; objects, logs, lock files and steer's own
journal are dropped. In a linked worktree the git dirs live elsewhere and are watched there.

The watcher runs in a thread of its own (watchfiles' blocking iterator), filtering there, so
a checkout that rewrites 10,000 files costs the event loop one queued batch per debounce
window, not 10,000 filter calls.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import watchfiles

from app.core.git.files import SKIP_DIRS

# files at the top of a git dir whose change means HEAD, the index or an operation moved
GIT_STATE = frozenset({"HEAD", "index", "packed-refs", "MERGE_HEAD", "CHERRY_PICK_HEAD",
                       "REVERT_HEAD", "REBASE_HEAD", "rebase-merge", "rebase-apply"})
KIND = {watchfiles.Change.added: "added", watchfiles.Change.modified: "modified",
        watchfiles.Change.deleted: "deleted"}


@dataclass
class Changes:
    """One debounced batch."""

    files: dict[str, str] = field(default_factory=dict)  # workspace path -> added/modified/deleted
    git: set[str] = field(default_factory=set)  # git-dir entries that moved (HEAD, index, refs/…)

    def __bool__(self) -> bool:
        return bool(self.files or self.git)


class _Filter:
    """Which raw events matter, decided with string operations only (it sees every event)."""

    def __init__(self, root: Path, git_dirs: Sequence[Path]) -> None:
        self.root = str(root) + os.sep
        own = git_dirs[0] if git_dirs else None  # this worktree's git dir (HEAD, index)
        self.git = [(str(d) + os.sep, d == own) for d in dict.fromkeys(git_dirs)]

    def classify(self, path: str) -> tuple[str, str] | None:
        """("git", entry) or ("file", workspace path), or None to drop it."""
        for prefix, own in self.git:
            if path.startswith(prefix):
                rel = path[len(prefix):].replace(os.sep, "/")
                if rel.endswith(".lock"):
                    return None
                if rel.startswith("refs/") or (own and rel in GIT_STATE) or rel == "packed-refs":
                    return "git", rel
                return None
        if not path.startswith(self.root):
            return None
        rel = path[len(self.root):].replace(os.sep, "/")
        if rel.endswith(".steer-tmp") or not rel:
            return None
        if any(part in SKIP_DIRS for part in rel.split("/")):
            return None
        return "file", rel

    def __call__(self, _change: watchfiles.Change, path: str) -> bool:
        return self.classify(path) is not None


def git_dirs_of(repo) -> list[Path]:
    """The dirs to watch for a GitRepo (its own git dir first, then the shared one)."""
    if repo is None:
        return []
    return list(dict.fromkeys([repo.git_dir, repo.common_dir]))


class Watcher:
    """watchfiles in a thread, delivering `Changes` to a callback on the event loop."""

    def __init__(self, root: Path, git_dirs: Sequence[Path] = (), *, debounce: int = 50,
                 step: int = 10) -> None:
        # a batch is yielded once a step passes with no new event (or after `debounce`)
        self.root = Path(root)
        self.git_dirs = [Path(d) for d in git_dirs]
        self.filter = _Filter(self.root, self.git_dirs)
        self.debounce = debounce
        self.step = step
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.ready = threading.Event()  # set once the watches are in place

    def start(self, deliver: Callable[[Changes], None], loop: asyncio.AbstractEventLoop) -> None:
        paths = [self.root] + [d for d in self.git_dirs if not _inside(d, self.root)]

        def run() -> None:
            try:
                for raw in watchfiles.watch(*paths, watch_filter=self.filter, debounce=self.debounce,
                                            step=self.step, stop_event=self._stop,
                                            yield_on_timeout=True, rust_timeout=100,
                                            raise_interrupt=False, ignore_permission_denied=True):
                    self.ready.set()
                    batch = self._batch(raw)
                    if batch:
                        loop.call_soon_threadsafe(deliver, batch)
            except RuntimeError:  # the loop closed under us: nobody is listening any more
                pass
            finally:
                self.ready.set()

        self._thread = threading.Thread(target=run, name="steer-watch", daemon=True)
        self._thread.start()

    def _batch(self, raw) -> Changes:
        out = Changes()
        classify = self.filter.classify
        for change, path in raw:
            what = classify(path)
            if what is None:
                continue
            kind, rel = what
            if kind == "git":
                out.git.add(rel)
            else:
                out.files[rel] = KIND[change]
        return out

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)


def _inside(path: Path, root: Path) -> bool:
    return os.path.commonpath([str(path), str(root)]) == str(root)


async def events(root: Path, git_dirs: Sequence[Path] = (), stop: asyncio.Event | None = None,
                 ) -> AsyncIterator[Changes]:
    """Batches of changes (working tree and git state) until `stop` is set."""
    queue: asyncio.Queue[Changes] = asyncio.Queue()
    watcher = Watcher(root, git_dirs)
    watcher.start(queue.put_nowait, asyncio.get_running_loop())
    stopper = asyncio.ensure_future(stop.wait()) if stop is not None else None
    try:
        while True:
            getter = asyncio.ensure_future(queue.get())
            waits = {getter} | ({stopper} if stopper is not None else set())
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if getter not in done:
                getter.cancel()
                return
            yield getter.result()
    finally:
        if stopper is not None:
            stopper.cancel()
        await asyncio.to_thread(watcher.stop)


async def changes(root: Path, stop=None) -> AsyncIterator[set[str]]:
    """Batches of changed working-tree files (workspace-relative), until `stop` is set."""
    async for batch in events(root, (), stop):
        if batch.files:
            yield set(batch.files)
