"""Deciding on hunks: accept (whole, by file, everything, or chosen lines), reject, undo.

An accept is the only thing that writes to the working tree. It rebases the chosen hunks
onto what is on disk now (3-way, against what steer expects to be there: the base plus
hunks already accepted), so a change the user made meanwhile is never overwritten: a hunk
whose region was touched becomes `conflict` and is not written. The writes themselves are
compare-and-swaps under the repository lock (Workspace.swap, Journal.perform): a save that
lands after the plan is seen at the swap, and the file is rebased again onto it (or its
hunks become conflicts), and the journal records the bytes actually replaced.

Between accepts, a live rebase (app/core/edits/rebase.py, driven by app/core/git/sync.py) keeps the
hunks on top of the disk. A conflict it finds holds both sides and is resolved on purpose:
take mine (keep the disk), take theirs (write the proposal), or edit; a plain accept of a
conflict, and every bulk accept, leaves it alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from app.core.disk.journal import Entry, Journal, StepFailed, UndoRefused, Write, reason
from app.core.disk.repo_lock import Busy
from app.core.disk.workspace import ABSENT, Content, PathRefused, Workspace
from app.core.edits import rebase as live
from app.core.edits.arrival import check_now
from app.core.edits.diff import PendingDiff
from app.core.edits.file_diff import FileDiff
from app.core.edits.hunks import OPEN, Hunk, HunkState, line_rows, pick_lines, written_note
from app.core.listeners import Listeners
from app.core.review.events import Decided, Settled
from app.core.review.merge import (
    AcceptPlan,
    FileMerge,
    Outcome,
    Tx,
    accept_label,
    grouped,
    out_reason,
)
from app.core.storage.records import Accept, Reject, Undo
from app.core.text.linediff import Change
from app.core.text.plural import plural

__all__ = ["AcceptPlan", "Outcome", "Review", "line_rows", "out_reason", "pick_lines",
           "written_note"]


class Review:
    def __init__(self, ws: Workspace, pending: PendingDiff, journal: Journal | None = None, *,
                 lock: asyncio.Lock | None = None, listeners: Listeners[Any] | None = None) -> None:
        self.ws = ws
        self.pending = pending
        self.journal = journal or Journal.for_workspace(ws)
        self._undo: list[Tx] = []
        # one accept or undo at a time; the session shares it with the live rebase (Sync), so
        # a rebase never sees steer's own write half recorded
        self._lock = lock or asyncio.Lock()
        # told of each decision as a record of the session's log (`Decided`), and after hunks
        # were decided, replayed ones too (`Settled`): app/core/review/events.py
        self.listeners: Listeners[Any] = listeners if listeners is not None else Listeners()

    # -- choosing --------------------------------------------------------------------------
    # plan_* prepare an accept (see `plan`); accept_* also carry it out, in one go.
    def plan_hunks(self, ids: Iterable[int]) -> AcceptPlan:
        return self.plan({i: None for i in ids}, "")

    def plan_lines(self, hunk_id: int, rows: Iterable[int]) -> AcceptPlan:
        """The rows picked (✓) of a hunk: nothing picked plans nothing (a line is written
        only when it is picked)."""
        h, rows = self.pending.hunk(hunk_id), set(rows)
        if not rows:
            return AcceptPlan(f"no line of hunk #{hunk_id}", [], [], Outcome())
        plan = self.plan({hunk_id: pick_lines(h, rows)}, f"lines of hunk #{hunk_id}")
        plan.how = "lines"
        return plan

    def plan_edited(self, hunk_id: int, lines: list[str]) -> AcceptPlan:
        plan = self.plan({hunk_id: list(lines)}, f"edited hunk #{hunk_id}")
        plan.how, plan.edited = "edited", (hunk_id, list(lines))
        if all(h.id != hunk_id for h, _ in plan.decided):
            self._keep_edit(plan)
        return plan

    def plan_file(self, path: str) -> AcceptPlan:
        fd = self.pending.files[path]
        return self.plan({h.id: None for h in self._bulk(fd)}, path, moving={path})

    def plan_all(self) -> AcceptPlan:
        ids = {h.id: None for fd in self.pending.files.values() for h in self._bulk(fd)}
        return self.plan(ids, "all", moving=set(self.pending.files))

    def accept(self, ids: Iterable[int]) -> Outcome:
        return self._run(lambda: self.plan_hunks(ids))

    def accept_lines(self, hunk_id: int, rows: Iterable[int]) -> Outcome:
        return self._run(lambda: self.plan_lines(hunk_id, rows))

    def accept_edited(self, hunk_id: int, lines: list[str]) -> Outcome:
        return self._run(lambda: self.plan_edited(hunk_id, lines))

    def accept_file(self, path: str) -> Outcome:
        return self._run(lambda: self.plan_file(path))

    def accept_all(self) -> Outcome:
        return self._run(self.plan_all)

    def reject(self, ids: Iterable[int], reason: str = "") -> Outcome:
        """Reject hunks; `reason` (one line, optional) tells the model why, in the next
        request and in later change sets (app/core/conversation/prompts.py)."""
        out = self._reject(ids, reason)
        self._record(Reject(ids=out.rejected, reason=out_reason(reason)) if out.rejected else None)
        return out

    def _reject(self, ids: Iterable[int], reason: str = "") -> Outcome:
        out = Outcome()
        why = out_reason(reason)
        for i in ids:
            h = self.pending.hunk(i)
            if h.state in OPEN:
                h.state = HunkState.REJECTED
                h.note = ""
                h.reason = why
                self.pending.files[h.path].touch(h)
                out.rejected.append(i)
        if out.rejected:
            self.listeners.publish(Settled())
        return out

    def mark(self, i: int) -> bool:
        """Mark an open hunk for the check (`!`), or unmark it: the check then runs on what
        was accepted plus the marked hunks. Whether it is marked now (False: not open)."""
        h = self.pending.hunk(i)
        h.marked = h.state in OPEN and not h.marked
        self.pending.files[h.path].touch(h)
        return h.marked

    def reject_file(self, path: str, reason: str = "") -> Outcome:
        return self.reject((h.id for h in self.pending.files[path].hunks), reason)

    def reject_all(self, reason: str = "") -> Outcome:
        return self.reject((h.id for h in self.pending.hunks), reason)

    # -- resolving a conflict --------------------------------------------------------------
    def take_mine(self, hunk_id: int) -> Outcome:
        """Keep what is on disk: the proposal for this region is dropped (rejected)."""
        out = self._reject([hunk_id])
        h = self.pending.hunk(hunk_id)
        if out.rejected and h.ancestor is not None:
            h.note = "kept your version"
        self._record(Reject(ids=out.rejected, mine=True) if out.rejected else None)
        return out

    def plan_theirs(self, hunk_id: int) -> AcceptPlan:
        """Write the proposal over the user's lines in this region (a deliberate choice)."""
        h = self.pending.hunk(hunk_id)
        return self.plan({hunk_id: list(h.new)}, f"proposal for hunk #{hunk_id}")

    def take_theirs(self, hunk_id: int) -> Outcome:  # (editing one: accept_edited)
        return self._run(lambda: self.plan_theirs(hunk_id))

    @staticmethod
    def _bulk(fd: FileDiff) -> list[Hunk]:
        # Bulk accepts skip hunks the answer stopped inside, conflicts and flagged deletions
        # (a whole-file answer dropping code it was not asked to): those need a deliberate
        # look; stale ones have no file to go to.
        return [h for h in fd.hunks
                if h.state == HunkState.PENDING and not h.incomplete and not h.warning]

    # -- writing ---------------------------------------------------------------------------
    # An accept runs in three steps so that the UI can keep its event loop free: `plan`
    # (reads and merges, marks conflicts) and `commit` (hunk states) run where the pending
    # diff lives; `execute` only touches the journal and the disk, and may run in a thread.
    # `apply_async` runs the three in that order; `steer run` plans under the lock as well.
    def _run(self, make: Callable[[], AcceptPlan]) -> Outcome:
        with self.ws.lock():
            return self.commit(self.execute(make()))

    async def apply_async(self, plan: AcceptPlan) -> Outcome:
        """Execute `plan` in a thread (one accept or undo of this review at a time, and the
        repository lock against other steer processes), then commit it on the loop."""
        async with self._lock:
            plan = await asyncio.to_thread(self.execute, plan)
            return self.commit(plan)

    def plan(self, chosen: Mapping[int, list[str] | None], label: str,
             moving: Iterable[str] = ()) -> AcceptPlan:
        """Merge the chosen hunks onto the disk as it is now, per file; `moving`: files whose
        move (apply_patch `Move to`) is carried out once all their hunks are accepted."""
        out = Outcome()
        by_file: dict[str, list[Hunk]] = {}
        before, now = self._settle(chosen)
        for i in chosen:
            if now.get(i) is None or (now[i] != before[i] and chosen[i] is not None):
                # gone, or not what the user chose its lines from: never written unseen
                out.messages.append(f"hunk #{i}: the file changed on disk just now; look again")
                continue
            h = self.pending.hunk(i)
            if h.state not in OPEN:
                if h.state == HunkState.STREAMING:
                    out.messages.append(f"hunk #{i} is still streaming")
                continue
            if h.ancestor is not None and h.state == HunkState.CONFLICT and chosen[i] is None:
                out.conflicts.append(i)
                out.messages.append(f"hunk #{i} conflicts with your change on disk: keep yours, "
                                    f"take the proposal, or edit it")
                continue
            by_file.setdefault(h.path, []).append(h)
        plan = AcceptPlan(label, [], [], out)
        for path, hunks in by_file.items():
            fd = self.pending.files[path]
            hunks.sort(key=lambda h: (h.base_start, h.base_end))
            m = self._merge_for(fd, hunks, chosen)
            try:
                found = self.ws.read(path)
            except PathRefused as exc:
                self._conflict(out, hunks, str(exc))
                continue
            if found.link is not None and fd.deleted and m.others_accepted:
                # deleting a symlink: the link itself goes, and undo brings the link back
                m.carrier = Write(path, found, ABSENT)
                plan.writes.append(m.carrier)
                plan.merges.append(m)
                continue
            after = m.onto(found)
            for why, group in grouped(m.drop_bad()):
                self._conflict(out, group, why)
            if after is None:
                continue
            plan.merges.append(m)
            if fd.move_to and path in moving and m.others_accepted:
                dest = self.ws.read(fd.move_to)
                if dest.exists:  # made while the answer streamed: never overwritten
                    plan.merges.remove(m)
                    self._conflict(out, [h for h, _ in m.hunks],
                                   f"{fd.move_to} was created on disk since the request; not moved")
                    continue
                m.carrier = Write(fd.move_to, ABSENT, after)
                plan.writes += [m.carrier, Write(path, found, ABSENT, requires=m.carrier)]
                continue
            m.carrier = Write(path, found, after, redo=self._redo(m))
            plan.writes.append(m.carrier)
        plan.label = accept_label(label, plan.decided)
        return plan

    def _settle(self, chosen: Mapping[int, list[str] | None]) -> tuple[dict, dict]:
        """A file the disk changed under (a save no watch event has reported yet) is rebased
        before an accept plans (arrival.check_now): a conflict has both sides, never a stale
        one. Returns the hunks' sides before and after, by id."""
        def sides() -> dict[int, tuple]:
            return {h.id: (h.old, h.new, h.base_start, h.state) for h in self.pending.hunks}
        before = sides()
        for path in {before_h.path for before_h in self.pending.hunks if before_h.id in chosen}:
            check_now(self.ws, self.pending.files[path])
        return before, sides()

    def _merge_for(self, fd: FileDiff, hunks: list[Hunk],
                   chosen: Mapping[int, list[str] | None]) -> FileMerge:
        expected, shift = fd.expected()
        pairs: list[tuple[Hunk, list[str]]] = []
        for h in hunks:
            written = chosen[h.id]
            pairs.append((h, h.new if written is None else written))
        edits = [Change(h.base_start + shift(h.base_start), h.base_end + shift(h.base_start), lines)
                 for h, lines in pairs]
        others = all(h.state == HunkState.ACCEPTED for h in fd.hunks if h not in hunks)
        return FileMerge(fd.path, fd.base.exists, fd.base.fmt, expected, pairs, edits, others,
                         fd.deleted)

    @staticmethod
    def _redo(m: FileMerge) -> Callable[[Content], Content | None]:
        """The writer found another save: merge the same hunks onto it instead."""
        def redo(found: Content) -> Content | None:
            after = m.onto(found)
            if after is None and m.carrier is not None:
                m.carrier.why = f"{m.path}: {next(iter(m.bad.values()))}; not written"
            return after
        return redo

    def execute(self, plan: AcceptPlan) -> AcceptPlan:
        """Journal and write, each file a compare-and-swap; runs in any thread. An interrupted
        accept or undo left by a crash is completed first."""
        if not plan.merges:
            return plan
        try:
            with self.ws.lock():
                plan.recovered = self.journal.recover(self.ws)
                plan.entry_id = self.journal.perform(self.ws, "accept", plan.label, plan.writes).id
        except StepFailed as exc:  # some files may be written: commit says which
            plan.entry_id = exc.entry.id
            plan.outcome.messages.append(str(exc))
        except (Busy, OSError) as exc:  # before anything was written
            plan.outcome.messages.append(f"nothing written: {reason(exc)}")
        return plan

    def commit(self, plan: AcceptPlan) -> Outcome:
        out = plan.outcome
        for e in plan.recovered:
            out.recovered.append(f"completed an interrupted {e.op} ({e.label})")
            out.recovered.extend(e.notes)
        if plan.entry_id is None:
            if plan.merges:
                self._conflict(out, [h for h, _ in plan.decided], "not written", quiet=True)
            self._record_accept(None, out)
            self._after_clash(plan, out)
            return out
        for w in plan.writes:
            if w.written and not w.before.same(w.after):
                out.written.append(w.path)
            elif not w.written:
                out.not_written.append(w.why or f"{w.path}: not written")
            if w.kept:
                out.messages.append(f"{w.path}: a save made while steer wrote it is kept as {w.kept}")
        tx = Tx(plan.entry_id, [])
        for m in plan.merges:
            late = dict(m.bad)  # hunks a re-plan at write time could not place
            for i, (h, applied) in enumerate(m.hunks):
                if i in late:
                    self._conflict(out, [h], late[i])
                elif m.carrier is None or not m.carrier.written:
                    why = m.carrier.why if m.carrier is not None else ""
                    self._conflict(out, [h], why or "not written", quiet=True)
                else:
                    tx.hunks.append((h, h.state, h.applied, h.note))
                    h.state, h.applied = HunkState.ACCEPTED, applied
                    h.note = "" if applied == h.new else written_note(h, applied, plan.how)
                    self.pending.files[h.path].touch(h)
                    out.accepted.append(h.id)
        if tx.hunks:
            self._undo.append(tx)
        self._record_accept(plan.entry_id, out)
        self._after_clash(plan, out)
        self.listeners.publish(Settled())
        return out

    def _after_clash(self, plan: AcceptPlan, out: Outcome) -> None:
        """A conflict found while writing (a save in the write window) is rebased onto the
        disk like any other, so it too shows both sides; a merge the user wrote stays."""
        by_id = {h.id: h for h in self.pending.hunks}
        for path in {h.path for i in out.conflicts if (h := by_id.get(i)) and h.ancestor is None}:
            check_now(self.ws, self.pending.files[path])
        self._keep_edit(plan)

    def _keep_edit(self, plan: AcceptPlan) -> None:
        """`e` then save, not written (the file changed meanwhile): the user's merge becomes
        the hunk's proposal, never thrown away."""
        if plan.edited is None or plan.edited[0] in plan.outcome.accepted:
            return
        h = next((h for h in self.pending.hunks if h.id == plan.edited[0]), None)
        if h is not None and h.state in OPEN and h.new != plan.edited[1]:
            h.new = list(plan.edited[1])
            h.note = (h.note + "; " if h.note else "") + "your edit is kept as the proposal"
            self.pending.files[h.path].touch(h)

    # -- the session's log (app/core/storage/log.py) ------------------------------------------
    def _record(self, rec: Accept | Reject | Undo | None) -> None:
        if rec is not None:
            self.listeners.publish(Decided(rec))

    def _record_accept(self, entry_id: str | None, out: Outcome) -> None:
        if not (out.accepted or out.conflicts):
            return
        by_id = {h.id: h for h in self.pending.hunks}
        done = [(i, list(by_id[i].applied or []), by_id[i].note) for i in out.accepted if i in by_id]
        clash = list({i: (i, by_id[i].note) for i in out.conflicts if i in by_id}.values())
        self._record(Accept(entry=entry_id, hunks=done, conflicts=clash))

    def replay(self, rec: Accept | Reject | Undo) -> None:
        """Apply a decision read back from the session's log, as it was made (no disk I/O:
        what the accept wrote is on disk or in the journal)."""
        by_id = {h.id: h for h in self.pending.hunks}
        if isinstance(rec, Reject):
            ids = [i for i in rec.ids if i in by_id]
            if rec.mine:
                for i in ids:
                    self.take_mine(i)
            else:
                self._reject(ids, rec.reason)
            return
        if isinstance(rec, Undo):
            if self._undo:
                self._reopen(None if rec.written is None else set(rec.written))
            return
        for i, note in rec.conflicts:
            h = by_id.get(i)
            if h is not None and h.state in OPEN:
                h.state, h.note = HunkState.CONFLICT, note
                self.pending.files[h.path].touch(h)
        tx = Tx(rec.entry or "", [])
        for i, applied, note in rec.hunks:
            h = by_id.get(i)
            if h is None or h.state not in OPEN:
                continue
            tx.hunks.append((h, h.state, h.applied, h.note))
            h.state, h.applied, h.note = HunkState.ACCEPTED, list(applied), note
            self.pending.files[h.path].touch(h)
        if tx.hunks and rec.entry:
            self._undo.append(tx)
        self.listeners.publish(Settled())

    def _conflict(self, out: Outcome, hunks: list[Hunk], why: str, quiet: bool = False) -> None:
        for h in hunks:
            h.state, h.note = HunkState.CONFLICT, why
            self.pending.files[h.path].touch(h)
            out.conflicts.append(h.id)
        if hunks and not quiet:
            out.messages.append(f"{hunks[0].path}: {why}; {plural(len(hunks), 'hunk')} not written")

    # -- keeping in step with the disk -----------------------------------------------------
    # A live rebase in two steps, like an accept: `touched` reads the disk and diffs it (in a
    # thread), `apply_recheck` moves the hunks (where the pending diff lives). app/core/git/sync.py
    # drives them from watch events; `recheck` is both at once. (`expected` and `_shift` are
    # the arguments app/ui passes today; they are not needed any more.)
    def recheck(self, path: str) -> list[Hunk]:
        """After the file changed on disk: rebase its hunks onto the disk (see rebase.py).
        Returns the hunks that moved, changed state or became conflicts."""
        fd = self.pending.files.get(path)
        if fd is None:
            return []
        return self.apply_recheck(fd, self.touched(self.ws, fd, None), None)

    @staticmethod
    def touched(ws: Workspace, fd: FileDiff, expected=None) -> live.DiskRead:
        """The disk as it is, diffed against what steer expects (safe in a thread)."""
        return live.read_disk(ws, live.expectation(fd))

    def apply_recheck(self, fd: FileDiff, read: live.DiskRead, _shift=None) -> list[Hunk]:
        done = live.apply(fd, read)
        return [*done.changed, *(h for h in done.conflicts if h not in done.changed)]

    async def recheck_async(self, paths: Iterable[str]) -> list[Hunk]:
        """`recheck` for files that changed on disk, reading them in a thread."""
        flipped: list[Hunk] = []
        for path in paths:
            fd = self.pending.files.get(path)
            if fd is not None:
                touched = await asyncio.to_thread(self.touched, self.ws, fd, None)
                flipped += self.apply_recheck(fd, touched, None)
        return flipped

    # -- undo ------------------------------------------------------------------------------
    def undo(self) -> str:
        """Revert this review's last accept, through the journal. Returns what was done."""
        entry = self.undo_entry()
        return self.undo_commit(self.journal.undo(self.ws, entry))

    async def undo_async(self) -> str:
        """This review's last accept, else the journal's last undoable accept (the same one
        `steer undo` would revert). The disk part runs in a thread, under the locks."""
        async with self._lock:
            if self._undo:
                entry = self.undo_entry()
                return self.undo_commit(await asyncio.to_thread(self.journal.undo, self.ws, entry))
            done = await asyncio.to_thread(self.journal.undo, self.ws)
            return done.label

    @property
    def can_undo(self) -> bool:
        return bool(self._undo)

    def undo_entry(self) -> Entry:
        """The journal entry of this review's last accept (the I/O part may run in a thread)."""
        if not self._undo:
            raise UndoRefused("nothing to undo in this session")
        entry = next((e for e in self.journal.entries() if e.id == self._undo[-1].entry_id), None)
        if entry is None:
            raise UndoRefused("the journal no longer holds the last accept")
        return entry

    def undo_commit(self, done: Entry | None = None) -> str:
        """After the journal reverted the files (`done`: the undo's entry), their hunks are
        open again. Hunks of a file the undo could not revert stay accepted."""
        written = None if done is None else list(done.written)
        label = self._reopen(None if written is None else set(written))
        self._record(Undo(written=written))
        return label

    def _reopen(self, reverted: set[str] | None) -> str:
        tx = self._undo[-1]
        back: list[tuple[Hunk, HunkState, list[str] | None, str]] = []
        kept: list[tuple[Hunk, HunkState, list[str] | None, str]] = []
        for item in tx.hunks:
            h = item[0]
            fd = self.pending.files.get(h.path)
            paths = {h.path, fd.move_to} if fd is not None and fd.move_to else {h.path}
            (back if reverted is None or paths & reverted else kept).append(item)
        for h, state, applied, note in back:
            h.state, h.applied, h.note = state, applied, note
            self.pending.files[h.path].touch(h)
        if kept:
            tx.hunks = kept
        else:
            self._undo.pop()
        return accept_label("", [(h, []) for h, *_ in back])


