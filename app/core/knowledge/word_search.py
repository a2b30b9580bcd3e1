"""Before the definitions are read: where the names an instruction writes as code are defined,
found by a word search, so the file-names-only map still leads with the right files.

The first build of a large cold tree takes seconds to a minute (builder.py); until it ends, a
request carries the map's paths only. "Add a docstring to greet_someone" then says nothing
of where greet_someone lives. A word search (`git grep -w -F`, C and threaded: milliseconds
on thousands of files) finds the lines that name each such identifier; the lines that look
like its definition (`def greet_someone(`, `class Parser`, `const handler =`) go in the map
under their file, which comes first.

It runs off the request path: `look_ahead` starts it in a thread as soon as the words are
known (the app's draft, `steer run`'s instruction), and `found` answers at once with what is
done. Each search has a time limit; a tree outside git is scanned in Python under the same
limit. Secret-looking files, data and prose formats, and lines holding a configured key
value are never shown.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from app.core.git.repository import GitRepo
from app.core.knowledge.rank import STOPWORDS, code_like, words
from app.core.knowledge.secret_files import secret_name
from app.core.knowledge.tags import MAX_LINE, MAX_PARSE_BYTES, NOT_CODE

MAX_WORDS = 6  # identifiers searched per instruction
PER_FILE = 3  # definition lines shown per file
MAX_FILES = 12  # files found shown first
TIME_LIMIT = 0.8  # seconds a search may take (git grep is killed, a scan stops)
_KINDS = (r"(?:def|class|function|func|fn|struct|enum|interface|type|trait|impl|module|macro|"
          r"const|let|var|val|sub|object|record|protocol)")

_WRITTEN = re.compile(r"`([A-Za-z_]\w*)`|\b([A-Za-z_]\w*)\(|\b" + _KINDS + r"\s+`?([A-Za-z_]\w*)"
                      r"|\b([A-Z]\w*)\s+(?:class|struct|interface|trait|enum|type)\b")
Hits = dict[str, tuple[tuple[int, str], ...]]  # path -> (line number, line) definitions


def wanted(instruction: str) -> tuple[str, ...]:
    """The identifiers `instruction` writes as code (snake_case, camelCase, in backticks,
    called, after "function" or "class", a capitalised word before "class"), in order, at
    most MAX_WORDS. (A plain word before "function", which the ranking also weighs, is too
    often English: "every function".)"""
    said = {next(g for g in m.groups() if g) for m in _WRITTEN.finditer(instruction)}
    out = [w for w in words(instruction) if len(w) >= 3 and w.lower() not in STOPWORDS
           and (code_like(w) or w in said)]
    return tuple(out[:MAX_WORDS])


def _definition(word: str) -> re.Pattern[str]:
    w = re.escape(word)
    return re.compile(rf"\b{_KINDS}\b[^\n]{{0,40}}?\b{w}\b|^\s*(?:export\s+)?{w}\s*(?::?=|::)"
                      rf"|\b{w}\s*=\s*(?:function|async|\()")


def _shown(path: str) -> bool:
    return os.path.splitext(path)[1].lower() not in NOT_CODE and secret_name(path) is None


def definitions(rows: Sequence[tuple[str, int, str]], names: Sequence[str],
                hidden: Sequence[str] = ()) -> Hits:
    """The rows (path, line number, line) that look like a definition of one of `names`,
    at most PER_FILE per file and MAX_FILES files, files in the order of the names."""
    patterns = [(n, _definition(n)) for n in names]
    by_name: dict[str, dict[str, list[tuple[int, str]]]] = {n: {} for n in names}
    for path, n, line in rows:
        if not _shown(path) or any(h in line for h in hidden):
            continue
        for name, pat in patterns:
            if name in line and pat.search(line):
                text = line.strip().expandtabs(4)
                text = text if len(text) <= MAX_LINE else text[: MAX_LINE - 1] + "…"
                by_name[name].setdefault(path, []).append((n, text))
                break
    out: dict[str, list[tuple[int, str]]] = {}
    for name in names:  # the first name's files first, each file's lines in order
        for path in sorted(by_name[name], key=lambda p: (p.count("/"), p)):
            got = out.setdefault(path, [])
            got.extend(x for x in by_name[name][path] if x not in got)
    return {p: tuple(sorted(v)[:PER_FILE]) for p, v in list(out.items())[:MAX_FILES]}


def _scan(root: Path, files: Sequence[str], names: Sequence[str], deadline: float
          ) -> list[tuple[str, int, str]]:
    """Outside git: the listed code files read in Python, until the deadline."""
    finder = re.compile(r"\b(?:" + "|".join(map(re.escape, names)) + r")\b")
    rows = []
    for rel in files:
        if time.monotonic() > deadline:
            break
        if not _shown(rel):
            continue
        try:
            with open(root / rel, "rb") as f:
                data = f.read(MAX_PARSE_BYTES + 1)
        except OSError:
            continue
        if len(data) > MAX_PARSE_BYTES or b"\0" in data[:8192]:
            continue
        text = data.decode("utf-8", "replace")
        if not finder.search(text):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if finder.search(line):
                rows.append((rel, n, line))
    return rows


def search(root: Path, names: Sequence[str], files: Callable[[], Sequence[str]],
           time_limit: float = TIME_LIMIT, hidden: Sequence[str] = ()) -> Hits:
    """Where `names` are defined, by a word search of the tree at `root` (`files`: the
    listed files, for a tree outside git)."""
    if not names:
        return {}
    repo = GitRepo.open(root)
    if repo is None:
        rows = _scan(root, files(), names, time.monotonic() + time_limit)
    else:
        with repo:
            rows = repo.grep_words(names, time_limit)
    return definitions(rows, names, hidden)


class WordSearch:
    """The searches of one tree, kept by the names they looked for; one thread at a time
    (the newest words wait for the one running, older ones are dropped)."""

    def __init__(self, root: Path, files: Callable[[], Sequence[str]],
                 hidden: Sequence[str] = ()) -> None:
        self.root = root
        self.files = files
        self.hidden = tuple(hidden)
        self._done: dict[tuple[str, ...], Hits] = {}
        self._next: tuple[str, ...] | None = None
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None

    def found(self, instruction: str) -> Hits:
        """What a finished search found for `instruction`'s names ({} until then)."""
        names = wanted(instruction)
        with self._lock:
            return self._done.get(names, {}) if names else {}

    def look_ahead(self, instruction: str) -> None:
        """Start the search for `instruction`'s names (returns at once)."""
        names = wanted(instruction)
        with self._lock:
            if not names or names in self._done or names == self._next:
                return
            self._next = names
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="steer-word-search",
                                                daemon=True)
                self._thread.start()

    def wait(self, instruction: str, timeout: float) -> Hits:
        """`look_ahead`, then up to `timeout` seconds for its answer (a one-shot caller)."""
        self.look_ahead(instruction)
        names = wanted(instruction)
        with self._idle:
            self._idle.wait_for(lambda: not names or names in self._done, timeout)
            return self._done.get(names, {})

    def _work(self) -> None:
        while True:
            with self._lock:
                names, self._next = self._next, None
                if names is None:
                    self._thread = None
                    self._idle.notify_all()
                    return
            try:
                hits = search(self.root, names, self.files, hidden=self.hidden)
            except Exception:  # noqa: BLE001 - git missing or the tree gone: the map stays paths only
                hits = {}
            with self._lock:
                self._done[names] = hits
                self._idle.notify_all()
