"""The workspace's git repository: one long-lived gitpython Repo, found where every
repository is found (app/core/disk/git_dirs.py: also inside linked worktrees, where `.git` is
a file pointing elsewhere), with git run in it through the one wrapper (command.py).

It answers what the file tree and the header show (files, status with staged and unstaged
apart, the branch), what the diff pane shows besides the pending diff (a file's working tree
or index against HEAD), and it stages exactly the hunks the user accepted (`git apply
--cached` of a patch built against the index, as `git add -p` does) and commits them,
through git itself so hooks run as git runs them.

Every method blocks (git runs as a subprocess): callers on an event loop run them in a
thread. One lock serialises them: two commands writing the index would trip over its lock,
and the Repo (which reads HEAD for branch()) is not thread-safe.
Outside a repository `GitRepo.open` returns None and everything else in steer still works.
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from app.core.disk.git_dirs import find_repo
from app.core.edits.diff import PendingDiff
from app.core.edits.hunks import HunkState
from app.core.git.command import GitError, run_git
from app.core.text.linediff import Change, rebase
from app.core.text.textfile import NotText, TextFormat, decode, encode

if TYPE_CHECKING:
    from git import Repo

NOT_A_REPO = "not a git repository: nothing to stage or commit"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's well-known empty tree
# files in the git dir that say an operation is half done, and what to call it
IN_PROGRESS = (("MERGE_HEAD", "a merge"), ("rebase-merge", "a rebase"), ("rebase-apply", "a rebase"),
               ("CHERRY_PICK_HEAD", "a cherry-pick"), ("REVERT_HEAD", "a revert"))


@dataclass(frozen=True, slots=True)
class FileStatus:
    """One path's two-letter status (`git status --porcelain` XY): X the index against HEAD,
    Y the working tree against the index."""

    index: str
    worktree: str
    source: str | None = None  # a rename's original path

    @property
    def untracked(self) -> bool:
        return self.index == "?"

    @property
    def conflicted(self) -> bool:
        return "U" in (self.index, self.worktree) or self.index + self.worktree in ("AA", "DD")

    @property
    def staged(self) -> bool:
        return self.index not in (" ", "?", "!") and not self.conflicted

    @property
    def unstaged(self) -> bool:
        return self.worktree not in (" ", "!") and not self.conflicted

    @property
    def badge(self) -> str:
        """One letter for the file tree: M modified, A added, D deleted, R renamed,
        ? untracked, U conflicted."""
        x, y = self.index, self.worktree
        if self.conflicted:
            return "U"
        if x == "?":
            return "?"
        if "D" in (x, y):
            return "D"
        if x == "A":
            return "A"
        if x == "R":
            return "R"
        return "M"


@dataclass
class StageResult:
    staged: list[str] = field(default_factory=list)  # paths whose accepted hunks are now staged
    unchanged: list[str] = field(default_factory=list)  # already staged
    messages: list[str] = field(default_factory=list)  # refusals and failures

    @property
    def ok(self) -> bool:
        return not self.messages


@dataclass(frozen=True)
class StageItem:
    """What staging needs to know about one file, taken from the pending diff where it lives
    (the git work then runs in a thread, on this copy)."""

    path: str
    base: tuple[str, ...]  # the pending diff's base lines ((): the file did not exist)
    base_exists: bool
    fmt: TextFormat  # for a file git does not have yet
    edits: tuple[Change, ...]  # accepted hunks: base range -> the lines written
    ids: tuple[int, ...]
    everything: bool  # every hunk of the file is accepted
    deleted: bool  # the proposal deletes the file
    move_to: str | None


def stage_items(pending: PendingDiff, paths: Iterable[str] | None = None) -> list[StageItem]:
    """The accepted hunks of each file (of `paths`, default all)."""
    wanted = set(paths) if paths is not None else None
    items = []
    for fd in pending.files.values():
        if wanted is not None and fd.path not in wanted:
            continue
        accepted = sorted((h for h in fd.hunks if h.state == HunkState.ACCEPTED),
                          key=lambda h: (h.base_start, h.base_end))
        if not accepted:
            continue
        items.append(StageItem(
            fd.path, tuple(fd.base.lines) if fd.base.exists else (), fd.base.exists, fd.base.fmt,
            tuple(Change(h.base_start, h.base_end, tuple(h.applied or [])) for h in accepted),
            tuple(h.id for h in accepted), all(h.state == HunkState.ACCEPTED for h in fd.hunks),
            fd.deleted, fd.move_to))
    return items


@dataclass
class CommitResult:
    ok: bool
    message: str  # git's summary line, or why it failed (a hook's own output)
    sha: str | None = None


class GitRepo:
    def __init__(self, repo: Repo, root: str) -> None:
        self.repo = repo
        self.root = Path(root)  # the worktree's top level
        self.git_dir = Path(repo.git_dir).resolve()  # this worktree's own (HEAD, index)
        self.common_dir = Path(repo.common_dir).resolve()  # shared: refs, packed-refs
        self._lock = threading.Lock()

    @classmethod
    def open(cls, root: str | os.PathLike[str]) -> GitRepo | None:
        """The repository whose top level is `root`, or None (not a repository, or `root`
        is only a folder inside one: its paths would not be the workspace's)."""
        repo = find_repo(root)
        if repo is None:
            return None
        top = repo.working_tree_dir
        if repo.bare or not top or os.path.realpath(top) != os.path.realpath(root):
            repo.close()
            return None
        return cls(repo, str(top))

    def close(self) -> None:
        with self._lock:
            self.repo.close()

    def __enter__(self) -> GitRepo:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- running git (app/core/git/command.py) -----------------------------------------
    def _git(self, *args: str, stdin: bytes | None = None, check: bool = True) -> tuple[int, bytes, str]:
        """Run `git args` in the worktree: (status, stdout bytes, stderr text)."""
        # reads never take the index lock to refresh it: steer watches the index, and its
        # own `git status` must not look like someone else's change (nor block theirs)
        lock = () if args[0] in ("apply", "commit") else ("--no-optional-locks",)
        with self._lock:
            return run_git(self.root, args, options=lock, stdin=stdin, check=check)

    # -- what the views show -------------------------------------------------------------
    def branch(self) -> str:
        """The branch checked out, or `detached at abc1234`."""
        with self._lock:
            head = self.repo.head
            try:
                if head.is_detached:
                    return f"detached at {head.commit.hexsha[:7]}"
                return head.reference.name
            except (ValueError, TypeError):  # a branch without commits yet
                return self.repo.active_branch.name

    def list_files(self, limit: int = 500_000) -> list[str]:
        """Tracked and untracked-but-not-ignored files, sorted."""
        _, out, _ = self._git("ls-files", "--cached", "--others", "--exclude-standard", "-z")
        files = sorted({p for p in out.decode("utf-8", "surrogateescape").split("\0") if p})
        return files[:limit]

    def grep_words(self, words: Iterable[str], timeout: float, per_file: int = 20,
                   max_bytes: int = 1 << 20) -> list[tuple[str, int, str]]:
        """(path, line number, line) of the lines of the tree's text files (tracked and
        untracked, not ignored) holding one of `words` as a whole word; [] when git takes
        longer than `timeout` seconds (it is killed) or fails."""
        args = ["grep", "-n", "-z", "-w", "-I", "-F", "--untracked", "--exclude-standard",
                "--no-color", "-m", str(per_file)]
        for w in words:
            args += ["-e", w]
        with self._lock:
            try:
                status, out, _ = run_git(self.root, args, options=("--no-optional-locks",),
                                         check=False, timeout=timeout)
            except subprocess.TimeoutExpired:  # killed at the time limit
                return []
        if status not in (0, 1):  # 1: nothing found
            return []
        rows = []
        for line in out[:max_bytes].split(b"\n"):
            parts = line.split(b"\0", 2)
            if len(parts) == 3 and parts[1].isdigit():
                rows.append((parts[0].decode("utf-8", "surrogateescape"), int(parts[1]),
                             parts[2].decode("utf-8", "replace")))
        return rows

    def status(self, paths: Iterable[str] | None = None) -> dict[str, FileStatus]:
        """Every path that is not clean; with `paths`, only those (a quick look after a few
        files changed, instead of a walk of the whole tree)."""
        spec = ["--", *(f":(literal){p}" for p in paths)] if paths is not None else []
        if paths is not None and len(spec) == 1:
            return {}
        _, out, _ = self._git("status", "--porcelain=v1", "-z", "--untracked-files=all", *spec)
        entries = out.decode("utf-8", "surrogateescape").split("\0")
        result: dict[str, FileStatus] = {}
        i = 0
        while i < len(entries):
            entry = entries[i]
            i += 1
            if len(entry) < 4:
                continue
            x, y, path = entry[0], entry[1], entry[3:]
            source = None
            if x in "RC" or y in "RC":
                source = entries[i] if i < len(entries) else None
                i += 1  # the rename's source path follows
            if x == "?" and path in result:  # `git rm --cached`: staged deletion and untracked
                continue
            result[path] = FileStatus(x, y, source)
        return result

    def staged(self) -> dict[str, str]:
        """path -> its index letter against HEAD (M, A, D, R, U…): the index side of the
        status without looking at the working tree, so it is quick on any size of tree."""
        _, out, _ = self._git("diff-index", "--cached", "--name-status", "-z", "-M", self._head())
        parts = out.decode("utf-8", "surrogateescape").split("\0")
        result: dict[str, str] = {}
        i = 0
        while i < len(parts) and parts[i]:
            letter = parts[i][0]
            if letter in "RC":  # R100\0old\0new
                result[parts[i + 2]] = letter
                i += 3
            else:
                result[parts[i + 1]] = letter
                i += 2
        return result

    def head_sha(self) -> str | None:
        """The commit HEAD points at (None on a branch without commits)."""
        status, out, _ = self._git("rev-parse", "--verify", "-q", "HEAD", check=False)
        return out.decode().strip() if status == 0 else None

    def changed_between(self, a: str | None, b: str | None) -> set[str]:
        """Paths that differ between two commits (trees only: quick at any size)."""
        _, out, _ = self._git("diff", "--name-only", "--no-renames", "-z", a or EMPTY_TREE,
                              b or EMPTY_TREE)
        return {p for p in out.decode("utf-8", "surrogateescape").split("\0") if p}

    def ignored(self, paths: Iterable[str]) -> set[str]:
        """Which of `paths` .gitignore (and friends) exclude."""
        data = "".join(f"{p}\0" for p in paths).encode("utf-8", "surrogateescape")
        if not data:
            return set()
        _, out, _ = self._git("check-ignore", "-z", "--stdin", stdin=data, check=False)
        return {p for p in out.decode("utf-8", "surrogateescape").split("\0") if p}

    def diff_head(self, path: str) -> str:
        """The working tree's `path` against HEAD, as a unified diff (text for the diff pane);
        an untracked file shows as all added."""
        if self._tracked_anywhere(path):
            _, out, _ = self._git("diff", "--no-color", "--no-ext-diff", self._head(), "--", path)
        else:
            _, out, _ = self._git("diff", "--no-color", "--no-ext-diff", "--no-index", "--",
                                  os.devnull, path, check=False)
        return out.decode("utf-8", "replace")

    def diff_index(self, path: str) -> str:
        """What is staged for `path`: the index against HEAD."""
        _, out, _ = self._git("diff", "--no-color", "--no-ext-diff", "--cached", self._head(),
                              "--", path)
        return out.decode("utf-8", "replace")

    def diff_unstaged(self, path: str) -> str:
        """The working tree against the index: what `git add` would still take."""
        _, out, _ = self._git("diff", "--no-color", "--no-ext-diff", "--", path)
        return out.decode("utf-8", "replace")

    def _head(self) -> str:
        status, _, _ = self._git("rev-parse", "--verify", "-q", "HEAD", check=False)
        return "HEAD" if status == 0 else EMPTY_TREE

    def _tracked_anywhere(self, path: str) -> bool:
        _, out, _ = self._git("ls-files", "--cached", "-z", "--", path)
        if out:
            return True
        status, _, _ = self._git("cat-file", "-e", f"{self._head()}:{path}", check=False)
        return status == 0

    # -- whether it is safe to stage or commit -------------------------------------------
    def refusal(self) -> str | None:
        """Why staging or committing now would be wrong (an operation half done, conflicts
        in the index), or None."""
        for name, what in IN_PROGRESS:
            if (self.git_dir / name).exists():
                return (f"{what} is in progress in this repository: finish or abort it first; "
                        "nothing was staged or committed")
        _, out, _ = self._git("ls-files", "--unmerged", "-z")
        paths = sorted({line.split("\t", 1)[1] for line in out.decode("utf-8", "replace").split("\0")
                        if "\t" in line})
        if paths:
            shown = ", ".join(paths[:5]) + (" and more" if len(paths) > 5 else "")
            return (f"the index has unresolved conflicts ({shown}): resolve them first; "
                    "nothing was staged or committed")
        return None

    # -- staging exactly what was accepted ---------------------------------------------
    def stage_accepted(self, pending: PendingDiff, paths: Iterable[str] | None = None) -> StageResult:
        """`stage(stage_items(pending, paths))`, for callers without an event loop."""
        return self.stage(stage_items(pending, paths))

    def stage(self, items: Iterable[StageItem]) -> StageResult:
        """Stage the accepted hunks (and only them) of each file: a patch from the index's
        version of the file to that version plus the accepted hunks, applied to the index.
        The user's other changes in the same files stay unstaged. Refuses, staging nothing,
        while a merge or rebase is in progress or the index has conflicts."""
        result = StageResult()
        why = self.refusal()
        if why:
            result.messages.append(why)
            return result
        patches: list[tuple[list[str], bytes]] = []
        for item in items:
            try:
                made = self._file_patch(item)
            except (GitError, NotText) as exc:
                result.messages.append(f"{item.path}: {exc}; not staged")
                continue
            if made is None:
                result.unchanged.append(item.path)
            else:
                patches.append(made)
        if result.messages:  # all or nothing: a partial stage would be a surprise
            return result
        for touched, patch in patches:
            try:
                self._git("apply", "--cached", "--whitespace=nowarn", "-", stdin=patch)
            except GitError as exc:
                result.messages.append(f"{', '.join(touched)}: {exc}; not staged")
                return result
            result.staged.extend(touched)
        return result

    def _index_entry(self, path: str) -> tuple[str, bytes] | None:
        """(mode, content) of `path` in the index, or None when it is not there."""
        _, out, _ = self._git("ls-files", "--stage", "-z", "--", path)
        line = out.decode("utf-8", "surrogateescape").split("\0")[0]
        if not line:
            return None
        meta, _name = line.split("\t", 1)
        mode, sha, _stage = meta.split()
        _, blob, _ = self._git("cat-file", "blob", sha)
        return mode, blob

    def _file_patch(self, item: StageItem) -> tuple[list[str], bytes] | None:
        """(paths, patch) taking the index to the index plus `item`'s accepted hunks, or
        None when the index has them already."""
        path = item.path
        entry = self._index_entry(path)
        if entry is None and item.base_exists:
            raise GitError("the file is not tracked; stage it yourself with git add")
        mode, before = entry if entry is not None else (_mode(self.root / path), b"")
        lines, fmt = decode(before, path) if entry is not None else ([], item.fmt)
        merged, bad = rebase(item.base, lines, item.edits, same_ok=True)
        if bad:
            edit = item.edits[bad[0]]
            raise GitError(f"the index differs from the lines accepted hunk #{item.ids[bad[0]]} "
                           f"changes (line {edit.a1 + 1}); stage it by hand")
        on_disk = (self.root / path).exists()
        after = encode(merged, fmt, lines if entry is not None else None)
        if item.everything and item.move_to and not on_disk:
            target_mode = _mode(self.root / item.move_to)
            removal = _patch(path, before, None, mode) if entry is not None else b""
            return [path, item.move_to], removal + _patch(item.move_to, None, after, target_mode)
        if item.everything and item.deleted and not on_disk:
            return ([path], _patch(path, before, None, mode)) if entry is not None else None
        if entry is not None and after == before:
            return None
        return [path], _patch(path, before if entry is not None else None, after, mode)

    # -- committing ------------------------------------------------------------------------
    def staged_diff(self) -> str:
        """Everything staged, as a unified diff (what a commit message describes)."""
        _, out, _ = self._git("diff", "--no-color", "--no-ext-diff", "--cached", self._head())
        return out.decode("utf-8", "replace")

    def commit(self, message: str) -> CommitResult:
        """Commit the index with `message`. Hooks (pre-commit, commit-msg) run as git runs
        them; when one fails, its own output is the message."""
        if not message.strip():
            return CommitResult(False, "the commit message is empty; nothing was committed")
        why = self.refusal()
        if why:
            return CommitResult(False, why)
        status, out, err = self._git("commit", "-F", "-", stdin=message.encode(), check=False)
        text = out.decode("utf-8", "replace").strip()
        if status != 0:
            detail = "\n".join(t for t in (err.strip(), text) if t)
            return CommitResult(False, f"git commit failed: {detail or status}")
        _, sha, _ = self._git("rev-parse", "HEAD")
        return CommitResult(True, text.splitlines()[0] if text else "committed",
                            sha.decode().strip())


def _mode(path: Path) -> str:
    try:
        return "100755" if os.stat(path).st_mode & 0o111 else "100644"
    except FileNotFoundError:
        return "100644"


_LINE = re.compile(rb"[^\n]*\n|[^\n]+\Z")


def _patch(path: str, before: bytes | None, after: bytes | None, mode: str) -> bytes:
    """A git patch taking `path` from `before` to `after` (None: absent), byte for byte:
    CRLF stays in the lines and a missing final newline gets git's marker."""
    p = path.encode("utf-8", "surrogateescape")
    if b"\n" in p or b"\t" in p:
        raise GitError("a file name with a newline or tab cannot go in a patch")
    head = [b"diff --git a/" + p + b" b/" + p + b"\n"]
    if before is None:
        head.append(b"new file mode " + mode.encode() + b"\n")
    elif after is None:
        head.append(b"deleted file mode " + mode.encode() + b"\n")
    a = _LINE.findall(before or b"")
    b = _LINE.findall(after or b"")
    body = list(difflib.diff_bytes(difflib.unified_diff, a, b,
                                   b"/dev/null" if before is None else b"a/" + p,
                                   b"/dev/null" if after is None else b"b/" + p, n=3))
    out = head + [line if line.endswith(b"\n") else line + b"\n\\ No newline at end of file\n"
                  for line in body]
    return b"".join(out)


def badges(status: dict[str, FileStatus]) -> dict[str, str]:
    return {p: s.badge for p, s in status.items()}
