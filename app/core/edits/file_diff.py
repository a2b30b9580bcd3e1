"""One file of the pending diff: its base, the edits located in it, and the hunks they make
(tentative while an edit streams, final once it completes)."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from app.core.disk.snapshot import Snapshot
from app.core.edits.formats import fragments
from app.core.edits.hunks import DECIDED, OPEN, Hunk, HunkState
from app.core.listeners import Listeners
from app.core.text import parses
from app.core.text.linediff import Change, apply_changes, line_diff
from app.core.text.locate import LADDER


class Owner(Protocol):
    """What a file's diff needs of the pending diff that holds it (app/core/edits/diff.py),
    also while a live rebase moves it onto the disk (app/core/edits/rebase.py)."""

    turn: int  # the answer streaming now
    removal_asked: bool  # the instruction asked to remove something
    bases: dict[str, Snapshot]  # each file's base (a rebase moves it)
    dropped: set[int]  # hunk ids that vanished
    listeners: Listeners[Any]  # told of each live rebase, before and after (changes.py)

    def next_id(self) -> int: ...
    def bump(self, path: str | None = None) -> int: ...
    def drop(self, h: Hunk) -> None: ...
    def live_edit(self, fd: FileDiff) -> Edit | None: ...
    def defer(self, path: str) -> None: ...


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
        self._positions = self._position_map() if aligned else {}  # ops mode never looks

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
            spots = self._positions.get(line)
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
    def __init__(self, owner: Owner, base: Snapshot):
        self.owner = owner
        self.path = base.path
        self.base = base
        self.edits: list[Edit] = []
        self.deleted = False  # the proposal deletes the file
        self.move_to: str | None = None
        self.errors: list[str] = []
        self.section_pos = 0  # apply_patch: where the next chunk of this section is sought
        self.reading: fragments.Reading | None = None  # how its last whole-file answer was read
        self.inferred = ""  # its last whole-file answer named no file (Hunk.inferred)

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


    def breaks(self, h: Hunk, lines: list[str]) -> str:
        """Why this file would no longer parse with `lines` written in place of hunk `h`
        (over what steer believes is on disk); "" when it would, or steer cannot tell."""
        before, shift = self.expected()
        start = h.base_start + shift(h.base_start)
        after = before[:start] + lines + before[start + h.base_end - h.base_start:]
        return parses.breaks(h.path, before, after)
    def check_syntax(self) -> None:
        """Flag the open hunks that, taken, leave the file unparsable (text/parses.py): none
        when the file with every open hunk taken parses (they may need each other), else
        each that breaks it alone, else (only together do they break it) all of them."""
        open_ = [h for h in self.hunks if h.state in OPEN]
        for h in self.hunks:
            h.syntax = ""
        if not open_ or not parses.can_parse(self.path) or self.deleted:
            return
        before, shift = self.expected()
        if parses.problem(self.path, before):
            return  # broken already: not the proposal's doing
        taken = sorted(open_, key=lambda h: h.base_start)
        whole = apply_changes(before, [Change(h.base_start + shift(h.base_start),
                                              h.base_end + shift(h.base_start), h.new)
                                       for h in taken])
        together = parses.problem(self.path, whole)
        if not together:
            return
        alone = {h.id: self.breaks(h, h.new) for h in taken}
        for h in taken:
            h.syntax = alone[h.id] if any(alone.values()) else together
            if h.syntax:
                self.touch(h)

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
            h.inferred = self.inferred
            h.deletion = fragments.warning(h.old, h.new, h.base_start - start, h.base_end - start,
                                           self.reading, self.owner.removal_asked)
