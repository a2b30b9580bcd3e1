"""The change set's subscribers: who hears what, in which order, and that nothing outside an
owner assigns a callback slot any more. Real files in real temp git repositories."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import SRC, init_repo, sr

from app.core.conversation.session import Session
from app.core.disk.workspace import Workspace
from app.core.edits.formats import make_parser
from app.core.edits.hunks import HunkState
from app.core.listeners import Listeners
from app.core.review.change_set import ChangeSet
from app.core.review.events import Decided, Due, Opened, RebaseDone, Rebasing
from app.core.storage.records import Accept, Reject, Undo
from app.providers.openai_chat import OpenAIChat

APP = Path(__file__).resolve().parents[1] / "app"
TWO = sr("f.txt", "line 3\n", "line three\n") + sr("f.txt", "line 15\n", "line fifteen\n")


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(init_repo(tmp_path / "r", {"f.txt": SRC}))


def feed(cs: ChangeSet, text: str, *, finish: bool = True) -> None:
    assert cs.pending is not None
    parser = make_parser("search_replace", frozenset(cs.pending.bases))
    cs.pending.feed(parser.feed(text))
    if finish:
        cs.pending.feed(parser.finish(True))
        cs.pending.finish()


def test_listeners_deliver_in_subscription_order_and_leave_cleanly():
    heard: list[tuple[str, int]] = []
    box: Listeners[int] = Listeners()
    box.subscribe(lambda e: heard.append(("a", e)))
    leave_b = box.subscribe(lambda e: heard.append(("b", e)))

    def c(e: int) -> None:  # leaves while an event is being delivered: safe
        heard.append(("c", e))
        leave_c()
    leave_c = box.subscribe(c)
    box.publish(1)
    leave_b()
    leave_b()  # twice is harmless
    box.publish(2)
    assert heard == [("a", 1), ("b", 1), ("c", 1), ("a", 2)]
    assert len(box) == 1


def test_one_subscription_hears_every_change_set_the_session_opens(ws):
    cs = ChangeSet(ws)
    heard: list[object] = []
    cs.subscribe(heard.append)
    first = cs.open([ws.snapshot("f.txt").prepare()])
    feed(cs, TWO)
    assert cs.review is not None
    cs.review.accept_all()
    second = cs.open([ws.snapshot("f.txt").prepare()])  # a new question, fresh snapshots
    assert second is not first
    feed(cs, sr("f.txt", "line 7\n", "line seven\n"))
    cs.review.reject_all("not this")
    kinds = [type(e).__name__ for e in heard]
    assert kinds == ["Opened", "Decided", "Settled", "Opened", "Settled", "Decided"]
    assert isinstance(heard[0], Opened) and heard[0].pending is first
    accept = heard[1]
    assert isinstance(accept, Decided) and isinstance(accept.record, Accept)
    assert [i for i, _, _ in accept.record.hunks] == [h.id for h in first.hunks]
    assert accept.record.entry  # written, through the journal
    reject = heard[5]
    assert isinstance(reject, Decided) and isinstance(reject.record, Reject)
    assert reject.record.reason == "not this"


def test_a_live_rebase_is_told_before_and_after_and_an_undo_is_a_decision(ws):
    cs = ChangeSet(ws)
    heard: list[object] = []
    cs.subscribe(heard.append)
    cs.open([ws.snapshot("f.txt").prepare()])
    feed(cs, TWO)
    review = cs.review
    assert review is not None and cs.pending is not None
    (ws.root / "f.txt").write_text(SRC.replace("line 1\n", "line 1\nmine\n"))
    heard.clear()
    review.recheck("f.txt")
    assert [type(e) for e in heard] == [Rebasing, RebaseDone]
    before, after = heard
    assert isinstance(before, Rebasing) and before.path == "f.txt"
    assert before.snapshot is not None and "mine" in before.snapshot.lines
    assert isinstance(after, RebaseDone) and after.fd is cs.pending.files["f.txt"]
    review.accept_all()
    heard.clear()
    review.undo()
    assert [type(e) for e in heard] == [Decided]
    undo = heard[0]
    assert isinstance(undo, Decided) and isinstance(undo.record, Undo)
    assert undo.record.written == ["f.txt"]
    assert all(h.state == HunkState.PENDING for h in cs.pending.hunks)


def test_a_put_off_rebase_is_due_when_the_edit_streaming_into_the_file_ends(ws):
    cs = ChangeSet(ws)
    heard: list[object] = []
    cs.subscribe(heard.append)
    cs.open([ws.snapshot("f.txt").prepare()])
    assert cs.pending is not None
    parser = make_parser("search_replace", frozenset(cs.pending.bases))
    block = sr("f.txt", "line 3\n", "line three\nline three and a half\n")
    cut = block.index("line three and a half")
    cs.pending.feed(parser.feed(block[:cut]))  # the edit is streaming into f.txt
    cs.pending.defer("f.txt")  # a watch event came now: its rebase waits
    assert not [e for e in heard if isinstance(e, Due)]
    cs.pending.feed(parser.feed(block[cut:]))
    cs.pending.feed(parser.finish(True))
    assert [e.path for e in heard if isinstance(e, Due)] == ["f.txt"]
    assert not cs.pending.due


def test_the_session_hears_a_decision_before_any_later_subscriber(ws):
    """The session subscribes in its constructor: by the time another subscriber hears of an
    accept, the accept is already the session's checkpoint (and saved, when it is saved)."""
    session = Session(ws, OpenAIChat("http://127.0.0.1:9", "replay"), fmt="search_replace")
    seen_checkpoints: list[list[tuple[int, str]]] = []
    session.changes.subscribe(
        lambda e: seen_checkpoints.append(list(session.accepts)) if isinstance(e, Decided) else None)
    session.changes.open([ws.snapshot("f.txt").prepare()])
    feed(session.changes, TWO)
    assert session.review is not None
    out = session.review.accept_all()
    assert out.accepted and seen_checkpoints and seen_checkpoints[0]
    assert seen_checkpoints[0][0][1]  # the journal entry of the accept


def test_settled_answers_an_agent_waiting_on_its_hunks(ws):
    """`Settled` reaches the agent host through the session: a reject answers the write."""
    session = Session(ws, OpenAIChat("http://127.0.0.1:9", "replay"), fmt="search_replace")
    calls: list[int] = []
    session.agent.settle = lambda: calls.append(1)  # type: ignore[method-assign]
    session.changes.open([ws.snapshot("f.txt").prepare()])
    feed(session.changes, TWO)
    assert session.review is not None
    session.review.reject_all()
    assert calls == [1]


def _assigned_slots(tree: ast.AST) -> list[str]:
    """`x.on_y = …`, `x.after_y = …` or `x._hooked = …` where x is not `self`."""
    out = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign | ast.AugAssign) else [])
        for t in targets:
            for el in (t.elts if isinstance(t, ast.Tuple) else [t]):
                if (isinstance(el, ast.Attribute) and (el.attr.startswith(("on_", "after_")) or
                                                       el.attr == "_hooked")
                        and not (isinstance(el.value, ast.Name) and el.value.id == "self")):
                    out.append(f"{ast.unparse(el)} (line {el.lineno})")
    return out


def test_no_callback_slot_is_assigned_from_outside_its_owner():
    found = {}
    for path in sorted(APP.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        slots = _assigned_slots(tree)
        if slots:
            found[str(path.relative_to(APP))] = slots
        own = [n.target for n in ast.walk(tree) if isinstance(n, ast.AnnAssign)]
        assert not [t for t in own if isinstance(t, ast.Attribute) and t.attr == "_hooked"]
    assert found == {}


def test_the_slot_finder_finds_a_slot():
    """The guard above would see one coming back."""
    assert _assigned_slots(ast.parse("pending.on_due = f\nself.on_x = g\na.b, c.on_z = 1, 2")) == [
        "pending.on_due (line 1)", "c.on_z (line 3)"]


def test_a_variant_hears_its_siblings_through_one_journal(ws):
    cs = ChangeSet(ws)
    beside = ChangeSet.beside(cs)
    assert beside.journal is cs.journal and beside.write_lock is cs.write_lock
    assert beside.arrivals is not cs.arrivals and beside.listeners is not cs.listeners
    cs.open([ws.snapshot("f.txt").prepare()])
    assert ChangeSet.beside(cs).pending is cs.pending  # the decisions so far are told to it


async def test_undo_through_the_change_set_takes_the_journals_last_when_the_session_has_none(ws):
    first = ChangeSet(ws)
    first.open([ws.snapshot("f.txt").prepare()])
    feed(first, TWO)
    assert first.review is not None
    first.review.accept_all()
    later = ChangeSet(ws)  # another session on the same tree, nothing of its own to undo
    assert await later.undoable()
    label = await later.undo()
    assert "f.txt" in label and (ws.root / "f.txt").read_text() == SRC
