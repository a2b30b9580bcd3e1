"""The read-only look-ups a model makes itself: `read` a file (or some of its lines), `grep`
the tree, `list` a folder, answered from the working tree as it is on disk now.

The same path rules as a write (Workspace.check_path: nothing outside the root, no symlink
leading out, nothing in .git/), and more, since reading is what a model can be tricked into
asking for: a file .gitignore excludes, or one that looks like a secret (secret_files.py), is
refused with a reason the model can read, unless the caller says the user added it to the
context. Every answer is bounded (lines, bytes, matches, entries) and says so when it was
cut, and carries its token estimate so the caller can budget the conversation.

Every method blocks (disk, and `git check-ignore` in a repository): a caller on an event
loop runs it in a thread, and a thread cannot be stopped from outside, so the work stops
itself. Paths have a length and a depth limit before any file-system call
(app/core/disk/paths.py). `grep` takes a model's regular expression, which can
backtrack for ever (`(a+)+$` over a long line of a's): it runs in the `regex` module,
which lets go of the GIL while it matches (Python's `re` holds it, and the event loop that
started the thread starves) and stops a search at a time limit. Each search may take
`grep_search_seconds`, and the whole grep stops at the caller's `Deadline` (checked before
every file and search); either way the answer says it timed out, with what it found until
then. A pattern is refused before it is compiled when it is too long or its counted
repeats multiply past `grep_repeats`: `regex` spells those out when it compiles
(`a{1000000}`: a second, 270 MB).
"""

from __future__ import annotations

import fnmatch
import math
import os
import re
import stat
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from app.core.disk.paths import too_long
from app.core.disk.workspace import PathRefused, Workspace
from app.core.git.files import list_files
from app.core.git.repository import GitRepo
from app.core.knowledge.render import estimate_tokens
from app.core.knowledge.secret_files import SECRET_NAMES, holds_key, refusal, secret_name
from app.core.text.names import carried
from app.core.text.textfile import NotText, decode

if TYPE_CHECKING:
    import regex


@dataclass(frozen=True)
class Limits:
    read_lines: int = 400
    read_bytes: int = 24_000
    grep_matches: int = 100
    grep_bytes: int = 16_000
    grep_line_chars: int = 200  # a matching line is shown up to this
    grep_line_chars_searched: int = 4_000
    grep_file_bytes: int = 1 << 20  # bigger files are not searched (and the answer says so)
    grep_search_seconds: float = 1.0  # one search (a file, or a line): past this it backtracks
    grep_pattern_chars: int = 2_000
    grep_glob_chars: int = 500
    grep_repeats: int = 10_000  # the product of nested counted repeats ({n}) a pattern may have
    list_entries: int = 300


class Deadline:
    """When a look-up must stop, shared between the thread that runs it and the caller, who
    can stop it early (the turn was stopped)."""

    def __init__(self, seconds: float = math.inf) -> None:
        self.seconds = seconds
        self._at = time.monotonic() + seconds

    def left(self) -> float:
        return self._at - time.monotonic()

    def stop(self) -> None:
        self._at = -math.inf


@dataclass(frozen=True)
class Answer:
    """What the model reads (`text`, with `tokens` its estimate), and the same facts for the
    caller. `reason` is set when the look-up was refused or failed; `text` then says why."""

    text: str
    tokens: int
    reason: str | None = None
    timed_out: bool = False  # (then `reason` says so, and `text` holds what was found)
    truncated: bool = False
    path: str | None = None
    lines: tuple[str, ...] = ()  # read: the exact lines returned, without terminators
    first_line: int = 0  # read: the number of lines[0]
    matches: tuple[tuple[str, int, str], ...] = ()  # grep: (path, line number, line)
    entries: tuple[str, ...] = field(default=())  # list: names, folders ending in "/"

    @property
    def ok(self) -> bool:
        return self.reason is None


def _answer(text: str, **kw: object) -> Answer:
    return Answer(text, estimate_tokens(text), **kw)  # type: ignore[arg-type]  # Answer's own fields


def _refused(reason: str, path: str | None = None) -> Answer:
    return _answer(reason, reason=reason, path=path)


class Lookup:
    def __init__(self, root: str | os.PathLike[str], *, key_values: Sequence[str] = (),
                 files: Callable[[], Iterable[str]] | None = None, limits: Limits = Limits(),
                 secret_names: Sequence[str] = SECRET_NAMES) -> None:
        """`key_values`: the configured API keys (a file holding one is refused). `files`: the
        tree's files, not ignored (default: git ls-files, or a walk outside a repository;
        pass the map builder's `files` to share its list)."""
        self.ws = Workspace(root)
        self.root = self.ws.root
        self.key_values = tuple(k for k in key_values if k)
        self.limits = limits
        self.secret_names = tuple(secret_names)
        self._files = files or (lambda: list_files(self.root))
        self._git = GitRepo.open(self.root)

    def close(self) -> None:
        if self._git is not None:
            self._git.close()

    def __enter__(self) -> Lookup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- rules ---------------------------------------------------------------------------
    def _ignored(self, rel: str) -> bool:
        return self._git is not None and rel in self._git.ignored([rel])

    def _name_refusal(self, rel: str) -> str | None:
        if self._ignored(rel):
            return (f"refused {rel}: .gitignore excludes it, so it is not part of the project's "
                    "files; the user can add it to the context if it should be shared.")
        pattern = secret_name(rel, self.secret_names)
        return refusal(rel, pattern=pattern) if pattern else None

    def _folder(self, raw: str) -> str:
        """`raw` as a folder inside the workspace ("" for the root), by the rules of
        Workspace.check_path; PathRefused otherwise."""
        p = raw.strip().strip("`'\"").strip()
        if p in ("", ".", "./", "/"):
            return ""
        if "\0" in p or "\\" in p or p.startswith(("/", "~")) or (len(p) > 1 and p[1] == ":"):
            raise PathRefused(f"refused {p}: not a folder inside the workspace")
        if why := too_long(p):
            raise PathRefused(why)
        parts = [s for s in PurePosixPath(p).parts if s != "."]
        if ".." in parts:
            raise PathRefused(f"refused {p}: '..' leads outside the workspace")
        if any(s.lower() == ".git" for s in parts):
            raise PathRefused(f"refused {p}: steer never reads inside .git/")
        full = os.path.realpath(self.root / "/".join(parts))
        if os.path.commonpath([full, self.root]) != str(self.root):
            raise PathRefused(f"refused {p}: a symlink leads outside the workspace")
        rel = os.path.relpath(full, self.root)
        if rel == ".":
            return ""
        if any(s.lower() == ".git" for s in Path(rel).parts):
            raise PathRefused(f"refused {p}: a symlink leads into .git/")
        if not os.path.isdir(full):
            raise PathRefused(f"{p} is not a folder")
        return rel.replace(os.sep, "/")

    # -- read ----------------------------------------------------------------------------
    def read(self, path: str, start: int | None = None, end: int | None = None, *,
             user_added: bool = False) -> Answer:
        """Lines `start`..`end` (1-based, inclusive; default: from the top, as many as the
        limits allow) of a text file."""
        try:
            rel = self.ws.check_path(path)
        except PathRefused as exc:
            return _refused(str(exc))
        if not user_added and (why := self._name_refusal(rel)):
            return _refused(why, rel)
        try:
            got = self.ws.read_file(rel)
        except PathRefused as exc:
            return _refused(str(exc), rel)
        except OSError as exc:
            return _refused(f"could not read {rel}: {exc.strerror}", rel)
        if got.data is None:
            return _refused(f"{rel} does not exist", rel)
        if not user_added and holds_key(got.data, self.key_values):
            return _refused(refusal(rel, key=True), rel)
        try:
            lines, _ = decode(got.data, rel)
        except NotText as exc:
            return _refused(str(exc), rel)
        total = len(lines)
        if total == 0:
            return _answer(f"{rel} is empty", path=rel)
        first = max(1, start or 1)
        if first > total:
            return _refused(f"{rel} has {total} lines; there is no line {first}", rel)
        last = min(total, end if end is not None else total)
        if last < first:
            return _refused(f"asked for lines {first}-{last} of {rel}: the end is before the start", rel)
        lim = self.limits
        out: list[str] = []
        size = 0
        for i in range(first, last + 1):
            line = lines[i - 1]
            size += len(line.encode("utf-8", "surrogateescape")) + len(str(i)) + 3
            if len(out) >= lim.read_lines or (out and size > lim.read_bytes):
                break
            out.append(line)
        shown_last = first + len(out) - 1
        body = "".join(f"{first + k}: {line}\n" for k, line in enumerate(out))
        head = f"{carried(rel)} lines {first}-{shown_last} of {total}:\n"
        cut = shown_last < last
        note = (f"[cut at line {shown_last} (limit: {lim.read_lines} lines or "
                f"{lim.read_bytes:,} bytes); read on with start={shown_last + 1}]\n") if cut else ""
        return _answer(head + body + note, path=rel, lines=tuple(out), first_line=first,
                       truncated=cut)

    # -- grep ----------------------------------------------------------------------------
    def grep(self, pattern: str, glob: str | None = None, *,
             user_added: Collection[str] = (), deadline: Deadline | None = None) -> Answer:
        """Lines matching the regular expression `pattern` (Python syntax) in the tree's files
        (`glob`: only paths or file names matching it, e.g. "*.py" or "app/*"), in path
        order, until `deadline`."""
        lim = self.limits
        deadline = deadline or Deadline()
        if len(pattern) > lim.grep_pattern_chars or len(glob or "") > lim.grep_glob_chars:
            return _refused(f"refused the search: the pattern may have at most "
                            f"{lim.grep_pattern_chars:,} characters and the glob "
                            f"{lim.grep_glob_chars}")
        if (n := _repeats(pattern)) > lim.grep_repeats:
            return _refused(f"refused the pattern {pattern[:80]!r}: its counted repeats multiply "
                            f"to {n:,} (at most {lim.grep_repeats:,}); use + or * instead")
        import regex  # here: its import costs every launch ~20 ms, and most runs never grep

        try:
            rx = regex.compile(pattern, regex.MULTILINE)
        except (regex.error, RecursionError, OverflowError, ValueError) as exc:
            return _refused(f"not a valid regular expression ({exc}): {pattern!r}")
        allowed = set(user_added)
        paths = sorted(set(self._files()) | allowed)
        if glob:
            paths = [p for p in paths if fnmatch.fnmatchcase(p, glob)
                     or fnmatch.fnmatchcase(p.rpartition("/")[2], glob)]
        skipped = {"secret-looking": 0, "binary": 0, "too big": 0, "symlinked": 0}
        found: list[tuple[str, int, str]] = []
        out: list[str] = []
        size = 0
        files_hit = 0
        cut = False
        searched = 0
        late: str | None = None  # why it timed out
        search = _Searcher(rx, lim, deadline, _by_line(pattern))
        for rel in paths:
            if deadline.left() <= 0:
                late = (f"timed out after {deadline.seconds:g} s, with {searched:,} of "
                        f"{len(paths):,} files searched. Narrow the pattern or pass a glob.")
                break
            if rel not in allowed and secret_name(rel, self.secret_names):
                skipped["secret-looking"] += 1
                continue
            try:
                got = self.ws.read(rel)
            except (PathRefused, OSError):
                continue
            if got.link is not None:
                skipped["symlinked"] += 1  # its target is searched under its own name
                continue
            data = got.data
            if data is None:
                continue
            if len(data) > lim.grep_file_bytes:
                skipped["too big"] += 1
                continue
            if b"\0" in data[:8192]:
                skipped["binary"] += 1
                continue
            if rel not in allowed and holds_key(data, self.key_values):
                skipped["secret-looking"] += 1
                continue
            searched += 1
            hit = False
            lines = data.decode("utf-8", "replace").splitlines()
            try:
                for n in search.lines(lines):
                    line = lines[n]
                    shown = line if len(line) <= lim.grep_line_chars else line[:lim.grep_line_chars] + "…"
                    row = f"{carried(rel)}:{n + 1}: {shown}\n"
                    if len(found) >= lim.grep_matches or size + len(row) > lim.grep_bytes:
                        cut = True
                        break
                    hit = True
                    found.append((rel, n + 1, line))
                    out.append(row)
                    size += len(row)
            except TimeoutError:
                late = (f"timed out after {deadline.seconds:g} s, with {searched:,} of "
                        f"{len(paths):,} files searched. Narrow the pattern or pass a glob."
                        if deadline.left() <= 0 else
                        f"timed out: one search ran past {lim.grep_search_seconds:g} s in {rel}. "
                        "A pattern with nested repeats, such as (a+)+, can backtrack for ever: "
                        "rewrite it.")
            files_hit += hit
            if cut or late:
                break
        if late:
            rows = f"{len(found)} matches before it stopped:\n" + "".join(out) if found else ""
            return _answer(late + "\n" + rows, reason=late, timed_out=True, matches=tuple(found))
        notes = []
        if cut:
            notes.append(f"[stopped at {len(found)} matches in {files_hit} files (limit: "
                         f"{lim.grep_matches} matches or {lim.grep_bytes:,} bytes); narrow the "
                         "pattern or pass a glob]")
        skips = ", ".join(f"{n} {what}" for what, n in skipped.items() if n)
        if skips:
            notes.append(f"[not searched: {skips} files]")
        head = (f"{len(found)} matches for {pattern!r}" + (f" in {glob}" if glob else "")
                + f" ({searched} files searched):\n")
        if not found and not cut:
            head = f"no match for {pattern!r}" + (f" in {glob}" if glob else "") + \
                f" ({searched} files searched)\n"
        text = head + "".join(out) + "".join(n + "\n" for n in notes)
        return _answer(text, truncated=cut, matches=tuple(found))

    # -- list ----------------------------------------------------------------------------
    def list(self, folder: str = "") -> Answer:
        """The files and folders directly in `folder` (files .gitignore excludes are not
        listed; secret-looking ones are, marked as not readable)."""
        try:
            rel = self._folder(folder)
        except PathRefused as exc:
            return _refused(str(exc))
        prefix = rel + "/" if rel else ""
        files: list[str] = []
        folders: dict[str, int] = {}
        for p in self._files():
            if not p.startswith(prefix):
                continue
            rest = p[len(prefix):]
            head, sep, _ = rest.partition("/")
            if sep:
                folders[head] = folders.get(head, 0) + 1
            else:
                files.append(rest)
        entries = [f"{d}/" for d in sorted(folders)] + sorted(files)
        lim = self.limits
        shown = entries[:lim.list_entries]
        rows = []
        for e in shown:
            if e.endswith("/"):
                n = folders[e[:-1]]
                rows.append(f"{carried(e)} ({n} file{'s' if n != 1 else ''})")
                continue
            path = prefix + e
            try:
                st = os.stat(self.root / path, follow_symlinks=False)
                what = "a symlink" if stat.S_ISLNK(st.st_mode) else _size(st.st_size)
            except OSError:
                what = "missing"
            if secret_name(path, self.secret_names):
                what += ", secret-looking: not readable"
            rows.append(f"{carried(e)} ({what})")
        name = rel + "/" if rel else "the workspace root"
        head = f"{carried(name)}: {len(folders)} folders, {len(files)} files\n"
        if not entries:
            head = f"{name}: no files (or only files .gitignore excludes)\n"
        cut = len(entries) > len(shown)
        note = f"[{len(entries) - len(shown)} more entries not shown]\n" if cut else ""
        text = head + "".join(r + "\n" for r in rows) + note
        return _answer(text, path=rel, truncated=cut, entries=tuple(shown))


class _Searcher:
    """Which lines of a file a pattern matches, each searched as a line of its own (at most
    `grep_line_chars_searched` characters of it), within the deadline and the limit of one
    search (past either, TimeoutError).

    A search with a time limit costs the `regex` module microseconds more than the search
    itself, so a file is searched whole: its lines (cut at the limit) joined by newlines, in
    MULTILINE mode, where ^ and $ meet each line's ends as they do in the line alone. A match
    there names the line it starts on, which is then searched alone (a match in the whole
    can run on into the next line: the line alone decides), and the search goes on at the
    next line. A line that matches alone matches at the same place in the whole, so none is
    missed; unless the pattern looks past a line's ends some other way (`by_line`: \\A, \\Z,
    look-arounds, a flag turned off), and that one is searched line by line."""

    def __init__(self, rx: regex.Pattern[str], lim: Limits, deadline: Deadline,
                 by_line: bool) -> None:
        self.rx, self.deadline, self.by_line = rx, deadline, by_line
        self.cap, self.most = lim.grep_line_chars_searched, lim.grep_search_seconds

    def _limit(self) -> float:
        left = self.deadline.left()
        if left <= 0:
            raise TimeoutError
        return min(left, self.most)

    def _one(self, line: str) -> bool:
        return self.rx.search(line, 0, self.cap, concurrent=True,
                              timeout=self._limit()) is not None

    def lines(self, lines: list[str]) -> Iterator[int]:
        """The indexes of the lines that match, in order."""
        if self.by_line:
            yield from (n for n, line in enumerate(lines) if self._one(line))
            return
        if not lines:
            return
        cap = self.cap
        long = max(map(len, lines)) > cap
        text = "\n".join(t[:cap] for t in lines) if long else "\n".join(lines)
        pos = n = 0  # the start of line n
        while True:
            m = self.rx.search(text, pos, concurrent=True, timeout=self._limit())
            if m is None:
                return
            n += text.count("\n", pos, m.start())
            if self._one(lines[n]):
                yield n
            end = text.find("\n", m.start())
            if end < 0:
                return
            pos, n = end + 1, n + 1


# what lets a pattern tell a line alone from a line among others, besides ^ and $ (see
# _Searcher): an anchor of the whole string, a look-around, a flag turned off
_BY_LINE = re.compile(r"\\[AZGz]|\(\?<?[=!]|\(\?[a-zA-Z]*-")
_COUNT = re.compile(r"\{(\d*)(?:,(\d*))?\}")


def _by_line(pattern: str) -> bool:
    return _BY_LINE.search(pattern) is not None


def _repeats(pattern: str) -> int:
    """The largest product of nested counted repeats (`{n}`, `{m,n}`) in `pattern`: what
    the `regex` module spells out when it compiles, which no time limit stops."""
    stack = [1]  # the largest product inside each open group
    last = 1  # what a count here repeats: one item (1) or the group just closed
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "{" and (m := _COUNT.match(pattern, i)) and any(m.groups()):
            last *= max(int(g) for g in m.groups() if g) or 1
            stack[-1] = max(stack[-1], last)
            i = m.end()
            continue
        if c == ")" and len(stack) > 1:
            last = stack.pop()
            stack[-1] = max(stack[-1], last)
            i += 1
            continue
        if c == "(":
            stack.append(1)
        elif c == "\\":
            i += 1
        elif c == "[":  # a class: its braces and parentheses are characters
            i += 2 if pattern[i + 1:i + 2] == "^" else 1
            i += pattern[i:i + 1] == "]"
            while i < len(pattern) and pattern[i] != "]":
                i += 2 if pattern[i] == "\\" else 1
        last = 1
        i += 1
    return max(stack)


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / 1024 / 1024:.1f} MB"
