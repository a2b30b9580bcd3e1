"""The rows a diff pane shows for one file: headers, context, removed and added lines, with old
and new line numbers, in a unified or a side-by-side arrangement.

Pure data, no Textual: the UI renders rows, tests check them. Rows of a hunk are cached and
only extended while it streams (a streaming hunk only grows), so laying out a file costs in
proportion to what changed since the last frame, not to the size of the diff.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from app.core.edits.file_diff import FileDiff
from app.core.edits.hunks import Hunk, HunkState
from app.core.text.plural import plural

CONTEXT = 3
TAB = 4  # tab stops every 4 columns, in every pane


@dataclass(slots=True, frozen=True)
class Row:
    kind: str  # file | note | gap | hunk | ctx | del | add | pair
    text: str = ""
    old_no: int | None = None
    new_no: int | None = None
    hunk: Hunk | None = None
    index: int = -1  # position in review.line_rows(hunk) for del/add rows (line mode)
    right: str | None = None  # side-by-side: the new side
    right_kind: str = ""  # side-by-side: add | ctx | "" (blank)


class _HunkCache:
    __slots__ = ("key", "rows", "n_new")

    def __init__(self) -> None:
        self.key: tuple | None = None
        self.rows: list[Row] = []
        self.n_new = 0


class FileLayout:
    """Keeps the rows of one file between frames and rebuilds only from the first hunk that
    changed: while the last hunk streams, a frame costs its new rows, not the whole file."""

    def __init__(self, fd: FileDiff) -> None:
        self.fd = fd
        self._cache: dict[tuple[int, bool], _HunkCache] = {}
        self._rows: list[Row] = []
        self._hunks: list[tuple[Hunk, int]] = []  # (hunk, rev) as last laid out
        # per hunk: (row index where its own rows end, base line after it, shift after it)
        self._marks: list[tuple[int, int, int]] = []
        self._head = 0  # rows before the first hunk's context (file header, notes)
        self._shape: tuple | None = None
        self.header_rows: dict[int, int] = {}  # hunk id -> index of its header row
        self.first_changed = 0  # where the last call's rows started to differ
        self.changed: list[tuple[int, int]] = []  # [start, end) runs of rows that differ

    def rows(self, side_by_side: bool = False, context: int = CONTEXT) -> list[Row]:
        fd = self.fd
        base = fd.base.lines
        hunks = fd.hunks
        shape = (side_by_side, context, len(fd.errors))
        k = 0
        if shape == self._shape:
            old = self._hunks
            while k < len(hunks) and k < len(old) and hunks[k] is old[k][0] and hunks[k].rev == old[k][1]:
                k += 1
            if k == len(hunks) == len(old):
                self.first_changed = len(self._rows)
                self.changed = []
                return self._rows
        else:
            self._shape = shape
        if k == 0:  # from the top
            out: list[Row] = [Row("file", fd.path)]
            out += [Row("note", line) for msg in fd.errors for line in msg.split("\n")]
            self._head = len(out)
            if not hunks:  # edits that leave no hunk propose what the file already holds
                out.append(Row("note", "already on disk: the file holds what the answer proposes"
                               if fd.edits else "no changes proposed for this file"))
            start, pos, shift = self._head, 0, 0
            marks: list[tuple[int, int, int]] = []
        else:  # keep everything up to the end of hunk k-1's own rows
            start, pos, shift = self._marks[k - 1]
            out = self._rows[:start]
            marks = self._marks[:k]
        self.first_changed = start
        first = max(0, k - 1)
        for i in range(first, len(hunks)):
            h = hunks[i]
            if i >= k or k == 0:  # hunk i's gap, context before and own rows
                lo = max(pos, h.base_start - context)
                if lo > pos:
                    out.append(Row("gap", plural(lo - pos, "unchanged line"), old_no=pos + 1,
                                   new_no=pos + 1 + shift))
                out += _context(base, lo, h.base_start, shift, side_by_side)
                self.header_rows[h.id] = len(out)
                out += self._hunk_rows(h, shift, side_by_side)
                shift += len(shown(h)) - (h.base_end - h.base_start)
                marks.append((len(out), h.base_end, shift))
            # context after hunk i, up to the next hunk (or the end of the file)
            nxt = hunks[i + 1].base_start if i + 1 < len(hunks) else len(base)
            hi = min(nxt if nxt - h.base_end <= 2 * context else h.base_end + context, len(base))
            out += _context(base, h.base_end, hi, shift, side_by_side)
            pos = max(hi, h.base_end)
        if hunks and pos < len(base):
            out.append(Row("gap", plural(len(base) - pos, "unchanged line"), old_no=pos + 1, new_no=pos + 1 + shift))
        # laid out from the top: the file's notes above the first hunk may have changed too
        self.changed = _runs(self._rows, out, 0 if k == 0 else start)
        self._rows, self._marks = out, marks
        self._hunks = [(h, h.rev) for h in hunks]
        live = {(h.id, side_by_side) for h in hunks}
        if len(self._cache) > len(live):
            for key in [key for key in self._cache if key not in live]:
                del self._cache[key]
                self.header_rows.pop(key[0], None)
        return out

    def _hunk_rows(self, h: Hunk, shift: int, side: bool) -> list[Row]:
        c = self._cache.setdefault((h.id, side), _HunkCache())
        streaming = h.state == HunkState.STREAMING
        key = (h.state, h.incomplete, h.base_start, h.base_end, len(h.old), h.note, shift,
               -1 if streaming else h.rev)
        if c.key == key and not side and streaming and len(h.new) >= c.n_new:
            # a streaming hunk only grows: add the rows of the new lines
            start = h.base_start + shift
            c.rows += [Row("add", t, None, start + j + 1, h, len(h.old) + j)
                       for j, t in enumerate(h.new[c.n_new :], c.n_new)]
            c.n_new = len(h.new)
            return c.rows
        if c.key == key and c.n_new == len(h.new):
            return c.rows
        c.key, c.n_new = key, len(h.new)
        c.rows = [Row("hunk", "", h.base_start + 1, h.base_start + 1 + shift, h)]
        if h.note:
            c.rows.append(Row("note", h.note, hunk=h))
        start = h.base_start
        if shown(h) is not h.new:  # accepted in part or edited: show what is on disk
            c.rows += _written_rows(h, start, shift)
            return c.rows
        if side:
            n = max(len(h.old), len(h.new))
            for j in range(n):
                left = h.old[j] if j < len(h.old) else None
                right = h.new[j] if j < len(h.new) else None
                c.rows.append(Row(
                    "pair", left or "", start + j + 1 if left is not None else None,
                    start + shift + j + 1 if right is not None else None, h,
                    j if left is not None else -1, right, "add" if right is not None else ""))
        else:
            c.rows += [Row("del", t, start + j + 1, None, h, j) for j, t in enumerate(h.old)]
            c.rows += [Row("add", t, None, start + shift + j + 1, h, len(h.old) + j)
                       for j, t in enumerate(h.new)]
        return c.rows


def _runs(old: list[Row], new: list[Row], start: int) -> list[tuple[int, int]]:
    """The rows of `new` from `start` on that differ from `old` (a hunk's header always does:
    it counts the lines of a streaming hunk), as [start, end) runs; a shorter `new` also
    clears the rows it no longer has. A growing hunk repaints its header and its new rows,
    not the rows it already had."""
    runs: list[tuple[int, int]] = []
    n = max(len(old), len(new))
    i = start
    while i < n:
        if i < len(old) and i < len(new) and old[i] == new[i] and new[i].kind != "hunk":
            i += 1
            continue
        j = i + 1
        while j < n and not (j < len(old) and j < len(new) and old[j] == new[j]
                             and new[j].kind != "hunk"):
            j += 1
        runs.append((i, j))
        i = j
    return runs


def shown(h: Hunk) -> list[str]:
    """The new side of a hunk as the pane shows it: for an accept that wrote something else
    than the proposal (picked lines, an edit), what was written."""
    if h.state == HunkState.ACCEPTED and h.applied is not None and h.applied != h.new:
        return h.applied
    return h.new


def _written_rows(h: Hunk, start: int, shift: int) -> list[Row]:
    """Rows of old -> written: kept lines as context, the rest removed or added."""
    rows: list[Row] = []
    written = h.applied or []
    for tag, a1, a2, b1, b2 in difflib.SequenceMatcher(None, h.old, written, autojunk=False).get_opcodes():
        if tag == "equal":
            rows += [Row("ctx", h.old[a1 + k], start + a1 + k + 1, start + shift + b1 + k + 1, h)
                     for k in range(a2 - a1)]
            continue
        rows += [Row("del", h.old[i], start + i + 1, None, h) for i in range(a1, a2)]
        rows += [Row("add", written[j], None, start + shift + j + 1, h) for j in range(b1, b2)]
    return rows


def _context(base: list[str], lo: int, hi: int, shift: int, side: bool) -> list[Row]:
    if side:
        return [Row("pair", base[i], i + 1, i + 1 + shift, right=base[i], right_kind="ctx")
                for i in range(lo, hi)]
    return [Row("ctx", base[i], i + 1, i + 1 + shift) for i in range(lo, hi)]
