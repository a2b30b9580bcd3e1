"""What steer knows of the repository at one moment: every listed file, the tags of those it
could read, who defines each name, how many files use it, and the files' global rank.

An `Index` is never changed once published: a reader (a request building its map, on any
thread) holds one and reads it without a lock, while the builder makes the next one.
`changed` makes that next one for a few files by copying the top-level tables (a C-speed copy:
a few milliseconds at 50,000 files) and replacing only the entries those files touch, so an
update after one save costs far less than the 50 ms it is allowed.

The global rank (PageRank over "file A uses a name file B defines") takes seconds in Python on
a large tree, so it is computed by the builder off the update path (`with_rank`); until then
a changed file keeps the rank it had, and a new one ranks last.
"""

from __future__ import annotations

import heapq
import math
import sys
from array import array
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from itertools import repeat

from app.core.knowledge.pagerank import pagerank_edges
from app.core.knowledge.tags import Tags

# (content key or None, (mtime_ns, size, inode), tags or None: listed by path only)
Entry = tuple[str | None, tuple[int, int, int], Tags | None]

# a file's out-edges: the files it uses, and their weights (summing to 1) packed as doubles
Row = tuple[tuple[str, ...], array]
EMPTY_ROW: Row = ((), array("d"))

MANY_DEFINERS = 5  # a name defined in more files than this says little about any of them
MAX_ROW = 48  # out-edges kept per file, the strongest
TOO_COMMON = 50  # a name defined in more files than this (__init__, run, get) links nothing


def folder(path: str) -> str:
    return path.rpartition("/")[0]


@dataclass(frozen=True)
class Index:
    files: Mapping[str, Entry] = field(default_factory=dict)
    definers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # name -> paths, sorted
    users: Mapping[str, int] = field(default_factory=dict)  # name -> files using it
    folders: Mapping[str, int] = field(default_factory=dict)  # folder ("" = top) -> files in it
    basenames: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # file name -> paths
    rank: Mapping[str, float] = field(default_factory=dict)  # global rank of tagged files
    order: tuple[str, ...] = ()  # tagged files by global rank, best first (may hold old paths)
    tagged: int = 0  # files with tags
    rows: Mapping[str, Row] = field(default_factory=dict)  # graph rows
    memo: dict[str, Row] = field(default_factory=dict, compare=False)
    rows_exact: bool = False  # `rows` were made from this very index (not carried over)

    @classmethod
    def build(cls, entries: Mapping[str, Entry]) -> Index:
        """An index of `entries` (no rank yet: see `with_rank`)."""
        definers: dict[str, list[str]] = {}
        users: dict[str, int] = {}
        folders: dict[str, int] = {}
        basenames: dict[str, list[str]] = {}
        intern = sys.intern
        tagged = 0
        for path in sorted(entries):
            d = folder(path)
            folders[d] = folders.get(d, 0) + 1
            basenames.setdefault(path.rpartition("/")[2], []).append(path)
            tags = entries[path][2]
            if tags is None:
                continue
            tagged += 1
            for name in {intern(df[0]) for df in tags[0]}:
                definers.setdefault(name, []).append(path)
            for name, _ in tags[1]:
                users[name] = users.get(name, 0) + 1
        return cls(files=dict(entries), definers={k: tuple(v) for k, v in definers.items()},
                   users=users, folders=folders, tagged=tagged,
                   basenames={k: tuple(v) for k, v in basenames.items()})

    def changed(self, updates: Mapping[str, Entry | None]) -> Index:
        """This index with `updates` applied (None: the file is gone)."""
        files = dict(self.files)
        definers = dict(self.definers)
        users = dict(self.users)
        folders = dict(self.folders)
        basenames = dict(self.basenames)
        tagged = self.tagged
        for path, entry in updates.items():
            old = files.get(path)
            old_tags = old[2] if old else None
            new_tags = entry[2] if entry else None
            name = path.rpartition("/")[2]
            if old is not None and entry is None:
                d = folder(path)
                folders[d] -= 1
                if not folders[d]:
                    del folders[d]
                left = tuple(p for p in basenames.get(name, ()) if p != path)
                if left:
                    basenames[name] = left
                else:
                    basenames.pop(name, None)
            elif old is None and entry is not None:
                d = folder(path)
                folders[d] = folders.get(d, 0) + 1
                basenames[name] = tuple(sorted((*basenames.get(name, ()), path)))
            tagged += (new_tags is not None) - (old_tags is not None)
            old_defs = {df[0] for df in old_tags[0]} if old_tags else set()
            new_defs = {df[0] for df in new_tags[0]} if new_tags else set()
            for name in old_defs - new_defs:
                left = tuple(p for p in definers.get(name, ()) if p != path)
                if left:
                    definers[name] = left
                else:
                    definers.pop(name, None)
            for name in new_defs - old_defs:
                definers[sys.intern(name)] = tuple(sorted((*definers.get(name, ()), path)))
            old_refs = {n for n, _ in old_tags[1]} if old_tags else set()
            new_refs = {n for n, _ in new_tags[1]} if new_tags else set()
            for name in old_refs - new_refs:
                users[name] -= 1
                if not users[name]:
                    del users[name]
            for name in new_refs - old_refs:
                users[name] = users.get(name, 0) + 1
            if entry is None:
                files.pop(path, None)
            else:
                files[path] = entry
        rows = dict(self.rows)
        for path in updates:
            rows.pop(path, None)
        return replace(self, files=files, definers=definers, users=users, folders=folders,
                       basenames=basenames, tagged=tagged, rows=rows, memo={}, rows_exact=False)

    def with_rank(self, rank: Mapping[str, float],
                  rows: Mapping[str, Row] | None = None, *,
                  exact: bool = False) -> Index:
        """This index ordered by `rank`; `rows`: the graph's rows (`exact`: made from this
        index's own tables)."""
        order = tuple(sorted(rank, key=lambda p: (-round(rank[p], 12), p)))
        if rows is None:
            return replace(self, rank=rank, order=order, memo={})
        return replace(self, rank=rank, order=order, rows=rows, memo={}, rows_exact=exact)

    # -- the graph ----------------------------------------------------------------------
    def weight(self, name: str, count: int = 1) -> float:
        """How much one file's use of `name` (`count` times) says about the files defining
        it: more for a long specific name (snake_case, camelCase) and for a rarely used one,
        less for a private name and for one defined all over."""
        return math.sqrt(count) * self._name_weight(name)

    def _name_weight(self, name: str) -> float:
        w = 1.0
        if len(name) >= 8 and ("_" in name.strip("_") or name != name.lower() != name.upper()):
            w *= 10.0
        if name.startswith("_"):
            w *= 0.1
        if len(self.definers.get(name, ())) > MANY_DEFINERS:
            w *= 0.1
        return w * math.log((self.tagged + 1) / (self.users.get(name, 0) + 1) + 1.0)

    def _row(self, path: str, weights: dict[str, float]) -> Row:
        entry = self.files.get(path)
        if entry is None or entry[2] is None:
            return EMPTY_ROW
        acc: dict[str, float] = {}
        definers = self.definers
        sqrt = math.sqrt
        for name, count in entry[2][1]:
            targets = definers.get(name)
            if not targets or len(targets) > TOO_COMMON:
                continue
            wn = weights.get(name)
            if wn is None:
                wn = weights[name] = self._name_weight(name)
            w = wn * sqrt(count)
            for t in targets:
                if t != path:
                    acc[t] = acc.get(t, 0.0) + w
        if len(acc) > MAX_ROW:  # the strongest links say it; the long tail only costs
            acc = dict(heapq.nsmallest(MAX_ROW, acc.items(), key=lambda kv: (-kv[1], kv[0])))
        total = sum(acc.values())
        if not total:
            return EMPTY_ROW
        ordered = sorted(acc)
        return tuple(ordered), array("d", (acc[t] / total for t in ordered))

    def out(self, path: str) -> list[tuple[str, float]]:
        """The files `path` uses (they define a name it uses), with weights summing to 1.
        Rows come from the last global rank where the file has not changed since."""
        row = self.rows.get(path)
        if row is None:
            row = self.memo.get(path)
            if row is None:
                row = self.memo[path] = self._row(path, {})
        return list(zip(row[0], row[1], strict=True))

    def provisional_rank(self) -> dict[str, float]:
        """Until PageRank is computed: each file by how much the rest of the tree uses the
        names it defines (a PageRank's first step from a uniform start, roughly). Fast: one
        pass over the definitions."""
        out: dict[str, float] = {}
        for path, entry in self.files.items():
            tags = entry[2]
            if tags is None:
                continue
            score = 0.0
            for name in {d[0] for d in tags[0]}:
                n = len(self.definers.get(name, ()))
                if 0 < n <= TOO_COMMON:
                    score += self._name_weight(name) * self.users.get(name, 0) / n
            out[path] = score
        total = sum(out.values()) or 1.0
        return {p: v / total for p, v in out.items()}

    def all_rows(self) -> dict[str, Row]:
        """Every tagged file's row, computed now (a request then finds them ready)."""
        weights: dict[str, float] = {}
        return {p: self._row(p, weights) for p in sorted(self.files) if self.files[p][2] is not None}

    def global_rank(self) -> tuple[dict[str, float], dict[str, Row]]:
        """PageRank over the tagged files, and every file's row (seconds on a large tree:
        the builder calls it off the request path)."""
        rows = dict(self.rows) if self.rows_exact else self.all_rows()
        paths = list(rows)
        ids = {p: i for i, p in enumerate(paths)}.__getitem__
        src: list[int] = []
        dst: list[int] = []
        weight: list[float] = []
        for i, p in enumerate(paths):
            targets, ws = rows[p]
            if targets:
                src.extend(repeat(i, len(targets)))
                dst.extend(map(ids, targets))
                weight.extend(ws)
        ranks = pagerank_edges(len(paths), src, dst, weight)
        return dict(zip(paths, ranks, strict=True)), rows

    def tags(self, path: str) -> Tags | None:
        entry = self.files.get(path)
        return entry[2] if entry else None

    def paths(self) -> Iterable[str]:
        return self.files.keys()
