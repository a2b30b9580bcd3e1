"""The accept journal: a write-ahead log of every change steer makes to the working tree.

Lives outside the tracked tree (the workspace's state dir: inside .git when there is one), so
undo never depends on git. Each accept or undo is one *step*, in two phases:

1. begin: the before and after contents of every file go to content-addressed blobs, a marker
   `open/<id>` is created, and a `begin` record is appended, all fsynced before any file is
   touched. A file whose write has to be re-planned (the user saved it meanwhile) gets an
   `amend` record, durably, before it is written.
2. commit: once every file is written or given up, a `commit` record lists the files that are
   on disk as recorded, and the marker goes.

A step with a marker and no commit was torn by a crash or a kill -9. `recover` (run under the
repository lock before any accept or undo, and when the app starts) completes it file by
file: a file still as it was before is written, one already written is kept, one the user
changed since is left alone; temp files the killed write left are removed, and a save that a
write had displaced is put back. Then it commits, so the journal never claims what is not on
disk and the next undo reverts exactly what the torn step wrote, never skipping it.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from app.core.disk.workspace import ABSENT, Changed, Content, PathRefused, Workspace
from app.core.faults import stop_point
from app.core.text.linediff import changes, rebase
from app.core.text.textfile import NotText, decode, digest, encode

MAX_TRIES = 5  # re-plans of one file whose owner keeps saving it while steer writes


class FileChange(BaseModel):
    path: str
    before: str | None  # blob digest of the bytes replaced; None: nothing (or a symlink)
    after: str | None  # None: the file was deleted (or is a symlink)
    mode: int | None = None  # the file's mode; what steer writes keeps it
    before_link: str | None = None  # the path was a symlink to this
    after_link: str | None = None
    written: bool = True  # on disk as recorded (from the step's commit record)


class Entry(BaseModel):
    op: Literal["accept", "undo"]
    id: str
    time: float
    label: str
    files: list[FileChange]
    target: str | None = None  # undo: the accept it reverted
    done: bool = True  # False: begun but never committed (torn by a crash)
    notes: list[str] = []  # what was not written, and why
    v: int = 1  # 1: an entry written before steps had two phases

    @property
    def written(self) -> list[str]:
        return [f.path for f in self.files if f.written]


class UndoRefused(RuntimeError):
    pass


class StepFailed(RuntimeError):
    """A step stopped after its begin record (the journal's disk failed, or a bug): the files
    it wrote are in its Writes; recovery completes it on the next write or undo."""

    def __init__(self, entry: Entry, cause: BaseException) -> None:
        self.entry = entry
        super().__init__(f"the {entry.op} stopped half-way ({cause}); the next steer write or "
                         "undo completes it")


@dataclass(eq=False)
class Write:
    """One file's change in a step. `redo` re-plans it when the file turned out to hold
    something else: the new content to write over `found`, or None to leave it (with `why`)."""

    path: str
    before: Content
    after: Content
    redo: Callable[[Content], Content | None] | None = None
    requires: Write | None = None  # written only if this one was (a move's deletion)
    written: bool = False
    why: str = ""
    kept: str | None = None  # a save that raced the write, kept beside the file (its path)


class Journal:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.blobs = directory / "blobs"
        self.file = directory / "journal.jsonl"
        self.open = directory / "open"

    @classmethod
    def for_workspace(cls, ws: Workspace) -> Journal:
        return cls(ws.state_dir() / "journal")

    # -- storage ---------------------------------------------------------------------------
    def _stage_blobs(self, datas: list[bytes]) -> list[tuple[Path, Path]]:
        """Write the blobs not stored yet to temp files: (temp, final path) each, for
        `_put_many` or `begin` to sync and rename into place."""
        self.blobs.mkdir(parents=True, exist_ok=True)
        staged = []
        for key, raw in {digest(d): d for d in datas}.items():
            path = self.blobs / key
            if path.exists():
                continue
            tmp = path.with_name(f"{key}.{os.getpid()}.{uuid.uuid4().hex[:6]}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(raw)
            staged.append((tmp, path))
        return staged

    def _put_many(self, datas: list[bytes]) -> None:
        """Store blobs durably: write them all, fsync them together, rename them into place,
        fsync the folder once."""
        staged = self._stage_blobs(datas)
        sync_all([tmp for tmp, _ in staged])
        for tmp, path in staged:
            os.replace(tmp, path)
        if staged:
            fsync_dir(self.blobs)

    def blob(self, key: str) -> bytes:
        return (self.blobs / key).read_bytes()

    def content(self, fc: FileChange, side: Literal["before", "after"]) -> Content:
        key, link = (fc.before, fc.before_link) if side == "before" else (fc.after, fc.after_link)
        if link is not None:
            return Content(link=link)
        if key is None:
            return ABSENT
        return Content(data=self.blob(key), mode=fc.mode)

    def _change(self, path: str, before: Content, after: Content) -> FileChange:
        for c in (before, after):
            if c.special is not None:
                raise ValueError(f"{path}: steer never records {c.special}")
        return FileChange(path=path, before=None if before.data is None else digest(before.data),
                          after=None if after.data is None else digest(after.data),
                          mode=before.mode if before.mode is not None else after.mode,
                          before_link=before.link, after_link=after.link, written=False)

    def _append(self, record: dict) -> None:
        for path in self._write_record(record):
            fsync_path(path)

    def _write_record(self, record: dict) -> list[Path]:
        """Append `record` (written, not synced): what has to be fsynced for it to last."""
        self.dir.mkdir(parents=True, exist_ok=True)
        new = not self.file.exists()
        line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        with open(self.file, "a+b") as fh:
            if fh.seek(0, os.SEEK_END) and (fh.seek(-1, os.SEEK_END), fh.read(1))[1] != b"\n":
                line = b"\n" + line  # a line torn by a crash must not swallow this record
            fh.write(line)
        return [self.file, self.dir] if new else [self.file]

    # -- the two phases of a step ----------------------------------------------------------
    def begin(self, op: Literal["accept", "undo"], label: str,
              files: list[tuple[str, Content, Content]], target: str | None = None) -> Entry:
        """Record the intent durably: blobs, the open marker, then the begin record."""
        entry = Entry(op=op, id=uuid.uuid4().hex[:12], time=time.time(), label=label,
                      target=target, done=False, v=2,
                      files=[self._change(p, b, a) for p, b, a in files])
        # Everything below is durable before any file is touched, as before; the fsyncs run
        # side by side, in two rounds, instead of one after another (each costs a journal
        # commit of the filesystem, 2-6 ms here; together they share one): the blobs' data
        # and the marker's folder, then the blobs' names and the record. A crash between the
        # rounds can leave a begin record whose blobs are not there: recovery then writes
        # nothing for it (no file was touched) and says so, as for any file it cannot read.
        staged = self._stage_blobs([d for _, b, a in files for d in (b.data, a.data) if d is not None])
        self.open.mkdir(parents=True, exist_ok=True)
        with open(self.open / entry.id, "w"):
            pass
        sync_all([tmp for tmp, _ in staged] + [self.open])
        for tmp, path in staged:
            os.replace(tmp, path)
        record = self._write_record({"rec": "begin", **entry.model_dump(exclude={"done", "notes"})})
        sync_all(([self.blobs] if staged else []) + record)
        stop_point(f"{op}:begun")
        return entry

    def amend(self, entry: Entry, path: str, before: Content, after: Content) -> None:
        """A file of an open step is re-planned: record its new before/after before writing."""
        fc = self._change(path, before, after)
        self._put_many([d for d in (before.data, after.data) if d is not None])
        self._append({"rec": "amend", "id": entry.id, "file": fc.model_dump()})
        entry.files = [fc if f.path == path else f for f in entry.files]

    def commit(self, entry: Entry, written: list[str], notes: list[str]) -> None:
        self._append({"rec": "commit", "id": entry.id, "written": written, "notes": notes})
        for f in entry.files:
            f.written = f.path in written
        entry.done, entry.notes = True, notes
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.open / entry.id)

    def perform(self, ws: Workspace, op: Literal["accept", "undo"], label: str,
                writes: list[Write], target: str | None = None) -> Entry:
        """One step: journal the intent, compare-and-swap each file, commit what was written.
        The caller holds `ws.lock()` (taken here too; it is re-entrant)."""
        with ws.lock():
            entry = self.begin(op, label, [(w.path, w.before, w.after) for w in writes], target)
            try:
                for w in writes:
                    if w.requires is not None and not w.requires.written:
                        w.why = f"{w.path}: not done because {w.requires.path} was not written"
                        continue
                    stop_point(f"{op}:before:{w.path}")
                    self._write(ws, entry, w)
                    stop_point(f"{op}:after:{w.path}")
                self.commit(entry, [w.path for w in writes if w.written],
                            [w.why for w in writes if not w.written and w.why]
                            + [f"{w.path}: a save made during the write is kept as {w.kept}"
                               for w in writes if w.kept])
            except Exception as exc:  # whatever stopped the step: the next write completes it
                raise StepFailed(entry, exc) from exc
            return entry

    def _write(self, ws: Workspace, entry: Entry, w: Write) -> None:
        for _ in range(MAX_TRIES):
            if w.before.same(w.after):
                w.written = True
                return
            try:
                ws.swap(w.path, w.before, w.after, tag=entry.id)
                w.written = True
                return
            except Changed as ch:
                w.kept = ch.rescued or w.kept
                after = w.redo(ch.found) if w.redo is not None and ch.found.special is None else None
                if after is None:
                    w.why = w.why or f"{w.path} changed on disk while steer was writing it; not written"
                    return
                w.before, w.after = ch.found, after
                self.amend(entry, w.path, w.before, w.after)
            except (PathRefused, OSError) as exc:
                w.why = f"{w.path}: not written: {reason(exc)}"
                return
        w.why = f"{w.path} kept changing on disk while steer tried to write it; not written"

    # -- reading the log -------------------------------------------------------------------
    def entries(self) -> list[Entry]:
        """The steps, in order, with amendments and commits folded in."""
        try:
            text = self.file.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):  # none yet, or none can be (a file
            return []  # in the state dir's path: no write was ever journaled there)
        steps: dict[str, Entry] = {}
        for line in text.splitlines():
            try:
                rec = json.loads(line)
                kind = rec.pop("rec", None)
                if kind is None:  # a one-phase entry from before steps were two-phase
                    e = Entry.model_validate(rec)
                    steps[e.id] = e
                elif kind == "begin":
                    e = Entry.model_validate({**rec, "done": False})
                    for f in e.files:
                        f.written = False
                    steps[e.id] = e
                elif kind == "amend" and rec["id"] in steps:
                    fc = FileChange.model_validate(rec["file"])
                    e = steps[rec["id"]]
                    e.files = [fc if f.path == fc.path else f for f in e.files]
                elif kind == "commit" and rec["id"] in steps:
                    e = steps[rec["id"]]
                    for f in e.files:
                        f.written = f.path in rec["written"]
                    e.done, e.notes = True, rec.get("notes", [])
            except (ValueError, KeyError, TypeError):  # a line torn by a crash mid-append
                continue
        return list(steps.values())

    @staticmethod
    def remaining(entry: Entry, entries: list[Entry]) -> list[FileChange]:
        """The files of an accept that are written and not reverted yet. A torn accept counts
        all its files: recovery decides which are on disk."""
        undone: set[str] = set()
        for e in entries:
            if e.op == "undo" and e.target == entry.id and e.done:
                if e.v == 1:
                    return []
                undone.update(e.written)
        return [f for f in entry.files if (f.written or not entry.done) and f.path not in undone]

    def last_undoable(self, entries: list[Entry] | None = None) -> Entry | None:
        entries = self.entries() if entries is None else entries
        for e in reversed(entries):
            if e.op == "accept" and self.remaining(e, entries):
                return e
        return None

    def torn(self) -> list[str]:
        try:
            return sorted(os.listdir(self.open))
        except (FileNotFoundError, NotADirectoryError):  # as in `entries`
            return []

    # -- crash recovery --------------------------------------------------------------------
    def recover(self, ws: Workspace) -> list[Entry]:
        """Complete the steps a crash left open (see the module docstring). Returns them, with
        `notes` saying what could not be completed."""
        if not self.torn():
            return []
        with ws.lock():
            by_id = {e.id: e for e in self.entries()}
            completed = []
            for step_id in self.torn():
                e = by_id.get(step_id)
                if e is not None and not e.done:
                    self._complete(ws, e)
                    completed.append(e)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.open / step_id)
            return completed

    def _complete(self, ws: Workspace, e: Entry) -> None:
        written, notes = [], []
        for fc in e.files:
            try:
                before, after = self.content(fc, "before"), self.content(fc, "after")
                notes += ws.sweep(fc.path, e.id, before, after)
                now = ws.read(fc.path)
                if not now.same(after):
                    if not now.same(before):
                        notes.append(f"{fc.path} was changed since the interrupted {e.op}; "
                                     "left as it is")
                        continue
                    ws.swap(fc.path, before, after, tag=e.id)
                written.append(fc.path)
            except (Changed, PathRefused, OSError) as exc:
                notes.append(f"{fc.path}: not written: {reason(exc)}")
        self.commit(e, written, notes)

    # -- undo ------------------------------------------------------------------------------
    def undo(self, ws: Workspace, entry: Entry | None = None) -> Entry:
        """Revert an accept (the last one by default): the files it wrote and no undo has
        reverted yet. Regions changed on disk since are not overwritten: then nothing at all
        is written and UndoRefused says where. Returns the undo's own journal entry."""
        with ws.lock():
            self.recover(ws)
            entries = self.entries()
            if entry is None:
                entry = self.last_undoable(entries)
                if entry is None:
                    raise UndoRefused("nothing to undo: no accepted change in the journal")
            else:
                entry = next((e for e in entries if e.id == entry.id), None)
                if entry is None:
                    raise UndoRefused("the journal no longer holds that accept")
            todo = self.remaining(entry, entries)
            if not todo:
                raise UndoRefused(f"nothing left to undo: {entry.label} is already undone")
            writes = []
            for fc in todo:
                try:
                    now = ws.read(fc.path)
                except PathRefused as exc:
                    raise UndoRefused(f"cannot undo {fc.path}: {exc}") from None
                writes.append(self._revert_write(fc, now))
            return self.perform(ws, "undo", f"undo: {entry.label}", writes, target=entry.id)

    def take_out(self, fc: FileChange, now: Content) -> Content:
        """What to write over `now` so that the change `fc` recorded is taken out of it,
        3-way (UndoRefused when the user changed those lines since): a rewind's building
        block (app/core/conversation/rewind.py)."""
        return self._revert(fc, now, self.content(fc, "before"), self.content(fc, "after"))

    def _revert_write(self, fc: FileChange, now: Content) -> Write:
        before, after = self.content(fc, "before"), self.content(fc, "after")
        w = Write(fc.path, now, self._revert(fc, now, before, after))

        def redo(found: Content) -> Content | None:
            try:
                return self._revert(fc, found, before, after)
            except UndoRefused as exc:
                w.why = str(exc)
                return None

        w.redo = redo
        return w

    def _revert(self, fc: FileChange, now: Content, before: Content, after: Content) -> Content:
        """What to write over `now` so that the accept's change is taken out of it."""
        if now.special is not None:
            raise UndoRefused(f"cannot undo {fc.path}: it is now {now.special}; nothing was written")
        if now.same(before) or now.same(after):
            return before
        if now.data is None or after.data is None or before.link is not None:
            raise UndoRefused(f"cannot undo {fc.path}: it was deleted, replaced or recreated "
                              "since the accept; nothing was written")
        try:
            after_lines, _ = decode(after.data, fc.path)
            cur_lines, cur_fmt = decode(now.data, fc.path)
            before_lines = decode(before.data, fc.path)[0] if before.data is not None else []
        except NotText as exc:
            raise UndoRefused(f"cannot undo {fc.path}: {exc}") from None
        reverts = changes(after_lines, before_lines)
        merged, conflicts = rebase(after_lines, cur_lines, reverts)
        if conflicts:
            where = ", ".join(f"{reverts[i].a1 + 1}-{max(reverts[i].a2, reverts[i].a1 + 1)}"
                              for i in conflicts)
            raise UndoRefused(f"cannot undo {fc.path}: lines {where} changed on disk since the "
                              "accept; nothing was written")
        if before.data is None and not merged:
            return ABSENT
        return Content(data=encode(merged, cur_fmt, cur_lines), mode=now.mode)


def reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


def fsync_dir(path: Path) -> None:
    """A rename or a new file in `path` survives a crash once the folder itself is synced."""
    fsync_path(path)


def fsync_path(path: Path) -> None:
    """fsync a file or a folder by its path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_SYNCER: ThreadPoolExecutor | None = None


def sync_all(paths: list[Path]) -> None:
    """fsync every path (files and folders), side by side: a filesystem like ext4 commits
    the fsyncs that wait together in one journal commit (8 fsyncs: ~22 ms one after another,
    ~5 ms together here). Returns once all are durable; raises the first failure."""
    global _SYNCER
    if len(paths) <= 1:
        for p in paths:
            fsync_path(p)
        return
    if _SYNCER is None:
        _SYNCER = ThreadPoolExecutor(max_workers=4, thread_name_prefix="steer-fsync")
    for f in [_SYNCER.submit(fsync_path, p) for p in paths]:
        f.result()
