"""What `make mutants` found the disk room's tests did not look at (app/core/disk/workspace.py):
a deletion that finds the file changed, or absent, or present when it should not be; a save
landing while the file to delete is moved aside (kept, beside it, and named); what a path
holds, said as what it is (a FIFO, a socket, a directory, a symlink). Real files, a real
FIFO and socket; the other writer is put at the worst moment by the write's own stop point."""

from __future__ import annotations

import os
import socket

import pytest

from app.core.disk import workspace as workspace_module
from app.core.disk.paths import PathRefused
from app.core.disk.workspace import ABSENT, Changed, Content, Workspace
from app.core.text.textfile import NotText

OLD, MINE, LATER = b"old\n", b"mine: saved since the request\n", b"later: saved mid-delete\n"


def ws_with(tmp_path, data: bytes | None = OLD) -> Workspace:
    root = tmp_path / "w"
    root.mkdir()
    if data is not None:
        (root / "f.txt").write_bytes(data)
    return Workspace(root)


def leftovers(ws: Workspace) -> list[str]:
    return sorted(p.name for p in ws.root.iterdir() if p.name != "f.txt")


def test_a_delete_of_a_file_changed_since_the_request_is_refused_and_names_what_it_found(tmp_path):
    ws = ws_with(tmp_path, MINE)
    with pytest.raises(Changed) as err:
        ws.swap("f.txt", Content(data=OLD), ABSENT, tag="t1")
    assert (err.value.rel, err.value.found.data, err.value.rescued) == ("f.txt", MINE, None)
    assert "f.txt changed on disk while steer was writing it" in str(err.value)
    assert (ws.root / "f.txt").read_bytes() == MINE and leftovers(ws) == []


def test_a_delete_of_a_file_gone_since_the_request_is_refused_as_absent(tmp_path):
    ws = ws_with(tmp_path, None)
    with pytest.raises(Changed) as err:
        ws.swap("f.txt", Content(data=OLD), ABSENT, tag="t2")
    assert err.value.rel == "f.txt" and err.value.found.same(ABSENT) and err.value.found == ABSENT
    assert leftovers(ws) == []


def test_a_file_expected_absent_that_exists_is_not_deleted(tmp_path):
    ws = ws_with(tmp_path, MINE)
    with pytest.raises(Changed) as err:
        ws.swap("f.txt", ABSENT, ABSENT, tag="t3")
    assert (err.value.rel, err.value.found.data) == ("f.txt", MINE)
    assert (ws.root / "f.txt").read_bytes() == MINE


def test_a_save_while_the_file_is_moved_aside_for_a_delete_is_kept_and_the_other_rescued(
        tmp_path, monkeypatch):
    """The file changed before the delete (so it must go back), and another save lands in the
    instant it is aside: the newest stays at its name, the other is kept beside it."""
    ws = ws_with(tmp_path, MINE)
    real = workspace_module.stop_point

    def another_writer(label: str) -> None:
        if label == "swap:aside:f.txt":
            (ws.root / "f.txt").write_bytes(LATER)
        real(label)

    monkeypatch.setattr(workspace_module, "stop_point", another_writer)
    with pytest.raises(Changed) as err:
        ws.swap("f.txt", Content(data=OLD), ABSENT, tag="t4")
    rescued = err.value.rescued
    assert rescued is not None and rescued != "f.txt" and err.value.rel == "f.txt"
    assert err.value.found.data == MINE  # what was moved aside: not what steer expected
    assert (ws.root / "f.txt").read_bytes() == LATER  # the newest save, at its name
    assert (ws.root / rescued).read_bytes() == MINE  # the other, beside it: nothing lost
    assert f"kept as {rescued}" in str(err.value)
    assert leftovers(ws) == [rescued]


@pytest.mark.parametrize("kind", ["a FIFO", "a socket", "a directory"])
def test_what_is_not_a_regular_file_is_named_as_what_it_is(tmp_path, kind):
    ws = ws_with(tmp_path, None)
    path = ws.root / "f.txt"
    held = None
    if kind == "a FIFO":
        os.mkfifo(path)
    elif kind == "a socket":
        held = socket.socket(socket.AF_UNIX)
        held.bind(str(path))
    else:
        path.mkdir()
    try:
        with pytest.raises(PathRefused) as refused:
            ws.read_file("f.txt")
        assert str(refused.value) == f"f.txt is {kind}; steer edits regular files only"
        with pytest.raises(NotText) as err:
            ws.snapshot("f.txt")
        assert kind in str(err.value)
        with pytest.raises(Changed) as changed:  # a write finds it there: named as what it is
            ws.swap("f.txt", Content(data=OLD), ABSENT, tag="t5")
        assert changed.value.found.special == kind and changed.value.found.describe() == kind
    finally:
        if held is not None:
            held.close()


def test_content_describes_itself(tmp_path):
    assert Content(data=b"x").describe() == "a file"
    assert Content(data=b"").describe() == "a file"  # empty is still a file
    assert ABSENT.describe() == "nothing" and not ABSENT.exists
    assert Content(link="../elsewhere").describe() == "a symlink to ../elsewhere"
