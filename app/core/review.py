"""Deciding on hunks: accept (whole, by file, everything, or chosen lines), reject, undo.

An accept is the only thing that writes to the working tree. It rebases the chosen hunks
onto what is on disk now (3-way, against what steer expects to be there: the base plus
hunks already accepted), so a change the user made meanwhile is never overwritten: a hunk
whose region was touched becomes `conflict` and is not written.

Between accepts, a live rebase (app/core/rebase.py, driven by app/core/sync.py) keeps the
hunks on top of the disk. A conflict it finds holds both sides and is resolved on purpose:
take mine (keep the disk), take theirs (write the proposal), or edit; a plain accept of a
conflict, and every bulk accept, leaves it alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from app.core import rebase as live
from app.core.diff import OPEN, FileDiff, Hunk, HunkState, PendingDiff
from app.core.journal import Journal, UndoRefused
from app.core.linediff import Change, rebase
from app.core.snapshot import Snapshot
from app.core.textfile import NotText, encode
from app.core.workspace import Workspace


@dataclass
class Outcome:
    accepted: list[int] = field(default_factory=list)
    rejected: list[int] = field(default_factory=list)
    conflicts: list[int] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.conflicts and not self.messages


@dataclass
class AcceptPlan:
    label: str
    writes: list[tuple[str, bytes | None, bytes | None, int | None]]  # path, before, after, mode
    decided: list[tuple[Hunk, list[str]]]  # hunk, the lines it will write
    outcome: Outcome
    entry_id: str | None = None  # set once journaled and written


@dataclass
class _Tx:
    entry_id: str
    hunks: list[tuple[Hunk, HunkState, list[str] | None, str]]  # hunk, state, applied, note


def line_rows(h: Hunk) -> list[tuple[str, str]]:
    """A hunk's lines in display order: removed lines, then added lines."""
    return [("-", t) for t in h.old] + [("+", t) for t in h.new]


def pick_lines(h: Hunk, rows: Iterable[int]) -> list[str]:
    """What a partial accept writes, as `git add -p` does: chosen '-' rows are removed, the
    others stay; chosen '+' rows are added, the others are not."""
    chosen = set(rows)
    n = len(h.old)
    kept = [t for i, t in enumerate(h.old) if i not in chosen]
    added = [t for j, t in enumerate(h.new) if n + j in chosen]
    return kept + added


class Review:
    def __init__(self, ws: Workspace, pending: PendingDiff, journal: Journal | None = None) -> None:
        self.ws = ws
        self.pending = pending
        self.journal = journal or Journal.for_workspace(ws)
        self._undo: list[_Tx] = []

    # -- choosing --------------------------------------------------------------------------
    # plan_* prepare an accept (see `plan`); accept_* also carry it out, in one go.
    def plan_hunks(self, ids: Iterable[int]) -> AcceptPlan:
        return self.plan({i: None for i in ids}, "")

    def plan_lines(self, hunk_id: int, rows: Iterable[int]) -> AcceptPlan:
        h = self.pending.hunk(hunk_id)
        return self.plan({hunk_id: pick_lines(h, rows)}, f"lines of hunk #{hunk_id}")

    def plan_edited(self, hunk_id: int, lines: list[str]) -> AcceptPlan:
        return self.plan({hunk_id: list(lines)}, f"edited hunk #{hunk_id}")

    def plan_file(self, path: str) -> AcceptPlan:
        fd = self.pending.files[path]
        return self.plan({h.id: None for h in self._bulk(fd)}, path, moving=fd)

    def plan_all(self) -> AcceptPlan:
        ids = {h.id: None for fd in self.pending.files.values() for h in self._bulk(fd)}
        movers = [fd for fd in self.pending.files.values() if fd.move_to]
        return self.plan(ids, "all", moving=movers[0] if len(movers) == 1 else None)

    def accept(self, ids: Iterable[int]) -> Outcome:
        return self._run(self.plan_hunks(ids))

    def accept_lines(self, hunk_id: int, rows: Iterable[int]) -> Outcome:
        return self._run(self.plan_lines(hunk_id, rows))

    def accept_edited(self, hunk_id: int, lines: list[str]) -> Outcome:
        return self._run(self.plan_edited(hunk_id, lines))

    def accept_file(self, path: str) -> Outcome:
        return self._run(self.plan_file(path))

    def accept_all(self) -> Outcome:
        return self._run(self.plan_all())

    def reject(self, ids: Iterable[int]) -> Outcome:
        out = Outcome()
        for i in ids:
            h = self.pending.hunk(i)
            if h.state in OPEN:
                h.state = HunkState.REJECTED
                h.note = ""
                self.pending.files[h.path].touch(h)
                out.rejected.append(i)
        return out

    def reject_file(self, path: str) -> Outcome:
        return self.reject(h.id for h in self.pending.files[path].hunks)

    def reject_all(self) -> Outcome:
        return self.reject(h.id for h in self.pending.hunks)

    # -- resolving a conflict --------------------------------------------------------------
    def take_mine(self, hunk_id: int) -> Outcome:
        """Keep what is on disk: the proposal for this region is dropped (rejected)."""
        out = self.reject([hunk_id])
        h = self.pending.hunk(hunk_id)
        if out.rejected and h.ancestor is not None:
            h.note = "kept your version"
        return out

    def plan_theirs(self, hunk_id: int) -> AcceptPlan:
        """Write the proposal over the user's lines in this region (a deliberate choice)."""
        h = self.pending.hunk(hunk_id)
        return self.plan({hunk_id: list(h.new)}, f"proposal for hunk #{hunk_id}")

    def take_theirs(self, hunk_id: int) -> Outcome:
        return self._run(self.plan_theirs(hunk_id))

    # editing a conflict is accept_edited / plan_edited with the lines the user settled on

    @staticmethod
    def _bulk(fd: FileDiff) -> list[Hunk]:
        # Bulk accepts skip hunks the answer stopped inside and conflicts: those need a
        # deliberate look; stale ones have no file to go to.
        return [h for h in fd.hunks if h.state == HunkState.PENDING and not h.incomplete]

    # -- writing ---------------------------------------------------------------------------
    # An accept runs in three steps so that the UI can keep its event loop free: `plan`
    # (reads and merges, marks conflicts) and `commit` (hunk states) run where the pending
    # diff lives; `execute` only touches the journal and the disk, and may run in a thread.
    def _run(self, plan: AcceptPlan) -> Outcome:
        return self.commit(self.execute(plan))

    def plan(self, chosen: dict[int, list[str] | None], label: str,
             moving: FileDiff | None = None) -> AcceptPlan:
        out = Outcome()
        by_file: dict[str, list[Hunk]] = {}
        for i in chosen:
            h = self.pending.hunk(i)
            if h.state not in OPEN:
                if h.state == HunkState.STREAMING:
                    out.messages.append(f"hunk #{i} is still streaming")
                continue
            if h.ancestor is not None and h.state == HunkState.CONFLICT and chosen[i] is None:
                out.messages.append(f"hunk #{i} conflicts with your change on disk: keep yours, "
                                    f"take the proposal, or edit it")
                continue
            by_file.setdefault(h.path, []).append(h)
        plan = AcceptPlan(label, [], [], out)
        for path, hunks in by_file.items():
            fd = self.pending.files[path]
            hunks.sort(key=lambda h: (h.base_start, h.base_end))
            try:
                disk = self.ws.snapshot(path, keep_raw=True)
            except NotText as exc:
                self._conflict(out, hunks, str(exc))
                continue
            result = self._merge(fd, hunks, chosen, disk, out)
            if result is None:
                continue
            merged, placed = result
            before = disk.raw
            fmt = disk.fmt if disk.exists else fd.base.fmt
            everything = all(h.state == HunkState.ACCEPTED or h in placed for h in fd.hunks)
            remove = fd.deleted and not merged and everything
            after = None if remove else encode(merged, fmt, disk.lines if disk.exists else None)
            target = path
            if moving is fd and fd.move_to and everything:
                plan.writes.append((fd.move_to, self.ws.read_bytes(fd.move_to), after, disk.mode))
                after, target = None, fd.move_to
            if after != before or target != path:
                plan.writes.append((path, before, after, disk.mode))
            plan.decided.extend((h, chosen[h.id] if chosen[h.id] is not None else h.new) for h in placed)
        return plan

    def execute(self, plan: AcceptPlan) -> AcceptPlan:
        """Journal, then write. Refuses (writing nothing) if a file changed since `plan`."""
        if not plan.decided:
            return plan
        for path, before, _after, _mode in plan.writes:
            if self.ws.read_bytes(path) != before:
                plan.outcome.messages.append(f"{path} changed on disk while accepting; nothing written")
                return plan
        entry = self.journal.record("accept", _label(plan.label, plan.decided), plan.writes)
        for path, _before, after, mode in plan.writes:
            if after is None:
                self.ws.delete(path)
            else:
                self.ws.write_atomic(path, after, mode)
            plan.outcome.written.append(path)
        plan.entry_id = entry.id
        return plan

    def commit(self, plan: AcceptPlan) -> Outcome:
        out = plan.outcome
        if plan.entry_id is None:
            if plan.decided:
                self._conflict(out, [h for h, _ in plan.decided], "the file changed while accepting")
            return out
        tx = _Tx(plan.entry_id, [])
        for h, applied in plan.decided:
            tx.hunks.append((h, h.state, h.applied, h.note))
            h.state, h.applied = HunkState.ACCEPTED, applied
            h.note = "" if applied == h.new else f"partly accepted ({len(applied)} lines written)"
            self.pending.files[h.path].touch(h)
            out.accepted.append(h.id)
        self._undo.append(tx)
        return out

    def _merge(self, fd: FileDiff, hunks: list[Hunk], chosen: dict[int, list[str] | None],
               disk: Snapshot, out: Outcome) -> tuple[list[str], list[Hunk]] | None:
        """3-way: apply `hunks` onto the disk, given what steer expects the disk to hold."""
        expected, shift = self.expected(fd)
        if fd.base.exists and not disk.exists:
            self._conflict(out, hunks, f"{fd.path} was deleted on disk since the request")
            return None
        edits = []
        for h in hunks:
            applied = chosen[h.id] if chosen[h.id] is not None else h.new
            d = shift(h.base_start)
            edits.append(Change(h.base_start + d, h.base_end + d, applied))
        on_disk = disk.lines if disk.exists else []
        if not fd.base.exists and disk.exists and expected != on_disk:
            self._conflict(out, hunks, f"{fd.path} was created on disk since the request")
            return None
        merged, bad = rebase(expected, on_disk, edits)
        if bad:
            self._conflict(out, [hunks[i] for i in bad], "the lines changed on disk since the request")
            if len(bad) == len(hunks):
                return None
            good = [h for i, h in enumerate(hunks) if i not in bad]
            return merged, good
        return merged, hunks

    def expected(self, fd: FileDiff):
        """What steer believes is on disk for `fd` (base + accepted hunks), and a function
        mapping a base line number to its shift in that text."""
        return fd.expected()

    def _conflict(self, out: Outcome, hunks: list[Hunk], why: str) -> None:
        for h in hunks:
            h.state, h.note = HunkState.CONFLICT, why
            self.pending.files[h.path].touch(h)
            out.conflicts.append(h.id)
        out.messages.append(f"{hunks[0].path}: {why}; {len(hunks)} hunk(s) not written")

    # -- keeping in step with the disk -----------------------------------------------------
    # A live rebase in two steps, like an accept: `touched` reads the disk and diffs it (in a
    # thread), `apply_recheck` moves the hunks (where the pending diff lives). app/core/sync.py
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

    # -- undo ------------------------------------------------------------------------------
    def undo(self) -> str:
        """Revert this review's last accept, through the journal. Returns what was done."""
        entry = self.undo_entry()
        self.journal.undo(self.ws, entry)
        return self.undo_commit()

    @property
    def can_undo(self) -> bool:
        return bool(self._undo)

    def undo_entry(self):
        """The journal entry of this review's last accept (the I/O part may run in a thread)."""
        if not self._undo:
            raise UndoRefused("nothing to undo in this session")
        entry = next((e for e in self.journal.entries() if e.id == self._undo[-1].entry_id), None)
        if entry is None:
            raise UndoRefused("the journal no longer holds the last accept")
        return entry

    def undo_commit(self) -> str:
        """After the journal reverted the files: the hunks are open again."""
        tx = self._undo.pop()
        for h, state, applied, note in tx.hunks:
            h.state, h.applied, h.note = state, applied, note
            self.pending.files[h.path].touch(h)
        return _label("", [(h, []) for h, *_ in tx.hunks])


def _label(what: str, decided: list[tuple[Hunk, list[str]]]) -> str:
    ids = ", ".join(f"#{h.id}" for h, _ in decided[:8])
    more = f" and {len(decided) - 8} more" if len(decided) > 8 else ""
    files = sorted({h.path for h, _ in decided})
    head = f"accept {what}: " if what else ""
    return f"{head}hunks {ids}{more} in {', '.join(files)}"
