"""Saved sessions: the log, replay on resume (exactly as it was, then rebased onto the disk),
rewind of conversation and files, rejection reasons, forks, keys never saved. Real loopback
servers speaking Chat Completions, real git repositories, real journals."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.bench.demo import CALC, CALC_ANSWER, SUB_ANSWER
from app.core.conversation import resume, rewind
from app.core.conversation.session import Session
from app.core.disk.workspace import Workspace
from app.core.edits.hunks import HunkState
from app.core.storage.log import SessionLog, read_log, redact
from app.core.storage.records import Info, SessionError, Text, fold
from app.core.storage.store import SessionStore
from app.providers.openai_chat import OpenAIChat
from app.server.chat_server import ChatServer
from app.server.generation import Faults, split_tokens

KEY = "sk-test-5f1e9c0ffee0123456789abcdef"
STALL = len(split_tokens(CALC_ANSWER[: CALC_ANSWER.index("if b == 0:") + len("if b == 0:\n")]))


def state(session: Session) -> dict:
    """Everything a resume must give back, as plain data."""
    p = session.pending
    return {
        "turns": [(t.kind, t.instruction, t.text, t.state, t.finish_reason, t.deltas,
                   t.steered_at) for t in session.turns],
        "history": session.sent.history,
        "queue": session.queue,
        "context": session.context,
        "fmt": session.fmt,
        "hunks": None if p is None else [
            (h.id, h.path, h.base_start, h.base_end, h.old, h.new, h.state.value, h.applied,
             h.note, h.reason, h.incomplete, h.ancestor) for h in p.hunks],
        "bases": None if p is None else {k: (b.lines, b.fmt, b.exists) for k, b in p.bases.items()},
        "prose": None if p is None else p.prose,
        "errors": None if p is None else [(e.path, e.message, e.turn) for e in p.errors],
        "undo": None if session.review is None else [
            (tx.entry_id, [(h.id, st, a, n) for h, st, a, n in tx.hunks])
            for tx in session.review._undo],
        "accepts": session.accepts,
    }


@pytest.fixture
async def rig(demo):
    servers: list[ChatServer] = []
    sessions: list[Session] = []
    store = SessionStore(demo)

    async def make(answers, **kw):
        server = ChatServer(replay=answers, **kw)
        await server.start()
        servers.append(server)
        return server

    def session(server, saved: bool = True) -> Session:
        s = Session(Workspace(demo), OpenAIChat(server.base_url, "replay"), fmt="search_replace",
                    context=["calc.py"])
        sessions.append(s)
        if saved:
            resume.start(s, store, branch="main")
        return s

    make.session = session
    make.store = store
    yield make
    for s in sessions:
        await s.aclose()
    for server in servers:
        await server.close()


async def reopen(rig, server, sid: str) -> Session:
    fresh = Session(Workspace(rig.store.root), OpenAIChat(server.base_url, "replay"),
                    fmt="search_replace")
    resume.resume(fresh, rig.store, sid)
    return fresh


async def test_a_resumed_session_is_the_session_it_was(rig, demo):
    server = await rig([CALC_ANSWER, SUB_ANSWER])
    s = rig.session(server)
    await s.ask("add type hints")
    first = s.pending.hunks
    s.review.reject([first[2].id], "keep mul untyped")
    out = s.review.accept([first[0].id])
    assert out.written == ["calc.py"]
    await s.ask("and sub")  # a follow-up in the same change set
    s.enqueue("later: docstrings")
    before = state(s)
    sid = s.log.id
    await s.aclose()
    again = await reopen(rig, server, sid)
    try:
        assert state(again) == before
        assert again.review.can_undo  # the accept's undo survives the restart
        assert [t.text for t in again.turns] == [CALC_ANSWER, SUB_ANSWER]
    finally:
        await again.aclose()


async def test_a_resume_undo_reverts_the_accept_of_the_earlier_process(rig, demo):
    server = await rig([CALC_ANSWER])
    s = rig.session(server)
    await s.ask("add type hints")
    h = s.pending.hunks[0]
    s.review.accept([h.id])
    sid = s.log.id
    await s.aclose()
    again = await reopen(rig, server, sid)
    try:
        assert (demo / "calc.py").read_text() != CALC
        await again.changes.undo()
        assert (demo / "calc.py").read_text() == CALC
        assert again.pending.hunk(h.id).state == HunkState.PENDING
        await again.aclose()
        third = await reopen(rig, server, sid)  # the undo is part of the story too
        assert third.pending.hunk(h.id).state == HunkState.PENDING
        await third.aclose()
    finally:
        await again.aclose()


async def test_edits_made_while_steer_was_closed_are_kept_and_the_hunks_move(rig, demo):
    server = await rig([CALC_ANSWER])
    s = rig.session(server)
    await s.ask("add type hints")
    ids = [h.id for h in s.pending.hunks]
    sid = s.log.id
    await s.aclose()
    # the user edits the file while steer is closed: a line above every hunk
    (demo / "calc.py").write_text('"""A tiny calculator."""\nimport math\n' + CALC.split("\n", 1)[1])
    again = await reopen(rig, server, sid)
    try:
        hunks = again.pending.hunks
        assert [h.id for h in hunks] == ids  # same ids, shifted one line down
        assert again.pending.bases["calc.py"].lines[1] == "import math"
        out = again.review.accept_all()
        assert out.written == ["calc.py"]
        text = (demo / "calc.py").read_text()
        assert "import math" in text and "def add(a: float, b: float) -> float:" in text
    finally:
        await again.aclose()


async def test_an_answer_cut_by_the_end_of_the_process_is_kept_as_interrupted(rig, demo):
    server = await rig([CALC_ANSWER, SUB_ANSWER], faults=Faults(stall_after=STALL, only_first=1))
    s = rig.session(server)
    turn = s.start("add type hints")
    while turn.deltas < STALL:
        await asyncio.sleep(0.01)
    s.log.flush()
    text = turn.text
    sid = s.log.id
    # the process dies here: nothing more is written (the log's thread stops with it)
    s.log.close()
    s.log = None
    again = await reopen(rig, server, sid)
    try:
        last = again.turn
        assert last.state == "interrupted" and last.text == text
        assert [h.state for h in again.pending.hunks][:1] == [HunkState.PENDING]  # add() is whole
        follow = await again.ask("go on")  # the conversation continues from the cut answer
        assert follow.kind == "follow-up"
        body = server.stats.bodies[-1]["messages"]
        assert body[-2] == {"role": "assistant", "content": text}
        assert "I interrupted your answer" in body[-1]["content"]
    finally:
        await again.aclose()
        await s.aclose()


async def test_a_torn_last_record_is_dropped_and_the_session_still_resumes(rig, demo):
    server = await rig([CALC_ANSWER])
    s = rig.session(server)
    await s.ask("add type hints")
    sid = s.log.id
    await s.aclose()
    path = rig.store.log_path(sid)
    good = path.read_bytes()
    with open(path, "ab") as fh:
        fh.write(b'{"t":"reject","ids":[1],"rea')  # a kill -9 in the middle of a write
    records, valid = read_log(path)
    assert valid == len(good)
    again = await reopen(rig, server, sid)
    try:
        assert again.pending.hunks and all(h.state == HunkState.PENDING
                                           for h in again.pending.hunks)
        assert path.read_bytes().startswith(good)  # the torn tail is cut, the rest kept
        again.review.reject([1])
        again.log.flush()
        assert read_log(path)[1] == path.stat().st_size  # the next record is whole
    finally:
        await again.aclose()


async def test_zeros_where_a_crash_left_a_hole_are_not_a_record(tmp_path):
    path = tmp_path / "s.jsonl"
    log = SessionLog(path, fresh=True)
    log.append(Text(s="hello"))
    log.close()
    with open(path, "ab") as fh:
        fh.write(b"\0" * 64 + b"\n")
    records, valid = read_log(path)
    assert [type(r) for r in records] == [Text] and valid < path.stat().st_size


async def test_one_process_owns_a_session(rig):
    server = await rig([CALC_ANSWER])
    s = rig.session(server)
    with pytest.raises(SessionError, match="open in another steer process"):
        rig.store.open(s.log.id)


async def test_keys_never_reach_a_session_file(rig, demo, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    answer = f"Use the header Authorization: Bearer {KEY} and key {KEY[::-1]}x0123456789.\n"
    server = await rig([answer])
    s = rig.session(server)
    await s.ask(f"my key is {KEY}, and ghp_{'a' * 30}")
    sid = s.log.id
    await s.aclose()
    raw = rig.store.log_path(sid).read_bytes() + rig.store.log_path(sid).with_suffix(".json").read_bytes()
    assert KEY.encode() not in raw and b"ghp_aaaa" not in raw
    assert b"[redacted]" in raw


def test_redaction_catches_key_shapes_and_the_environment_s_keys():
    assert redact(f"x {KEY} y") == "x [redacted] y"
    assert redact("token hunter2secret!", ["hunter2secret!"]) == "token [redacted]"
    assert redact("def skip(): pass  # sk-ip") == "def skip(): pass  # sk-ip"


async def test_sessions_are_listed_with_what_matters(rig, demo):
    server = await rig([CALC_ANSWER])
    s = rig.session(server)
    await s.ask("add type hints")
    s.log.flush()
    infos = rig.store.list()
    assert len(infos) == 1
    info: Info = infos[0]
    assert (info.first, info.turns, info.open, info.branch) == ("add type hints", 1, 3, "main")
    assert str(demo) == info.root


async def test_a_fork_is_a_new_session_with_the_same_past(rig, demo):
    server = await rig([CALC_ANSWER, SUB_ANSWER, CALC_ANSWER])
    s = rig.session(server)
    await s.ask("add type hints")
    await s.ask("and sub")
    sid = s.log.id
    await s.aclose()
    whole = rig.store.fork(sid)
    first_only = rig.store.fork(sid, at_turn=1)
    a = await reopen(rig, server, whole)
    b = await reopen(rig, server, first_only)
    try:
        assert [t.instruction for t in a.turns] == ["add type hints", "and sub"]
        assert [t.instruction for t in b.turns] == ["add type hints"]
        assert rig.store.info(whole).forked_from == sid
        await b.ask("something else")  # the fork goes its own way; the original is unchanged
        assert len(fold(rig.store.load(sid))) == len(fold(rig.store.load(whole)))
    finally:
        await a.aclose()
        await b.aclose()


async def test_rejection_reasons_reach_the_next_request_and_the_next_change_set(rig, demo):
    server = await rig([CALC_ANSWER, SUB_ANSWER, SUB_ANSWER])
    s = rig.session(server)
    await s.ask("add type hints")
    hunks = s.pending.hunks
    s.review.reject([hunks[1].id], "  do not raise,\n return inf  ")
    await s.ask("and sub")
    msg = server.stats.bodies[1]["messages"][-1]["content"]
    assert "rejected (do not propose again)" in msg
    assert "calc.py line 16" in msg and "(reason: do not raise, return inf)" in msg
    assert "raise ZeroDivisionError" in msg  # what was proposed, so it is not proposed again
    s.review.reject_all()
    await s.ask("again")  # a new change set: the rejection is still in the conversation
    sent = server.stats.bodies[2]["messages"]
    assert sent[: len(server.stats.bodies[1]["messages"])] == server.stats.bodies[1]["messages"]
    assert "(reason: do not raise, return inf)" in sent[-3]["content"]
    first = sent[-1]["content"]  # appended: the rejections since, not the one told already
    assert not first.startswith("Earlier in this session") and first.endswith("again")
    assert "rejected (do not propose again)" in first and "do not raise" not in first
    assert "calc.py line 4" in first


async def test_an_ask_after_an_interrupted_answer_keeps_the_conversation(rig, demo):
    server = await rig([CALC_ANSWER, SUB_ANSWER], faults=Faults(stall_after=5, only_first=1))
    s = rig.session(server)
    turn = s.start("add type hints")
    while turn.deltas < 5:
        await asyncio.sleep(0.01)
    s.interrupt()  # before any edit: no hunk, so the next message starts a new change set
    assert not s.pending.hunks
    nxt = await s.ask("just do sub")
    assert nxt.kind == "ask"
    messages = server.stats.bodies[1]["messages"]
    assert {"role": "assistant", "content": turn.text} in messages  # never silently dropped
    assert "I interrupted your previous answer" in messages[-1]["content"]


async def test_rewind_conversation_and_files_to_before_a_turn(rig, demo):
    server = await rig([CALC_ANSWER, SUB_ANSWER])
    s = rig.session(server)
    await s.ask("add type hints")
    s.review.accept([s.pending.hunks[0].id])  # turn 1 writes add()
    after_first = (demo / "calc.py").read_text()
    before = state(s)
    await s.ask("and sub")
    s.review.accept([h.id for h in s.pending.hunks if h.state == HunkState.PENDING])
    assert (demo / "calc.py").read_text() != after_first
    done = rewind.rewind_files(s, 1)  # files as they were before turn 2
    assert done.written == ["calc.py"] and not done.refused
    assert (demo / "calc.py").read_text() == after_first
    left = resume.rewind_conversation(s, 1)
    assert left == 1
    assert state(s)["turns"] == before["turns"] and state(s)["history"] == before["history"]
    redo = rewind.redo_files(s)  # changed my mind: the files of turn 2 come back
    assert redo.written == ["calc.py"] and "def sub(a: float" in (demo / "calc.py").read_text()
    sid = s.log.id
    await s.aclose()
    again = await reopen(rig, server, sid)
    try:
        assert [t.instruction for t in again.turns] == ["add type hints"]
        assert len(again.file_steps) == 2
    finally:
        await again.aclose()


async def test_a_redo_of_files_is_a_checkpoint_after_a_resume_too(rig, demo):
    """A redo is an accept of those turns again: a rewind after a resume takes it out, as
    it would have in the process that made it."""
    server = await rig([CALC_ANSWER, SUB_ANSWER])
    s = rig.session(server)
    await s.ask("add type hints")
    s.review.accept([s.pending.hunks[0].id])
    after_first = (demo / "calc.py").read_text()
    await s.ask("and sub")
    s.review.accept([h.id for h in s.pending.hunks if h.state == HunkState.PENDING])
    assert rewind.rewind_files(s, 1).written == ["calc.py"]
    assert rewind.redo_files(s).written == ["calc.py"]
    live = list(s.accepts)
    sid = s.log.id
    await s.aclose()
    again = await reopen(rig, server, sid)
    try:
        assert again.accepts == live
        done = rewind.rewind_files(again, 1)  # the redone files of turn 2 go out again
        assert done.written == ["calc.py"] and (demo / "calc.py").read_text() == after_first
    finally:
        await again.aclose()


async def test_rewind_refuses_a_file_the_user_changed_since_and_writes_nothing_to_it(rig, demo):
    (demo / "notes.txt").write_text("one\ntwo\n")
    server = await rig([CALC_ANSWER + "\nnotes.txt\n```\n<<<<<<< SEARCH\none\n=======\nONE\n"
                        ">>>>>>> REPLACE\n```\n"])
    s = rig.session(server)
    s.files.add("notes.txt")
    await s.ask("add type hints")
    s.review.accept_all()
    calc = (demo / "calc.py").read_text()
    (demo / "calc.py").write_text(calc.replace("def add(a: float, b: float) -> float:",
                                               "def add(a: int, b: int) -> int:"))
    mine = (demo / "calc.py").read_bytes()
    done = rewind.rewind_files(s, 0)
    assert done.written == ["notes.txt"] and list(done.refused) == ["calc.py"]
    assert "changed on disk" in done.refused["calc.py"]
    assert (demo / "calc.py").read_bytes() == mine  # nothing written to it
    assert (demo / "notes.txt").read_text() == "one\ntwo\n"  # untracked, no git needed


@given(st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=20),
       st.integers(min_value=0, max_value=400))
def test_any_torn_tail_leaves_exactly_the_whole_records(tmp_path_factory, texts, cut):
    path = tmp_path_factory.mktemp("log") / "s.jsonl"
    log = SessionLog(path, fresh=True)
    for t in texts:
        log.append(Text(s=t))
    log.close()
    raw = path.read_bytes()
    cut = min(cut, len(raw))
    path.write_bytes(raw[: len(raw) - cut])
    records, valid = read_log(path)
    whole = raw[: len(raw) - cut].count(b"\n")
    assert [r.s for r in records] == texts[:whole]
    assert valid == len(b"".join(raw.split(b"\n")[i] + b"\n" for i in range(whole)))


def test_a_session_id_cannot_escape_the_store(tmp_path):
    store = SessionStore(tmp_path, tmp_path / "store")
    for bad in ("../x", "a/b", ".hidden", ""):
        with pytest.raises(SessionError):
            store.log_path(bad)


def test_the_store_lives_in_the_user_state_dir_not_the_tree(tmp_path):
    store = SessionStore(tmp_path / "repo")
    assert str(store.dir).startswith(os.environ["XDG_STATE_HOME"])
    json.dumps(str(store.dir))


async def test_a_live_rebase_is_replayed_so_later_ids_and_decisions_match(rig, demo):
    server = await rig([CALC_ANSWER, SUB_ANSWER])
    s = rig.session(server)
    await s.ask("add type hints")
    # the user edits the lines of hunk #1 on disk: a live rebase makes it a conflict
    (demo / "calc.py").write_text(CALC.replace("def add(a, b):", "def add(a, b, c=0):"))
    changed = s.review.recheck("calc.py")
    assert any(h.state == HunkState.CONFLICT for h in changed)
    await s.ask("and sub")  # new hunks get ids after whatever the rebase did
    s.review.take_mine(s.pending.hunks[0].id)
    s.review.accept([s.pending.hunks[-1].id])
    before = state(s)
    sid = s.log.id
    await s.aclose()
    again = await reopen(rig, server, sid)
    try:
        assert state(again) == before
    finally:
        await again.aclose()


@given(st.lists(st.sampled_from(["a", "é", "\t x", "", "line"]), max_size=8),
       st.sampled_from(["\n", "\r\n", "mixed"]), st.booleans(),
       st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "latin-1"]))
def test_a_base_snapshot_survives_the_log_byte_for_byte(lines, newline, final, encoding):
    from app.core.disk.snapshot import Snapshot
    from app.core.storage.records import Snap
    from app.core.text.textfile import NotText, decode, encode

    if newline == "mixed":
        text = "".join(t + ("\r\n" if i % 2 else "\n") for i, t in enumerate(lines))
    else:
        text = newline.join(lines) + (newline if final and lines else "")
    try:
        raw = text.encode(encoding)
        got, fmt = decode(raw, "f.txt")
    except (NotText, UnicodeEncodeError):
        return
    snap = Snapshot("f.txt", True, got, fmt, "d", 0o644)
    back = Snap.model_validate_json(Snap.of(snap).model_dump_json()).snapshot()
    assert (back.lines, back.fmt, back.mode) == (got, fmt, 0o644)
    assert encode(back.lines, back.fmt) == encode(got, fmt)


async def test_a_file_refused_at_an_older_turn_is_not_half_rewound(rig, demo):
    server = await rig([CALC_ANSWER, SUB_ANSWER])
    s = rig.session(server)
    await s.ask("add type hints")
    s.review.accept([s.pending.hunks[0].id])  # turn 1: add()
    await s.ask("and sub")
    s.review.accept([h.id for h in s.pending.hunks if "def sub" in "".join(h.new)])  # turn 2
    text = (demo / "calc.py").read_text()
    assert "def sub(a: float" in text
    # the user changes what turn 1 wrote: turn 2's change alone could be taken out, but
    # then the file would be half rewound; it is refused whole
    (demo / "calc.py").write_text(text.replace("def add(a: float, b: float) -> float:",
                                               "def add(a: int, b: int) -> int:"))
    mine = (demo / "calc.py").read_bytes()
    done = rewind.rewind_files(s, 0)
    assert list(done.refused) == ["calc.py"] and not done.written and not done.steps
    assert (demo / "calc.py").read_bytes() == mine


def test_a_fifo_or_a_symlink_in_place_of_a_log_is_refused_not_followed(tmp_path):
    store = SessionStore(tmp_path / "repo", tmp_path / "store")
    store.dir.mkdir(parents=True)
    os.mkfifo(store.log_path("fifo"))
    (tmp_path / "elsewhere.jsonl").write_text("")
    store.log_path("link").symlink_to(tmp_path / "elsewhere.jsonl")
    for sid in ("fifo", "link"):
        with pytest.raises(SessionError):
            store.open(sid)  # never blocks, never writes through the link
        with pytest.raises(SessionError):
            store.load(sid)
    assert store.list() == []
    assert (tmp_path / "elsewhere.jsonl").read_text() == ""


async def test_a_fifo_in_place_of_a_summary_does_not_block_the_listing(rig):
    server = await rig([CALC_ANSWER])
    s = rig.session(server)
    await s.ask("add type hints")
    sid = s.log.id
    await s.aclose()
    side = rig.store.log_path(sid).with_suffix(".json")
    side.unlink()
    os.mkfifo(side)
    assert [(i.id, i.turns, i.first) for i in rig.store.list()] == [(sid, 1, "add type hints")]


async def test_an_agent_s_session_replays_its_edits_and_is_not_continued_by_a_model(demo):
    from app.core.conversation.session import ContextError
    from app.core.provider import Provider
    from app.core.storage.records import AgentRec, End, Meta, TurnRec

    store = SessionStore(demo)
    log = store.create(Meta(id="agent-1", created=0.0, root=str(demo)))
    for rec in (TurnRec(kind="ask", instruction="type it", content="type it", fmt="agent",
                        agent=True, bases=[]),
                Text(s="I typed add()."),
                AgentRec(kind="write", path="calc.py",
                         new=CALC.replace("def add(a, b):", "def add(a: int, b: int) -> int:")),
                End(state="done", finish_reason="stop", elapsed=1.0)):
        log.append(rec)
    log.close()
    session = Session(Workspace(demo), Provider())
    resume.resume(session, store, "agent-1")
    try:
        [h] = session.pending.hunks
        assert h.new == ["def add(a: int, b: int) -> int:"] and h.state == HunkState.PENDING
        assert session.turn.text == "I typed add()." and session.fmt == "agent"
        with pytest.raises(ContextError, match="made with an agent"):
            session.start("and sub")  # a model cannot continue an agent's change set
    finally:
        await session.aclose()
