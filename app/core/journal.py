"""The accept journal: every write steer makes, recorded before it happens.

Lives outside the tracked tree (the workspace's state dir: inside .git when there is one).
Blobs are content-addressed files; entries are JSON lines, fsynced before the working tree
is touched, so a kill -9 at any moment leaves a journal that covers what is on disk and
undo never depends on git.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from app.core.linediff import changes, rebase
from app.core.textfile import NotText, decode, digest, encode
from app.core.workspace import Workspace


class FileChange(BaseModel):
    path: str
    before: str | None  # blob digest; None: the file did not exist
    after: str | None  # None: the file was deleted
    mode: int | None = None


class Entry(BaseModel):
    op: Literal["accept", "undo"]
    id: str
    time: float
    label: str
    files: list[FileChange]
    target: str | None = None  # undo: the accept it reverted


class UndoRefused(RuntimeError):
    pass


class Journal:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.blobs = directory / "blobs"
        self.file = directory / "journal.jsonl"

    @classmethod
    def for_workspace(cls, ws: Workspace) -> Journal:
        return cls(ws.state_dir() / "journal")

    def _put(self, data: bytes) -> str:
        key = digest(data)
        path = self.blobs / key
        if not path.exists():
            self.blobs.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        return key

    def blob(self, key: str) -> bytes:
        return (self.blobs / key).read_bytes()

    def record(self, op: Literal["accept", "undo"], label: str,
               files: list[tuple[str, bytes | None, bytes | None, int | None]],
               target: str | None = None) -> Entry:
        """Store the before/after contents and append the entry, durably, before any write."""
        entry = Entry(
            op=op, id=uuid.uuid4().hex[:12], time=time.time(), label=label, target=target,
            files=[
                FileChange(path=p, before=None if b is None else self._put(b),
                           after=None if a is None else self._put(a), mode=m)
                for p, b, a, m in files
            ],
        )
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.file, "a", encoding="utf-8") as fh:
            fh.write(entry.model_dump_json() + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        return entry

    def entries(self) -> list[Entry]:
        try:
            text = self.file.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        out = []
        for line in text.splitlines():
            with contextlib.suppress(ValueError):  # a line torn by a crash mid-append
                out.append(Entry.model_validate_json(line))
        return out

    def last_undoable(self) -> Entry | None:
        entries = self.entries()
        undone = {e.target for e in entries if e.op == "undo"}
        for e in reversed(entries):
            if e.op == "accept" and e.id not in undone:
                return e
        return None

    def undo(self, ws: Workspace, entry: Entry | None = None) -> Entry:
        """Revert an accept (the last one by default). Regions changed on disk since are not
        overwritten: then nothing at all is written and UndoRefused says where."""
        entry = entry or self.last_undoable()
        if entry is None:
            raise UndoRefused("nothing to undo: no accepted change in the journal")
        plan: list[tuple[str, bytes | None, bytes | None, int | None]] = []
        for fc in entry.files:
            current = ws.read_bytes(fc.path)
            now = None if current is None else digest(current)
            if now == fc.before:
                continue  # already as it was
            before = None if fc.before is None else self.blob(fc.before)
            if now == fc.after:
                plan.append((fc.path, current, before, fc.mode))
                continue
            plan.append((fc.path, current, self._merge_back(fc, current, before), fc.mode))
        if plan:
            done = self.record("undo", f"undo: {entry.label}", plan, target=entry.id)
        else:
            done = self.record("undo", f"undo: {entry.label} (already reverted)", [], target=entry.id)
        for path, _current, before, mode in plan:
            if before is None:
                ws.delete(path)
            else:
                ws.write_atomic(path, before, mode)
        return done

    def _merge_back(self, fc: FileChange, current: bytes | None, before: bytes | None) -> bytes | None:
        if current is None or fc.after is None:
            raise UndoRefused(f"cannot undo {fc.path}: it was deleted or recreated since the accept")
        try:
            after_lines, _ = decode(self.blob(fc.after), fc.path)
            cur_lines, cur_fmt = decode(current, fc.path)
            before_lines = decode(before, fc.path)[0] if before is not None else []
        except NotText as exc:
            raise UndoRefused(f"cannot undo {fc.path}: {exc}") from None
        reverts = changes(after_lines, before_lines)
        merged, conflicts = rebase(after_lines, cur_lines, reverts)
        if conflicts:
            where = ", ".join(f"{reverts[i].a1 + 1}-{max(reverts[i].a2, reverts[i].a1 + 1)}" for i in conflicts)
            raise UndoRefused(
                f"cannot undo {fc.path}: lines {where} changed on disk since the accept; "
                "nothing was written"
            )
        if before is None and not merged:
            return None
        return encode(merged, cur_fmt, cur_lines)
