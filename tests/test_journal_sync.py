"""The journal's begin syncs its parts side by side (app/core/disk/journal.py): still all
durable before a file is touched, and a crash between its rounds loses nothing."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from app.core.disk.journal import Journal, UndoRefused, Write, sync_all
from app.core.disk.workspace import Content, Workspace


def _ws(tmp_path: Path) -> Workspace:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.py").write_bytes(b"one\ntwo\n")
    return Workspace(root)


def test_begin_syncs_its_parts_side_by_side(tmp_path, monkeypatch):
    """Two fsyncs of the begin meet at a barrier: one after another, the first would wait
    alone and the barrier break."""
    ws = _ws(tmp_path)
    j = Journal.for_workspace(ws)
    meet = threading.Barrier(2, timeout=20)
    real = os.fsync
    calls: list[int] = []

    def fsync(fd: int) -> None:
        calls.append(fd)
        if len(calls) <= 2:
            meet.wait()  # BrokenBarrierError when nothing else is syncing meanwhile
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    before = ws.read("a.py")
    j.begin("accept", "t", [("a.py", before, Content(data=b"one\nTWO\n", mode=before.mode))])
    assert len(calls) >= 4  # blobs' data, the marker's folder, the blobs' folder, the record


def test_everything_begin_names_is_on_disk_before_the_write(tmp_path, monkeypatch):
    """At the moment the file is swapped, the begin record, its blobs and the open marker
    are all there (what recovery needs to complete or report the step)."""
    ws = _ws(tmp_path)
    j = Journal.for_workspace(ws)
    seen: dict = {}
    real_swap = Workspace.swap

    def swap(self, rel, expect, new, *, tag, marks=None):
        entry = next(e for e in j.entries() if e.id == tag)
        seen["record"] = not entry.done
        seen["blobs"] = all((j.blobs / k).exists() for f in entry.files for k in (f.before, f.after) if k)
        seen["marker"] = (j.open / tag).exists()
        seen["tmp_left"] = [p.name for p in j.blobs.iterdir() if p.name.endswith(".tmp")]
        return real_swap(self, rel, expect, new, tag=tag, marks=marks)

    monkeypatch.setattr(Workspace, "swap", swap)
    before = ws.read("a.py")
    with ws.lock():
        entry = j.perform(ws, "accept", "t", [Write("a.py", before, Content(data=b"1\n", mode=before.mode))])
    assert seen == {"record": True, "blobs": True, "marker": True, "tmp_left": []}
    assert (ws.root / "a.py").read_bytes() == b"1\n"
    assert entry.done and not j.torn()


def test_a_begin_torn_between_its_rounds_is_recovered_without_a_write(tmp_path):
    """The begin record reached the disk, its blobs did not (a crash between the rounds):
    recovery writes nothing, says why, and undo has nothing to revert."""
    ws = _ws(tmp_path)
    j = Journal.for_workspace(ws)
    before = ws.read("a.py")
    entry = j.begin("accept", "t", [("a.py", before, Content(data=b"changed\n", mode=before.mode))])
    for blob in j.blobs.iterdir():
        blob.unlink()
    assert j.torn() == [entry.id]
    done = j.recover(ws)
    assert [e.id for e in done] == [entry.id]
    assert done[0].notes and "a.py" in done[0].notes[0] and "not written" in done[0].notes[0]
    assert (ws.root / "a.py").read_bytes() == b"one\ntwo\n"
    assert not j.torn()
    with pytest.raises(UndoRefused):
        j.undo(ws)


def test_sync_all_says_when_a_sync_fails(tmp_path):
    """A path that cannot be synced is an error, never skipped (the caller then writes
    nothing)."""
    (tmp_path / "x").write_bytes(b"x")
    with pytest.raises(FileNotFoundError):
        sync_all([tmp_path / "x", tmp_path / "missing", tmp_path])
    sync_all([tmp_path / "x", tmp_path])
