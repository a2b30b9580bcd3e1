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

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from app.core.disk.snapshot import Snapshot
from app.core.edits.changes import Due
from app.core.edits.file_diff import Edit, FileDiff, _Relocate
from app.core.edits.formats import fragments
from app.core.edits.formats.events import (
    EditBegin,
    EditEnd,
    Line,
    Malformed,
    OldEnd,
    ParseEvent,
    Prose,
)
from app.core.edits.hunks import (
    OPEN,
    REDIRECTED,
    Card,
    EditError,
    Hunk,
    HunkState,
    Resolver,
    note_conflict,
)
from app.core.edits.placing import Placed, three_way
from app.core.listeners import Listeners
from app.core.text.linediff import Change, apply_changes
from app.core.text.locate import LocateError, find_in, locate
from app.core.text.textfile import NotText


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
    # the old lines are no longer in the file, but were at [a, e) of the request's snapshot:
    # placed 3-way from there when the edit ends (placing.py)
    origin_at: tuple[int, int] | None = None
    placed: list[Edit] = field(default_factory=list)  # the edits that placing made

    def live_ids(self) -> list[int] | None:
        """The hunks the edit under construction has now (None before it is located)."""
        if self.placed:
            return [h.id for e in self.placed for h in e.hunks]
        edit = self.edit if self.compose is None else self.compose[0]
        return None if edit is None else [h.id for h in edit.hunks]


class PendingDiff:
    def __init__(self, resolver: Resolver, snapshots: Iterable[Snapshot] = (),
                 listeners: Listeners[Any] | None = None):
        self.resolver = resolver
        # who is told of live rebases and of rebases put off (changes.py); a change set
        # passes the list its subscribers are on (app/core/review/change_set.py)
        self.listeners: Listeners[Any] = listeners if listeners is not None else Listeners()
        self.bases: dict[str, Snapshot] = {s.path: s for s in snapshots}
        # each file as the request saw it: what the model's edits were written against, kept
        # when a rebase moves the file's base onto the disk (app/core/edits/arrival.py)
        self.origins: dict[str, Snapshot] = dict(self.bases)
        self.arrived: set[str] = set()  # files an edit completed in, to check against the disk
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
        # the rest is kept (Session sets it per answer; app/core/edits/formats/fragments.py)
        self.removal_asked = False
        # files whose live rebase waits for the edit streaming into them to end (`Due` is
        # published when it has: app.core.git.sync.Sync runs it then)
        self.due: set[str] = set()

    def begin_turn(self, redirect: bool = False) -> None:
        """A new answer (redirect or follow-up) starts streaming into this diff. A redirect
        marks the open hunks of the answers before it: the user told the model to do
        something else, so a bulk accept leaves them (y still takes one), unless the new
        answer proposes the same region again (its edit then replaces theirs)."""
        if type(self._cur) is _Cursor:
            self._end(self._cur, EditEnd(False, "the answer stopped inside this edit"))
        self._cur = None
        self._close_card()
        if redirect:
            for h in self.hunks:
                if h.state in OPEN and not h.redirected:
                    h.redirected = REDIRECTED
                    h.rev = self.bump(h.path)
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
            self.listeners.publish(Due(cur.fd.path))

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
            self.origins.setdefault(rel, base)
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
                    self._card.follow(self._cur, self._cur.live_ids)
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
            card.close()

    def finish(self) -> None:
        """The answer is over: close what is open and reconcile every file with a full diff."""
        if type(self._cur) is _Cursor:
            self._end(self._cur, EditEnd(False, "the answer stopped inside this edit"))
        self._cur = None
        self._close_card()
        for fd in self.files.values():
            fd.reconcile()
            fd.check_syntax()  # once per answer: a parse per file, and per hunk when broken
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
                decided = any(x.decided for x in fd.overlapping(0, max(len(base.lines), 1)))
                self._fail(cur, f"{rel}: a whole-file edit overlaps changes you already decided"
                           if decided else f"{rel}: a whole-file block after other edits of this "
                           "file in the same answer; which one it means is ambiguous, refused")
                return
            fd.claim(0, max(len(base.lines), 1))
            fd.deleted = False
            fd.inferred = ev.inferred
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
            if host is not None:
                cur.compose = host
            elif not self._in_origin(cur, old):
                self._fail(cur, str(exc))
            return
        fd.claim(at, at + len(old))
        cur.edit = self._place(fd, at, base.lines[at : at + len(old)], aligned=True, level=level)

    def _compose_host(self, fd: FileDiff, old: list[str]) -> tuple[Edit, int, int] | None:
        """The old lines are not in the base: maybe they are in the file as the undecided
        edits make it (a model editing its own edit, or a fix whose context runs from its
        proposal into the lines around it). Found there once, the edits they touch become one
        edit over the base lines the match covers: (that edit, where in its new text the old
        lines are, how many). Only on a failed look-up: the file is walked once."""
        base = fd.base.lines
        free = [e for e in fd.edits if e.complete and e.hunks
                and all(h.state == HunkState.PENDING for h in e.hunks)]
        if not free:
            return None
        view: list[str] = []
        spans: list[tuple[int, int, Edit | None, int]] = []  # view [a, b), edit or None: base from
        pos = 0
        for e in free:  # fd.edits is in base order
            spans.append((len(view), len(view) + e.start - pos, None, pos))
            view.extend(base[pos : e.start])
            spans.append((len(view), len(view) + len(e.new), e, e.start))
            view.extend(e.new)
            pos = e.end
        spans.append((len(view), len(view) + len(base) - pos, None, pos))
        view.extend(base[pos:])
        _, hits = find_in(view, old)
        if len(hits) != 1:
            return None
        a, b = hits[0], hits[0] + len(old)
        touched = [(v, w, e) for v, w, e, _ in spans if e is not None
                   and (v < b and a < w or v == w and a < v < b)]
        if not touched:
            return None  # all of it is base text: not this route's to place

        def in_base(v: int, end: bool) -> int:  # the base line of view line v, in base text
            return next(at + v - s0 for s0, s1, e, at in spans
                        if e is None and (s0 < v <= s1 if end else s0 <= v < s1))

        (f0, _, host), (_, l1, last) = touched[0], touched[-1]
        v0, b0 = (a, in_base(a, False)) if a < f0 else (f0, host.start)
        v1, b1 = (b, in_base(b, True)) if b > l1 else (l1, last.end)
        if any(x.decided or x not in free for x in fd.overlapping(b0, b1)):
            return None
        for _, _, e in touched[1:]:
            fd.edits.remove(e)  # its hunks go to the host, which inherits their ids
            host.hunks.extend(e.hunks)
        host.start, host.old, host.new = b0, list(base[b0:b1]), view[v0:v1]
        return host, a - v0, len(old)

    def _compose(self, host: Edit, at: int, n: int, lines: list[str]) -> None:
        """`lines` in place of host.new[at:at+n]: the new answer rewrote that edit's text, and
        so proposes the edit again (a redirect's flag on it goes)."""
        host.new[at : at + n] = lines
        host.refine()
        for h in host.hunks:
            h.redirected = ""
        self.bump(host.fd.path)

    def _end(self, cur: _Cursor, ev: EditEnd) -> None:
        card = self._card
        self._end_edit(cur, ev)
        self.arrived.add(cur.fd.path)
        self._release(cur)
        if card is not None and card.follows(cur):
            ids = cur.live_ids()
            card.ids = ids if ids is not None and not card.error else []
            card.close()

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
        if cur.origin_at is not None:
            self._from_origin(cur, [t for op, t in cur.ops if op != "-"], ev.complete)
            self._cur = None
            return
        if cur.compose is not None:
            host, at, n = cur.compose
            self._compose(host, at, n, [t for op, t in cur.ops if op == "+"])
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
        origin = self.origins.get(fd.path)
        if origin is not None and origin.exists and origin.lines != edit.old:
            # written against the request's snapshot, which a rebase has moved on from
            reading = fragments.read_whole(origin.lines, edit.new, removal_asked=self.removal_asked)
            fd.reading = reading
            self._merged(fd, edit, three_way(origin.lines, edit.old, reading.lines))
            fd.flag([h for h in edit.hunks if h.ancestor is None], 0, len(origin.lines))
        else:
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
                host = self._compose_host(fd, old)
                if host is not None:  # context from the change set's own proposal
                    self._compose(*host, [t for op, t in ops if op != "-"])
                elif self._in_origin(cur, old):
                    self._from_origin(cur, [t for op, t in ops if op != "-"], True)
                else:
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

    # -- edits written against a file the user has changed since ------------------------
    def _in_origin(self, cur: _Cursor, old: list[str]) -> bool:
        """The old lines are not in the file's base: were they in the request's snapshot, which
        a rebase has moved the base on from? Then the edit is placed from there (`_from_origin`)."""
        origin = self.origins.get(cur.fd.path)
        if origin is None or origin.lines == cur.fd.base.lines:
            return False
        try:
            _, at = locate(origin.index, old, cur.fd.path)
        except LocateError:
            return False
        cur.origin_at = (at, at + len(old))
        return True

    def _from_origin(self, cur: _Cursor, new: list[str], complete: bool) -> None:
        fd = cur.fd
        origin = self.origins[fd.path].lines
        a, e = cur.origin_at or (0, 0)
        specs = three_way(origin, fd.base.lines, [*origin[:a], *new, *origin[e:]])
        if any(fd.blocked(p.start, p.end) for p in specs):
            self._fail(cur, f"{fd.path}: the edit overlaps changes you already decided")
            return
        for p in specs:
            fd.claim(p.start, p.end)
            edit = self._place(fd, p.start, list(p.old), aligned=False)
            self._merged(fd, edit, [p])
            edit.hunks[0].incomplete = not complete
            cur.placed.append(edit)

    def _merged(self, fd: FileDiff, edit: Edit, specs: list[Placed]) -> None:
        """`edit` (over its base block) becomes the 3-way placement `specs` (ids kept)."""
        start = edit.start
        edit.new = apply_changes(edit.old, [Change(p.start - start, p.end - start, p.new)
                                            for p in specs])
        edit.hunks = fd.inherit(edit.hunks, [(p.start, p.end, p.old, p.new) for p in specs])
        for h, p in zip(edit.hunks, specs, strict=True):
            if p.ancestor is not None:
                h.state, h.ancestor = HunkState.CONFLICT, list(p.ancestor)
                note_conflict(h, p.start, p.end)
        edit.open, edit.complete = None, True
        self.bump(fd.path)
