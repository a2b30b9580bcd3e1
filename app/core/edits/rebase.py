"""Live rebase: moving a file's pending diff onto what is on disk now.

When a file with pending hunks changes outside steer (an editor, a formatter, `git checkout`),
its hunks are rebased 3-way: the ancestor is what steer expects on disk (the base plus the
hunks already accepted), "mine" is the disk, "theirs" the proposal. Afterwards the file's
base *is* the disk (minus the accepted hunks, which stay as they are), so every hunk is
shown and accepted against the file as it is now:

- hunks far from the user's changes keep their ids and shift to their new line numbers;
- hunks the user's changes touch (adjacent counts, as in diff3 and git) become one
  `conflict` per cluster, holding both sides: `old` = the user's lines, `new` = the
  proposal for the same region, `ancestor` = what both started from;
- an accepted hunk whose lines the user then edited is now simply part of the user's file;
- when the user's lines already equal the proposal, there is nothing left to review there.

The edit still streaming moves too: if the user's change does not touch its block it just
shifts; if it does but the block is still found (exactly, once) it moves there; otherwise
the file's rebase waits until that edit ends (`PendingDiff.due`), then runs against the
disk as it is then, so the finished edit is rebased like every other hunk.

The expensive part (reading the file, diffing it against the expectation) runs in a thread
(`read_disk`); `apply` runs where the pending diff lives and is linear in the number of
hunks and user changes plus one pass over the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.core.disk.snapshot import Snapshot
from app.core.disk.workspace import Workspace
from app.core.edits.changes import RebaseDone, Rebasing
from app.core.edits.file_diff import Edit, FileDiff
from app.core.edits.hunks import OPEN, Hunk, HunkState, note_conflict
from app.core.text.linediff import Change, apply_changes, line_diff
from app.core.text.locate import find_in
from app.core.text.textfile import NotText


@dataclass
class Expectation:
    """What steer believes is on disk for one file, and what that belief was built from."""

    path: str
    lines: list[str]
    token: tuple
    base: Snapshot  # held so that the token's ids stay unique while it is alive


@dataclass
class DiskRead:
    """The thread-side half of a rebase: the disk, and how it differs from the expectation."""

    path: str
    snapshot: Snapshot | None  # None: the file is not there or cannot be read as text
    reason: str = ""  # why not
    user: list[tuple[int, int, int, int]] | None = None  # line_diff(expected, disk)
    token: tuple = ()


@dataclass
class Rebased:
    path: str
    changed: list[Hunk] = field(default_factory=list)  # moved or changed state
    conflicts: list[Hunk] = field(default_factory=list)  # became conflicts now
    dropped: list[int] = field(default_factory=list)  # ids gone (already on disk, or merged)
    deferred: bool = False  # an edit of this file is streaming: rebased when it ends
    stale: str = ""  # the file is gone: why

    @property
    def any(self) -> bool:
        return bool(self.changed or self.conflicts or self.dropped or self.stale)


def expectation(fd: FileDiff) -> Expectation:
    lines, _ = fd.expected()
    accepted = tuple((h.id, h.base_start, h.base_end, id(h.applied))
                     for h in fd.hunks if h.state == HunkState.ACCEPTED)
    return Expectation(fd.path, lines, (id(fd.base), accepted), fd.base)


def read_disk(ws: Workspace, expect: Expectation) -> DiskRead:
    """Read the file and diff it against `expect` (safe to run in a thread)."""
    path = expect.path
    try:
        ws.check_path(path)
        snap = ws.snapshot(path)
    except (NotText, ValueError, OSError) as exc:
        return DiskRead(path, None, f"{exc}", token=expect.token)
    if not snap.exists:
        if not expect.base.exists and not expect.lines:  # as it was at the request: absent
            return DiskRead(path, snap, user=[], token=expect.token)
        return DiskRead(path, None, f"{path} was deleted outside steer", token=expect.token)
    user = line_diff(expect.lines, snap.lines)
    if user:
        snap.prepare()  # the new base's line index, built here rather than on the event loop
    return DiskRead(path, snap, user=user, token=expect.token)


def apply(fd: FileDiff, read: DiskRead) -> Rebased:
    """Move `fd` onto the disk as `read` saw it. Where the pending diff lives (event loop)."""
    fd.owner.listeners.publish(Rebasing(fd.path, read.snapshot, read.reason))
    if read.snapshot is None:
        out = mark_gone(fd, read.reason)
    else:
        expect = expectation(fd)
        user = read.user
        if user is None or read.token != expect.token:  # an accept or rebase ran meanwhile
            user = line_diff(expect.lines, read.snapshot.lines)
        out = _Rebase(fd, read.snapshot, expect.lines, user).run()
    fd.owner.listeners.publish(RebaseDone(fd))
    return out


def rebase_file(fd: FileDiff, disk: Snapshot) -> Rebased:
    """Move the file's base to `disk` (the file as it is now), rebasing its hunks 3-way."""
    expect = expectation(fd)
    user = line_diff(expect.lines, disk.lines)
    return apply(fd, DiskRead(fd.path, disk, user=user, token=expect.token))


def mark_gone(fd: FileDiff, reason: str) -> Rebased:
    """The file was deleted, renamed or became unreadable outside steer: its open hunks go
    stale (an accept would have nothing to apply to); they come back if the file does."""
    out = Rebased(fd.path)
    if fd.owner.live_edit(fd) is not None:
        fd.owner.defer(fd.path)
        out.deferred = True
        return out
    out.stale = reason
    for h in fd.hunks:
        if h.state in OPEN and (h.state != HunkState.STALE or h.note != reason):
            h.state, h.note = HunkState.STALE, reason
            fd.touch(h)
            out.changed.append(h)
    return out


@dataclass(eq=False)
class _HunkItem:
    """A hunk in the file's story, at its range in the expected text (s, e)."""

    hunk: Hunk
    s: int
    e: int


class _Accepted(_HunkItem):
    """Written to disk: it stays applied, only a real overlap touches it."""


class _Rejected(_HunkItem):
    """Turned down: a user change over it drops it."""


class _Open(_HunkItem):
    """Still to decide (pending, stale, conflict): a user change over it makes a conflict."""


@dataclass(eq=False)
class _Live:
    """The edit still streaming into the file."""

    edit: Edit
    s: int
    e: int


_Item = _Accepted | _Rejected | _Open | _Live


@dataclass(eq=False)
class _Unit:
    """One stretch of the file after grouping: an untouched item, or a cluster of user
    changes with the items they touch."""

    s: int  # expected-text range
    e: int
    items: list[_Item]
    user: list[tuple[int, int, int, int]]
    d1: int = 0  # disk range
    d2: int = 0
    b1: int = 0  # new-base range
    b2: int = 0

    @property
    def rank(self) -> int:
        return 0 if self.user else 1  # at one position, a user insertion comes first


def _written(u: _Unit) -> Hunk | None:
    """The accepted hunk a unit untouched by the user is (it stays applied on disk), else None."""
    if u.user:
        return None
    it = u.items[0]
    return it.hunk if isinstance(it, _Accepted) else None


class _Rebase:
    def __init__(self, fd: FileDiff, disk: Snapshot, expected: list[str],
                 user: list[tuple[int, int, int, int]]) -> None:
        self.fd = fd
        self.disk = disk
        self.expected = expected
        self.user = user
        self.out = Rebased(fd.path)
        self.live = fd.owner.live_edit(fd)

    def run(self) -> Rebased:
        fd, out = self.fd, self.out
        if not self.user:
            self._refresh_states(fd.hunks)
            base = fd.base
            if self.disk.exists and (base.fmt, base.mode) != (self.disk.fmt, self.disk.mode):
                self._set_base(Snapshot(fd.path, base.exists, base.lines, self.disk.fmt,
                                        base.digest, self.disk.mode, _index=base._index))
            return out
        section = self._to_expected(fd.section_pos)
        items = self._items()
        units = self._group(items)
        # the edit still streaming, when a user change touches it: where its block is now
        moved: tuple[Edit, int] | None = None
        touched = next((it.edit for u in units if u.user
                        for it in u.items if isinstance(it, _Live)), None)
        if touched is not None:
            at = self._relocate(touched)
            if at is None:
                fd.owner.defer(fd.path)
                out.deferred = True
                return out
            moved = (touched, at)
            items = [it for it in items if not isinstance(it, _Live)]
            units = self._group(items)
        self._place(units)
        if moved is not None and not self._free(units, moved[1], len(moved[0].old)):
            fd.owner.defer(fd.path)
            out.deferred = True
            return out
        new_lines = apply_changes(self.disk.lines, [Change(u.d1, u.d2, tuple(h.old))
                                                    for u in units if (h := _written(u)) is not None])
        reborn = self._settle(units)
        if moved is not None:
            live, at = moved
            self._move_live(live, at - self._accepted_shift_before(units, at))
        self._rebuild_edits(reborn, new_lines)
        fd.section_pos = self._map(units, section)
        disk = self.disk
        self._set_base(disk if new_lines == disk.lines else
                       Snapshot(fd.path, True, new_lines, disk.fmt, None, disk.mode))
        return out

    # -- the items, in expected-text coordinates ------------------------------------------
    def _accepted(self) -> list[Hunk]:
        return [h for h in self.fd.hunks if h.state == HunkState.ACCEPTED]

    def _items(self) -> list[_Item]:
        live = self.live
        entries: list[tuple[int, int, int, _Item]] = []
        for h in self.fd.hunks:
            if live is not None and h in live.hunks:
                continue
            kind = (_Accepted if h.state == HunkState.ACCEPTED else
                    _Rejected if h.state == HunkState.REJECTED else _Open)
            entries.append((h.base_start, h.base_end, 0 if kind is _Accepted else 1,
                            kind(h, h.base_start, h.base_end)))
        if live is not None:
            entries.append((live.start, live.end, 1, _Live(live, live.start, live.end)))
        entries.sort(key=lambda t: t[:3])
        shift = 0
        items = []
        for _, _, _, it in entries:  # base -> expected coordinates: accepted hunks shift
            it.s += shift
            if isinstance(it, _Accepted):
                h = it.hunk
                n = len(h.applied or [])
                it.e = it.s + n
                shift += n - (h.base_end - h.base_start)
            else:
                it.e += shift
            items.append(it)
        return items

    @staticmethod
    def _touches(it: _Item, e1: int, e2: int) -> bool:
        if isinstance(it, _Accepted):  # only a real overlap: text next to it is no change of it
            return not (e2 <= it.s or e1 >= it.e)
        return e1 <= it.e and it.s <= e2  # adjacent counts, as in diff3

    def _group(self, items: list[_Item]) -> list[_Unit]:
        """Clusters of user changes and the items they touch; untouched items alone."""
        n = len(items)
        parent = list(range(n + len(self.user)))

        def find(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        j = 0
        for k, (e1, e2, _, _) in enumerate(self.user):
            while j < n and items[j].e < e1 - 1 and items[j].s < e1:
                j += 1
            for i in range(j, n):
                it = items[i]
                if it.s > e2:
                    break
                if self._touches(it, e1, e2):
                    parent[find(i)] = find(n + k)
        clusters: dict[int, _Unit] = {}
        units: list[_Unit] = []
        for k, u in enumerate(self.user):
            root = find(n + k)
            unit = clusters.get(root)
            if unit is None:
                unit = clusters[root] = _Unit(u[0], u[1], [], [])
                units.append(unit)
            unit.user.append(u)
            unit.s, unit.e = min(unit.s, u[0]), max(unit.e, u[1])
        for i, it in enumerate(items):
            unit = clusters.get(find(i))
            if unit is None:
                units.append(_Unit(it.s, it.e, [it], []))
            else:
                unit.items.append(it)
                unit.s, unit.e = min(unit.s, it.s), max(unit.e, it.e)
        units.sort(key=lambda u: (u.s, u.e, u.rank))
        return self._absorb(units)

    @staticmethod
    def _absorb(units: list[_Unit]) -> list[_Unit]:
        """A cluster replaces its whole span, from its first item or user change to its last.
        An item inside that span touching none of its user changes (an accepted deletion,
        zero lines wide, between a touched hunk and the user's change) lies in the region the
        cluster takes over all the same: it joins the cluster, so units never overlap."""
        out: list[_Unit] = []
        for u in units:  # sorted by start: an overlap is with the unit just before
            last = out[-1] if out else None
            if last is None or u.s >= last.e or not (last.user or u.user):
                out.append(u)
                continue
            last.items = sorted(last.items + u.items, key=lambda it: (it.s, it.e))
            last.user = sorted(last.user + u.user)
            last.e = max(last.e, u.e)
        return out

    def _place(self, units: list[_Unit]) -> None:
        """Disk and new-base ranges of every unit, walking the file once."""
        dd = 0  # disk minus expected, from user changes passed
        ad = 0  # disk minus new base, from accepted hunks passed (they stay applied on disk)
        for u in units:
            u.d1 = u.s + dd
            dd += sum((d2 - d1) - (e2 - e1) for e1, e2, d1, d2 in u.user)
            u.d2 = u.e + dd
            u.b1 = u.d1 - ad
            h = _written(u)
            if h is not None:
                u.b2 = u.b1 + len(h.old)
                ad += (u.d2 - u.d1) - len(h.old)
            else:
                u.b2 = u.d2 - ad

    def _to_expected(self, base_pos: int) -> int:
        return base_pos + sum(len(h.applied or []) - (h.base_end - h.base_start)
                              for h in self._accepted() if h.base_end <= base_pos)

    def _map(self, units: list[_Unit], e: int) -> int:
        """A position in the expected text -> the new base (inside a cluster: its end)."""
        off = 0
        for u in units:
            if u.e <= e:
                off = u.b2 - u.e
            elif u.s < e:
                return u.b2 if u.user else e + u.b1 - u.s
            else:
                break
        return max(0, min(e + off, len(self.disk.lines)))

    # -- the edit still streaming ------------------------------------------------------
    def _relocate(self, live: Edit) -> int | None:
        """The disk position of the live edit's block if it is still there, exactly, once."""
        block = live.old
        if not block:
            return None
        level, hits = find_in(self.disk.lines, block)
        if level != 0 or len(hits) != 1:
            return None
        return hits[0]

    @staticmethod
    def _free(units: list[_Unit], at: int, n: int) -> bool:
        """Whether disk lines [at, at+n) overlap no other item or user change."""
        return all(u.d2 <= at or at + n <= u.d1 for u in units)

    @staticmethod
    def _accepted_shift_before(units: list[_Unit], d: int) -> int:
        return sum((u.d2 - u.d1) - (u.b2 - u.b1) for u in units
                   if _written(u) is not None and u.d2 <= d)

    def _move_live(self, live: Edit, new_start: int) -> None:
        delta = new_start - live.start
        if delta:
            self._shift_edit(live, delta)

    def _shift_edit(self, edit: Edit, delta: int) -> None:
        edit.start += delta
        for h in edit.hunks:
            h.base_start += delta
            h.base_end += delta
            self.fd.touch(h)
            self.out.changed.append(h)

    # -- outcomes ------------------------------------------------------------------------
    def _settle(self, units: list[_Unit]) -> list[list[Hunk]]:
        """Untouched items move; each cluster with proposals becomes a conflict (or, when
        the user's lines equal the proposal or the ancestor, no conflict at all). Returns
        the hunks of each cluster, which form edits of their own."""
        fd, out = self.fd, self.out
        reborn: list[list[Hunk]] = []
        for u in units:
            if not u.user:
                it = u.items[0]
                if isinstance(it, _Live):
                    self._move_live(it.edit, u.b1)
                    continue
                h = it.hunk
                moved = (h.base_start, h.base_end) != (u.b1, u.b2)
                h.base_start, h.base_end = u.b1, u.b2
                refreshed = self._refresh_states([h])
                if moved or refreshed:
                    fd.touch(h)
                    if h not in out.changed:
                        out.changed.append(h)
                continue
            # a cluster holds hunks only: a live edit the user touched was moved out (run)
            held = [it for it in u.items if isinstance(it, _HunkItem)]
            local = [(it.s - u.s, it.e - u.s, it.hunk) for it in held if isinstance(it, _Open)]
            opened = [h for _, _, h in local]
            for it in held:
                if not isinstance(it, _Open) or it.hunk is not opened[0]:
                    fd.owner.drop(it.hunk)
                    out.dropped.append(it.hunk.id)
            if not opened:
                continue  # the user's own change (maybe over lines steer wrote): now the base
            mine = self.disk.lines[u.d1 : u.d2]
            region = self.expected[u.s : u.e]
            # the common ancestor: what the lines were before either side changed them (a
            # conflict found earlier remembers it)
            ancestor = apply_changes(region, [Change(a, b, tuple(h.ancestor))
                                              for a, b, h in local if h.ancestor is not None])
            theirs = apply_changes(region, [Change(a, b, tuple(h.new)) for a, b, h in local])
            first = opened[0]
            incomplete = any(h.incomplete for h in opened)
            if theirs == mine:  # the proposal is already there: nothing left to review
                fd.owner.drop(first)
                out.dropped.append(first.id)
                continue
            if mine == ancestor:  # the user is back where both started: no conflict after all
                hunks: list[Hunk] = []
                deletion = next((h.deletion for h in opened if h.deletion), "")
                for a1, a2, b1, b2 in line_diff(mine, theirs):
                    h = first if not hunks else fd.new_hunk(0, 0, [], [])
                    h.base_start, h.base_end = u.b1 + a1, u.b1 + a2
                    h.old, h.new, h.ancestor = mine[a1:a2], theirs[b1:b2], None
                    h.state, h.note, h.incomplete = HunkState.PENDING, "", incomplete
                    h.deletion = deletion  # a flagged deletion stays out of bulk accepts
                    h.check_hidden()
                    fd.touch(h)
                    hunks.append(h)
                    out.changed.append(h)
                reborn.append(hunks)
                continue
            first.base_start, first.base_end = u.b1, u.b2
            first.old, first.new, first.ancestor = list(mine), theirs, ancestor
            first.incomplete = incomplete
            first.check_hidden()
            first.state = HunkState.CONFLICT
            note_conflict(first, u.b1, u.b2)
            fd.touch(first)
            reborn.append([first])
            out.conflicts.append(first)
        return reborn

    def _refresh_states(self, hunks: list[Hunk]) -> bool:
        """Untouched hunks marked stale (file gone) or conflicting at an accept are fine
        against the disk now: pending again."""
        changed = False
        for h in hunks:
            if h.state == HunkState.STALE or (h.state == HunkState.CONFLICT and h.ancestor is None):
                h.state, h.note = HunkState.PENDING, ""
                self.fd.touch(h)
                if h not in self.out.changed:
                    self.out.changed.append(h)
                changed = True
        return changed

    def _rebuild_edits(self, reborn: list[list[Hunk]], new_lines: list[str]) -> None:
        """Each edit's block again covers its hunks in the new base; a cluster's hunks form
        an edit of their own (they no longer belong to one answer's block)."""
        fd = self.fd
        dropped = fd.owner.dropped
        moved = {h for hunks in reborn for h in hunks}
        turns: dict[int, int] = {}
        edits: list[Edit] = []
        for edit in fd.edits:
            if edit is self.live:
                edits.append(edit)
                continue
            for h in edit.hunks:
                if h in moved:
                    turns[h.id] = edit.turn
            hunks = [h for h in edit.hunks if h.id not in dropped and h not in moved]
            if not hunks:
                continue
            hunks.sort(key=lambda h: (h.base_start, h.base_end))
            start, end = hunks[0].base_start, hunks[-1].base_end
            edit.start, edit.old = start, new_lines[start:end]
            edit.new = apply_changes(edit.old, [Change(h.base_start - start, h.base_end - start,
                                                       tuple(h.new)) for h in hunks])
            edit.hunks = hunks
            edit.aligned = False
            edits.append(edit)
        for hunks in reborn:
            if not hunks:
                continue
            start, end = hunks[0].base_start, hunks[-1].base_end
            e = Edit(fd, start, new_lines[start:end], aligned=False)
            e.turn = turns.get(hunks[0].id, e.turn)
            e.new = apply_changes(e.old, [Change(h.base_start - start, h.base_end - start,
                                                 tuple(h.new)) for h in hunks])
            e.hunks, e.complete = hunks, True
            edits.append(e)
        edits.sort(key=lambda e: (e.start, e.end))
        fd.edits = edits

    def _set_base(self, snap: Snapshot) -> None:
        self.fd.base = snap
        self.fd.owner.bases[self.fd.path] = snap
        self.fd.owner.bump(self.fd.path)

