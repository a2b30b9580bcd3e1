"""The pending diff: the model's proposal for each file, as hunks that grow while it streams.

Parse events arrive line by line. Each edit is located in its file's base once (via the
base's line index), then its new lines are aligned against the old block as they come, so
the cost of a line does not depend on the length of the file. When an edit completes, its
block is diffed with the canonical `line_diff` and its tentative hunks become final ones;
when the answer ends, each file's hunks are reconciled with a fresh full diff of base vs
proposal. Hunk ids never change: a refined hunk inherits the id of the tentative hunk it
overlaps.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from app.core import invisible
from app.core.formats import fragments
from app.core.formats.events import (
    EditBegin,
    EditEnd,
    Line,
    Malformed,
    OldEnd,
    ParseEvent,
    Prose,
)
from app.core.linediff import Change, apply_changes, line_diff
from app.core.locate import LADDER, LocateError, find_in, locate
from app.core.snapshot import Snapshot
from app.core.textfile import NotText


class HunkState(StrEnum):
    STREAMING = "streaming"
    PENDING = "pending"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    CONFLICT = "conflict"  # the region changed on disk too: old is yours, new is the proposal
    STALE = "stale"  # the file was deleted or renamed outside steer (the note says which)


DECIDED = frozenset({HunkState.ACCEPTED, HunkState.REJECTED})
OPEN = frozenset({HunkState.PENDING, HunkState.CONFLICT, HunkState.STALE})


@dataclass(eq=False, slots=True)
class Hunk:
    id: int
    path: str
    base_start: int  # the base lines [base_start, base_end) are replaced by `new`
    base_end: int
    old: list[str]
    new: list[str]
    state: HunkState = HunkState.STREAMING
    incomplete: bool = False  # the answer stopped inside this hunk
    applied: list[str] | None = None  # what an accept wrote in place of `old` (line mode: a part)
    note: str = ""
    rev: int = 0  # PendingDiff.revision when last changed: the UI redraws only newer hunks
    # a conflict found by a live rebase: the lines both sides started from (`old` holds what
    # is on disk now, "mine"; `new` the proposal, "theirs"); None for other hunks
    ancestor: list[str] | None = None
    reason: str = ""  # why the user rejected it (one line, optional): the model is told
    # why a bulk accept must leave this hunk; a deliberate accept of the hunk still takes it:
    # a whole-file answer's large or unasked-for deletion (app/core/formats/fragments.py),
    # and invisible characters it adds, in any format (app/core/invisible.py)
    deletion: str = ""
    hidden: str = ""

    @property
    def warning(self) -> str:
        """Every flag of the hunk in one line ("" when a bulk accept may take it)."""
        if not self.hidden:
            return self.deletion
        return f"{self.deletion}; {self.hidden}" if self.deletion else self.hidden

    def check_hidden(self) -> None:
        """Flag the invisible characters the hunk adds (its lines are final, or cut short)."""
        self.hidden = invisible.added(self.old, self.new) or ""

    @property
    def change(self) -> Change:
        return Change(self.base_start, self.base_end, self.new)

    @property
    def added(self) -> int:
        return len(self.new)

    @property
    def removed(self) -> int:
        return len(self.old)


@dataclass(slots=True)
class EditError:
    path: str | None
    message: str
    turn: int = 0  # the answer it came from


@dataclass(eq=False)
class Card:
    """One edit block of an answer, in the order the answer wrote it: what the conversation
    view shows in place of the block's text (file, hunks, where they stand)."""

    turn: int
    path: str | None
    kind: str = "update"  # update | add | delete | whole
    ids: list[int] = field(default_factory=list)  # the hunks it produced (ids survive refining)
    error: str = ""  # why it could not be applied
    done: bool = False  # the block ended (complete or not)
    lines: int = 0  # lines of the block so far
    _cursor: _Cursor | None = field(default=None, repr=False)

    def hunk_ids(self) -> list[int]:
        """While it streams: the hunks its edit has now; then: the ones it produced."""
        cur = self._cursor
        if cur is not None and not self.done:
            edit = cur.edit if cur.compose is None else cur.compose[0]
            if edit is not None:
                return [h.id for h in edit.hunks]
        return self.ids


class Resolver(Protocol):
    def check_path(self, raw: str) -> str: ...
    def check_edit(self, raw: str, *, delete: bool = False) -> str: ...
    def snapshot(self, rel: str) -> Snapshot: ...


class _Relocate(Exception):
    """A context line contradicted where an apply_patch chunk was tentatively placed."""


class Edit:
    """One located replacement of base[start:start+len(old)] inside a FileDiff."""

    def __init__(self, fd: FileDiff, start: int, old: list[str], *, aligned: bool, level: int = 0):
        self.fd = fd
        self.turn = fd.owner.turn  # which answer placed it
        self.start = start
        self.old = old  # aligned: the complete old block; ops: grows with '-' and ' ' lines
        self.new: list[str] = []
        self.hunks: list[Hunk] = []
        self.aligned = aligned
        self.level = level  # locate ladder level: how whitespace-tolerant the match was
        self.complete = False
        self.i = 0  # aligned: old lines matched so far
        self.open: Hunk | None = None
        self._positions = self._position_map() if aligned else None

    @property
    def end(self) -> int:
        return self.start + len(self.old)

    @property
    def decided(self) -> bool:
        return any(h.state in DECIDED for h in self.hunks)

    def _position_map(self) -> dict[str, list[int]]:
        if self.start == 0 and self.old is self.fd.base.lines:
            return self.fd.base.index.positions_map()  # whole file: reuse the base's index
        table: dict[str, list[int]] = {}
        for i, line in enumerate(self.old):
            table.setdefault(line, []).append(i)
        return table

    # -- streaming -------------------------------------------------------------------------
    def add_new(self, line: str) -> None:
        """Aligned mode: the old block is known; place a new line against it greedily. The
        result is tentative, for display; `finish` replaces it with the canonical diff."""
        self.new.append(line)
        old, i, h = self.old, self.i, self.open
        if i < len(old) and old[i] == line:
            k = i
        elif len(line.strip()) > 2:  # resync only on lines distinctive enough to mean it
            k = None
            spots = self._positions.get(line)  # type: ignore[union-attr]
            if spots:
                j = bisect.bisect_left(spots, i)
                if j < len(spots):
                    k = spots[j]
        else:
            k = None
        if k is None:  # a new line: it goes into the open hunk
            if h is None:
                h = self.open = self.fd.new_hunk(self.start + i, self.start + i, [], [])
                self.hunks.append(h)
            h.new.append(line)
            self.fd.touch(h)
            return
        if k > i and h is None:  # old[i:k] was skipped: a deletion
            h = self.fd.new_hunk(self.start + i, self.start + i, [], [])
            self.hunks.append(h)
        if h is not None:  # back in step with the old block: the open hunk ends here
            h.base_end = self.start + k
            h.old = old[h.base_start - self.start : k]
            self.fd.touch(h)
            self.open = None
        self.i = k + 1

    def add_op(self, op: str, text: str) -> None:
        """Ops mode (apply_patch): the model spelled the diff out; verify old lines against
        the base as they come."""
        if op == "+":
            if self.open is None:
                self.open = self.fd.new_hunk(self.end, self.end, [], [])
                self.hunks.append(self.open)
            self.open.new.append(text)
            self.new.append(text)
            self.fd.touch(self.open)
            return
        base = self.fd.base.lines
        pos = self.end
        norm = LADDER[self.level]
        if pos >= len(base) or norm(base[pos]) != norm(text):
            raise _Relocate
        line = base[pos]  # keep the file's own whitespace for context and removed lines
        self.old.append(line)
        if op == " ":
            self.new.append(line)
            if self.open is not None:
                self.open = None
            return
        if self.open is None:
            self.open = self.fd.new_hunk(pos, pos, [], [])
            self.hunks.append(self.open)
        self.open.old.append(line)
        self.open.base_end = pos + 1
        self.fd.touch(self.open)

    # -- completion ------------------------------------------------------------------------
    def finish(self, complete: bool) -> None:
        if not complete:
            # Complete hunks stay reviewable; the one the answer stopped in is kept, marked.
            # Old lines not reached yet are left alone: a cut-short answer never deletes them.
            if self.aligned:
                self.old = self.old[: self.i]
            for h in self.hunks:
                h.state = HunkState.PENDING
                h.incomplete = h is self.open
                h.check_hidden()
                self.fd.touch(h)
            self.open = None
            self.complete = False
            return
        self.open = None
        self.complete = True
        self.refine()

    def refine(self) -> None:
        """Replace the hunks by the canonical diff of the block, keeping ids."""
        specs = [
            (self.start + a1, self.start + a2, self.old[a1:a2], self.new[b1:b2])
            for a1, a2, b1, b2 in line_diff(self.old, self.new)
        ]
        self.hunks = self.fd.inherit(self.hunks, specs)


class FileDiff:
    def __init__(self, owner: PendingDiff, base: Snapshot):
        self.owner = owner
        self.path = base.path
        self.base = base
        self.edits: list[Edit] = []
        self.deleted = False  # the proposal deletes the file
        self.move_to: str | None = None
        self.errors: list[str] = []
        self.section_pos = 0  # apply_patch: where the next chunk of this section is sought
        self.reading: fragments.Reading | None = None  # how its last whole-file answer was read

    @property
    def created(self) -> bool:
        return not self.base.exists

    @property
    def hunks(self) -> list[Hunk]:
        return [h for e in self.edits for h in e.hunks]

    def proposal(self) -> list[str]:
        return apply_changes(self.base.lines, [h.change for h in self.hunks])

    def expected(self) -> tuple[list[str], Callable[[int], int]]:
        """What steer believes is on disk (base + accepted hunks), and a function mapping a
        base line number to its shift in that text."""
        accepted = [h for h in self.hunks if h.state == HunkState.ACCEPTED]
        accepted.sort(key=lambda h: (h.base_start, h.base_end))
        expected = apply_changes(self.base.lines, [Change(h.base_start, h.base_end, h.applied or [])
                                                   for h in accepted])

        def shift(line: int) -> int:
            # hunks of one diff are separated by unchanged lines, so "ends at or before" is
            # the same as "comes before"
            return sum(len(h.applied or []) - (h.base_end - h.base_start)
                       for h in accepted if h.base_end <= line)

        return expected, shift

    def rebase(self, disk: Snapshot):
        """Move this file's base to `disk` (the file as it is now), rebasing the hunks 3-way;
        see app/core/rebase.py. Returns a `Rebased`."""
        from app.core import rebase

        expect = rebase.expectation(self)
        user = line_diff(expect.lines, disk.lines)
        return rebase.apply(self, rebase.DiskRead(self.path, disk, user=user, token=expect.token))

    def new_hunk(self, start: int, end: int, old: list[str], new: list[str]) -> Hunk:
        h = Hunk(self.owner.next_id(), self.path, start, end, old, new)
        self.touch(h)
        return h

    def touch(self, h: Hunk) -> None:
        h.rev = self.owner.bump(self.path)

    def inherit(self, olds: Sequence[Hunk], specs: Iterable[tuple[int, int, list[str], list[str]]],
                state: HunkState = HunkState.PENDING) -> list[Hunk]:
        """Hunks for `specs`, reusing an overlapping old hunk (and its id) where there is one."""
        pool = list(olds)
        out = []
        for b1, b2, old, new in specs:
            h = next((h for h in pool if h.base_start <= b2 and b1 <= h.base_end), None)
            if h is None:
                h = self.new_hunk(b1, b2, old, new)
            else:
                pool.remove(h)
                h.base_start, h.base_end, h.old, h.new = b1, b2, list(old), list(new)
            if h.state not in DECIDED:
                h.state = state
            h.incomplete = False
            h.check_hidden()
            self.touch(h)
            out.append(h)
        for h in pool:
            self.owner.drop(h)
        return out

    def add_edit(self, edit: Edit) -> None:
        keys = [e.start for e in self.edits]
        self.edits.insert(bisect.bisect_right(keys, edit.start), edit)

    def remove_edit(self, edit: Edit) -> None:
        self.edits.remove(edit)
        for h in edit.hunks:
            self.owner.drop(h)

    def overlapping(self, s: int, e: int) -> list[Edit]:
        return [x for x in self.edits if s < x.end and x.start < e]

    def blocked(self, s: int, e: int) -> bool:
        """A region is taken if it overlaps an edit the user has decided on, or another edit
        of the answer now streaming (its blocks do not overwrite each other)."""
        turn = self.owner.turn
        return any(x.decided or x.turn == turn for x in self.overlapping(s, e))

    def claim(self, s: int, e: int) -> None:
        """A new edit takes [s, e): undecided edits of earlier answers there are superseded
        (the model redoing a change after a redirect or follow-up)."""
        for x in self.overlapping(s, e):
            self.remove_edit(x)

    def reconcile(self) -> None:
        """Make the hunks equal a fresh full diff of base vs proposal (ids kept)."""
        hunks = self.hunks
        if any(h.state not in (HunkState.PENDING, HunkState.STREAMING) for h in hunks):
            # Decided hunks are on disk (or refused) as they are, and conflicts and stale
            # hunks say something a regrouping would erase: keep the incremental hunks.
            return
        full = line_diff(self.base.lines, self.proposal())
        if [(h.base_start, h.base_end) for h in hunks] == [(a1, a2) for a1, a2, _, _ in full]:
            return
        proposal = self.proposal()
        specs = [(a1, a2, self.base.lines[a1:a2], proposal[b1:b2]) for a1, a2, b1, b2 in full]
        incomplete = {h.id for h in hunks if h.incomplete}
        self.edits = []
        for h in self.inherit(hunks, specs):
            h.incomplete = h.id in incomplete
            edit = Edit(self, h.base_start, list(h.old), aligned=False)
            edit.new, edit.hunks, edit.complete = list(h.new), [h], True
            self.edits.append(edit)
        if self.reading is not None:  # regrouped: each hunk's warning is its own again
            self.flag(self.hunks, 0, len(self.base.lines))

    def flag(self, hunks: Iterable[Hunk], start: int, n: int) -> None:
        """Warn on the hunks of a whole-file answer (covering base[start:start+n]) that a
        bulk accept must leave: large or unasked-for deletions."""
        assert self.reading is not None
        for h in hunks:
            h.deletion = fragments.warning(h.old, h.new, h.base_start - start, h.base_end - start,
                                           self.reading, self.owner.removal_asked)


class _Ignore:
    """Swallows the lines of an edit that was refused or could not be placed."""


@dataclass(eq=False)
class _Cursor:
    """The edit under construction, between EditBegin and EditEnd."""

    fd: FileDiff
    begin: EditBegin
    base: Snapshot | None = None  # the file's base when the edit began (a live rebase moves it)
    edit: Edit | None = None
    ops: list[tuple[str, str]] = field(default_factory=list)  # buffered until located
    no_early: bool = False
    compose: tuple[Edit, int, int] | None = None  # (host edit, offset in its new, length)


class PendingDiff:
    def __init__(self, resolver: Resolver, snapshots: Iterable[Snapshot] = ()):
        self.resolver = resolver
        self.bases: dict[str, Snapshot] = {s.path: s for s in snapshots}
        self.files: dict[str, FileDiff] = {}
        self.prose: list[str] = []
        self.errors: list[EditError] = []
        # the answers in order: prose lines (turn, text) and edit cards, for the conversation
        self.transcript: list[tuple[int, str] | Card] = []
        self._card: Card | None = None  # the card of the block being parsed
        self.revision = 0
        self.dirty: set[str] = set()  # paths changed since `take_dirty`
        self.dropped: set[int] = set()  # hunk ids that vanished (refined away or superseded)
        self._ids = 0
        self._cur: _Cursor | _Ignore | None = None
        self.turn = 0  # the answer being streamed; its edits never supersede each other
        # the instruction of the answer now streaming may mean deleting code: a whole-file
        # answer that shows only part of a file may then delete the rest (flagged); otherwise
        # the rest is kept (Session sets it per answer; app/core/formats/fragments.py)
        self.removal_asked = False
        # files whose live rebase waits for the edit streaming into them to end, and who to
        # tell when it has (app.core.sync.Sync)
        self.due: set[str] = set()
        self.on_due: Callable[[str], None] | None = None
        # told of each live rebase (path, the disk snapshot or None when gone, why): the
        # session's log records it so that a resume replays it (app/core/sessions.py)
        self.on_rebase: Callable[[str, Snapshot | None, str], None] | None = None

    def begin_turn(self) -> None:
        """A new answer (redirect or follow-up) starts streaming into this diff."""
        if type(self._cur) is _Cursor:
            self._end(self._cur, EditEnd(False, "the answer stopped inside this edit"))
        self._cur = None
        self._close_card()
        self.turn += 1
        for fd in self.files.values():  # the files' notes are about the answer now showing
            if fd.errors:
                fd.errors.clear()
                self.bump(fd.path)

    # -- bookkeeping -----------------------------------------------------------------------
    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def bump(self, path: str | None = None) -> int:
        self.revision += 1
        if path is not None:
            self.dirty.add(path)
        return self.revision

    def drop(self, h: Hunk) -> None:
        self.dropped.add(h.id)
        self.bump(h.path)

    def live_edit(self, fd: FileDiff) -> Edit | None:
        """The edit the stream is writing into `fd` right now (or composing into), if any."""
        cur = self._cur
        if type(cur) is not _Cursor or cur.fd is not fd:
            return None
        if cur.compose is not None:
            return cur.compose[0]
        return cur.edit if cur.edit is not None and cur.edit in fd.edits else None

    def defer(self, path: str) -> None:
        """A live rebase of `path` must wait until the edit streaming into it ends."""
        self.due.add(path)
        self.bump(path)

    def _release(self, cur: _Cursor | _Ignore | None) -> None:
        if type(cur) is _Cursor and cur.fd.path in self.due:
            self.due.discard(cur.fd.path)
            if self.on_due is not None:
                self.on_due(cur.fd.path)

    def take_dirty(self) -> set[str]:
        dirty, self.dirty = self.dirty, set()
        return dirty

    @property
    def hunks(self) -> list[Hunk]:
        return [h for fd in self.files.values() for h in fd.hunks]

    @property
    def live_hunk(self) -> Hunk | None:
        """The hunk being written right now (the last of the edit under construction)."""
        cur = self._cur
        if type(cur) is _Cursor and cur.edit is not None and cur.edit.hunks:
            return cur.edit.hunks[-1]
        return None

    def hunk(self, hunk_id: int) -> Hunk:
        for h in self.hunks:
            if h.id == hunk_id:
                return h
        raise KeyError(f"no hunk #{hunk_id}")

    def error(self, path: str | None, message: str) -> None:
        self.errors.append(EditError(path, message, self.turn))
        card = self._card
        if card is None or card.done:  # an error outside any block still gets a card
            card = Card(self.turn, path, done=True)
            self.transcript.append(card)
        if not card.error:
            card.error = message
        if path in self.files:
            self.files[path].errors.append(message)
        self.bump(path)

    def file(self, rel: str) -> FileDiff:
        fd = self.files.get(rel)
        if fd is None:
            base = self.bases.get(rel)
            if base is None:
                base = self.bases[rel] = self.resolver.snapshot(rel)
            fd = self.files[rel] = FileDiff(self, base)
        return fd

    # -- events ----------------------------------------------------------------------------
    def feed(self, events: Iterable[ParseEvent]) -> None:
        for ev in events:
            cur = self._cur
            if type(ev) is Line:
                if self._card is not None:
                    self._card.lines += 1
                if type(cur) is _Cursor:
                    self._line(cur, ev.op, ev.text)
            elif type(ev) is Prose:
                self.prose.append(ev.text)
                self.transcript.append((self.turn, ev.text))
                self.bump()
            elif type(ev) is EditBegin:
                self._card = Card(self.turn, ev.path, ev.kind)
                self.transcript.append(self._card)
                self._begin(ev)
                if type(self._cur) is _Cursor:
                    self._card._cursor = self._cur
            elif type(ev) is OldEnd:
                if type(cur) is _Cursor:
                    self._old_end(cur)
            elif type(ev) is EditEnd:
                if type(cur) is _Cursor:
                    self._end(cur, ev)
                self._cur = None
                self._close_card()
            elif type(ev) is Malformed:
                self._card = None
                self.error(ev.path, ev.message)

    def _close_card(self) -> None:
        card, self._card = self._card, None
        if card is not None and not card.done:
            card.done, card._cursor = True, None

    def finish(self) -> None:
        """The answer is over: close what is open and reconcile every file with a full diff."""
        if type(self._cur) is _Cursor:
            self._end(self._cur, EditEnd(False, "the answer stopped inside this edit"))
        self._cur = None
        self._close_card()
        for fd in self.files.values():
            fd.reconcile()
        self.bump()

    def _begin(self, ev: EditBegin) -> None:
        if type(self._cur) is _Cursor:  # a format that never closed its previous edit
            self._end(self._cur, EditEnd(False, "the next edit began before this one ended"))
        self._cur = _Ignore()
        try:
            # files are known by their real path: two names for one file share its FileDiff;
            # deleting a symlink deletes the link itself
            rel = self.resolver.check_edit(ev.path, delete=ev.kind == "delete")
            if ev.move_to and self.resolver.check_edit(ev.path, delete=True) != rel:
                raise ValueError(f"cannot move {ev.path}: it is a symlink to {rel}")
            fd = self.file(rel)
            if ev.move_to:
                target = self.resolver.check_edit(ev.move_to)
                if target != rel and self.resolver.snapshot(target).exists:
                    raise ValueError(f"cannot move {rel} to {target}: {target} exists")
                fd.move_to = target if target != rel else None
        except (ValueError, NotText, OSError) as exc:
            self.error(ev.path, str(exc))
            return
        base = fd.base
        cur = _Cursor(fd, ev, base)
        self._cur = cur
        if ev.kind == "delete":
            if not base.exists:
                self._fail(cur, f"cannot delete {rel}: no such file")
                return
            fd.claim(0, len(base.lines))
            fd.deleted = True
            cur.edit = self._place(fd, 0, list(base.lines), aligned=True)
        elif ev.kind in ("whole", "add"):
            if fd.blocked(0, max(len(base.lines), 1)):
                self._fail(cur, f"{rel}: a whole-file edit overlaps changes you already decided")
                return
            fd.claim(0, max(len(base.lines), 1))
            fd.deleted = False
            cur.edit = self._place(fd, 0, base.lines, aligned=True)
        else:  # update: placed once its old lines are known
            if ev.first_in_section:
                fd.section_pos = 0
            if ev.anchor:
                _, hits = base.index.find([ev.anchor], fd.section_pos)
                if hits:
                    fd.section_pos = hits[0] + 1

    def _place(self, fd: FileDiff, start: int, old: list[str], *, aligned: bool, level: int = 0) -> Edit:
        edit = Edit(fd, start, old, aligned=aligned, level=level)
        fd.add_edit(edit)
        self.bump(fd.path)
        return edit

    def _fail(self, cur: _Cursor, message: str) -> None:
        if cur.edit is not None:
            cur.fd.remove_edit(cur.edit)
        if cur.base is not None and cur.fd.base is not cur.base:
            message += " (the file changed on disk while this edit streamed)"
        self.error(cur.fd.path, message)
        self._cur = _Ignore()
        self._release(cur)

    def _line(self, cur: _Cursor, op: str, text: str) -> None:
        edit = cur.edit
        if edit is not None:
            if edit.aligned:
                if op != "-":
                    edit.add_new(text)
                return
            try:
                edit.add_op(op, text)
            except _Relocate:
                # the chunk is not where its first lines suggested: place it at its end
                cur.fd.remove_edit(edit)
                cur.edit, cur.no_early = None, True
                cur.ops.append((op, text))
            return
        cur.ops.append((op, text))
        if cur.begin.kind == "update" and cur.begin.sequential and not cur.no_early and op != " ":
            self._try_early(cur)

    def _try_early(self, cur: _Cursor) -> None:
        """apply_patch: place a chunk as soon as its old lines so far occur exactly once, so
        its additions stream into the diff instead of waiting for the end of the chunk."""
        old = [t for op, t in cur.ops if op != "+"]
        if not old:
            return
        fd = cur.fd
        level, hits = fd.base.index.find(old, fd.section_pos, fd.blocked)
        if len(hits) != 1:
            return
        fd.claim(hits[0], hits[0] + len(old))
        edit = cur.edit = self._place(fd, hits[0], [], aligned=False, level=level)
        ops, cur.ops = cur.ops, []
        try:
            for op, text in ops:
                edit.add_op(op, text)
        except _Relocate:  # cannot happen with the lines just matched, but never trust it
            fd.remove_edit(edit)
            cur.edit, cur.ops, cur.no_early = None, ops, True

    def _old_end(self, cur: _Cursor) -> None:
        """search/replace: the SEARCH text is complete; find it and stream the REPLACE."""
        fd, base = cur.fd, cur.fd.base
        old = [t for op, t in cur.ops if op != "+"]
        cur.ops = []
        at = cur.begin.at
        if at is not None:  # placed where the edit says, if its old lines are there
            if base.lines[at : at + len(old)] != old:
                self._fail(cur, f"{fd.path}: the edit's old lines are not at line {at + 1}")
            elif fd.blocked(at, at + len(old)):
                self._fail(cur, f"{fd.path}: the edit overlaps changes you already decided")
            else:
                cur.edit = self._place(fd, at, base.lines[at : at + len(old)], aligned=True)
            return
        if not old:  # empty SEARCH: create the file, or append to it
            at = len(base.lines)
            if fd.blocked(at, at):
                self._fail(cur, f"{fd.path}: appending overlaps changes you already decided")
                return
            cur.edit = self._place(fd, at, [], aligned=True)
            return
        try:
            level, at = locate(base.index, old, fd.path, excluded=fd.blocked)
        except LocateError as exc:
            host = self._compose_host(fd, old)
            if host is None:
                self._fail(cur, str(exc))
            else:
                cur.compose = host
            return
        fd.claim(at, at + len(old))
        cur.edit = self._place(fd, at, base.lines[at : at + len(old)], aligned=True, level=level)

    def _compose_host(self, fd: FileDiff, old: list[str]) -> tuple[Edit, int, int] | None:
        """The SEARCH text is not in the base: maybe it is text an earlier, undecided edit of
        this answer proposed (a model editing its own edit)."""
        for e in fd.edits:
            if e.complete and all(h.state == HunkState.PENDING for h in e.hunks):
                _, hits = find_in(e.new, old)
                if len(hits) == 1:
                    return e, hits[0], len(old)
        return None

    def _end(self, cur: _Cursor, ev: EditEnd) -> None:
        card = self._card
        self._end_edit(cur, ev)
        self._release(cur)
        if card is not None and card._cursor is cur:
            edit = cur.edit if cur.compose is None else cur.compose[0]
            card.ids = [h.id for h in edit.hunks] if edit is not None and not card.error else []
            card.done, card._cursor = True, None

    def _end_edit(self, cur: _Cursor, ev: EditEnd) -> None:
        fd = cur.fd
        if ev.error:
            if ev.refused:  # the text was ambiguous: nothing of this edit is kept
                self._fail(cur, f"{fd.path}: {ev.error}")
            elif cur.edit is not None and cur.edit.hunks:
                self.error(fd.path, ev.error)  # keep what streamed, marked incomplete
                cur.edit.finish(False)
            else:
                self._fail(cur, f"{fd.path}: {ev.error}")
            self._cur = None
            return
        if cur.compose is not None:
            host, at, n = cur.compose
            host.new[at : at + n] = [t for op, t in cur.ops if op == "+"]
            host.refine()
            self.bump(fd.path)
            self._cur = None
            return
        edit = cur.edit
        if edit is None:
            if cur.begin.kind != "update":
                return
            edit = self._place_at_end(cur)
            if edit is None:
                return
        if not ev.complete:
            edit.finish(False)
        elif cur.begin.kind == "whole" and edit.aligned and edit.old:
            self._finish_whole(fd, edit)
        else:
            edit.finish(True)
            if cur.begin.sequential:
                fd.section_pos = edit.end
        self._cur = None

    def _finish_whole(self, fd: FileDiff, edit: Edit) -> None:
        """A whole-file block ended: read it as meant (a fragment replaces its region, lazy
        markers keep the lines they stand for), then flag deletions a bulk accept must leave."""
        reading = fragments.read_whole(edit.old, edit.new, removal_asked=self.removal_asked)
        edit.new = reading.lines
        fd.reading = reading
        edit.finish(True)
        fd.flag(edit.hunks, edit.start, len(edit.old))
        if reading.note and edit.hunks:
            edit.hunks[0].note = reading.note
        elif reading.note:
            self.error(fd.path, f"{fd.path}: the answer changed nothing ({reading.note})")

    def _place_at_end(self, cur: _Cursor) -> Edit | None:
        """apply_patch chunk not placed early: seek its whole old block from the section
        position, taking the first match as codex does."""
        fd, base = cur.fd, cur.fd.base
        ops = cur.ops
        old = [t for op, t in ops if op != "+"]
        if not old:  # pure addition with no context: append at the end of the file
            edit = self._place(fd, len(base.lines), [], aligned=False)
        else:
            try:
                level, at = locate(base.index, old, fd.path, start=fd.section_pos, first=True,
                                   excluded=fd.blocked)
            except LocateError as exc:
                self._fail(cur, str(exc))
                return None
            fd.claim(at, at + len(old))
            edit = self._place(fd, at, [], aligned=False, level=level)
        try:
            for op, text in ops:
                edit.add_op(op, text)
        except _Relocate:
            self._fail(cur, f"{fd.path}: a patch chunk does not match the file")
            return None
        return edit
