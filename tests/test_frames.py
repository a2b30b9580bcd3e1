"""FrameSync without Textual: a real Session streaming from a real loopback server, frames
taken at arbitrary moments, and what the frames carry checked against the session."""

from __future__ import annotations

import asyncio
import random

import pytest

from app.bench.demo import CALC_ANSWER, SUB_ANSWER
from app.core.conversation.session import Session
from app.core.disk.workspace import Workspace
from app.core.edits.hunks import HunkState
from app.providers.openai_chat import OpenAIChat
from app.server.chat_server import ChatServer
from app.server.generation import Faults, split_tokens
from app.view.frames import DIFF_EVERY, Frame, FrameSync

STALL = len(split_tokens(CALC_ANSWER[: CALC_ANSWER.index("if b == 0:") + len("if b == 0:\n")]))


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


async def served(answers, **kw) -> ChatServer:
    server = ChatServer(replay=answers, **kw)
    await server.start()
    return server


def session_for(root, server: ChatServer) -> Session:
    return Session(Workspace(root), OpenAIChat(server.base_url, "replay"), fmt="search_replace",
                   context=["calc.py"])


def answer_text(frames: list[Frame]) -> str:
    """The raw view's text: what the model sent."""
    return "".join(p.text for f in frames for p in f.answer if p.style == "text" and not p.line)


def prose_text(frames: list[Frame]) -> str:
    """The conversation's finished prose, in order."""
    return "".join(p.text for f in frames for p in f.answer if p.style == "md")


def cards(frames: list[Frame]) -> dict[int, str]:
    """Each card line's latest text, by key."""
    out: dict[int, str] = {}
    for f in frames:
        for p in f.answer:
            if p.key is not None:
                out[p.key] = p.text
    return out


async def take_until_done(sync: FrameSync, session: Session, clock: Clock, rnd: random.Random) -> list[Frame]:
    frames = []
    while session.streaming:
        await asyncio.sleep(rnd.random() * 0.004)
        clock.t += rnd.random() * 0.03
        frames.append(sync.take())
    clock.t += 1
    frames.append(sync.take())
    return frames


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_the_conversation_carries_the_prose_once_in_order_and_a_card_per_edit(demo, seed):
    server = await served(CALC_ANSWER, rate=3000)
    session = session_for(demo, server)
    clock, rnd = Clock(), random.Random(seed)
    sync = FrameSync(session, clock)
    try:
        session.start("add type hints")
        frames = await take_until_done(sync, session, clock, rnd)
    finally:
        await session.aclose()
        await server.close()
    turn = session.turn
    assert turn.state == "done"
    firsts = [p for f in frames for p in f.answer]
    assert firsts[0].style == "user" and firsts[0].text == "› add type hints"
    # the prose exactly once, in order, no edit syntax; the tail cleared at the end
    assert prose_text(frames) == "".join(line + "\n" for line in session.pending.prose)
    assert "SEARCH" not in prose_text(frames) and "```" not in prose_text(frames)
    tail = None  # as the pane keeps it: new prose ends the tail, a tail piece replaces it
    for piece in (p for f in frames for p in f.answer):
        if piece.style == "md":
            tail = ""
        elif piece.style == "tail":
            tail = piece.text
    assert tail == ""  # nothing tentative left once the answer is over
    # one card line for the three blocks of calc.py, ending where the hunks stand
    assert cards(frames) == {0: "✎ calc.py  #1 #2 #3  pending  +5 −3"}
    assert sum(f.started is turn for f in frames) == 1
    ended = [e for f in frames for e in f.ended]
    assert len(ended) == 1 and ended[0].turn is turn and not ended[0].superseded
    assert ended[0].failure is None
    assert any("calc.py" in f.dirty for f in frames)
    last_count = [f.open_counts["calc.py"] for f in frames if "calc.py" in f.open_counts][-1]
    assert last_count == 3 == len(session.pending.hunks)
    status = [f.status for f in frames if f.status][-1]
    assert "done · 3 hunks: 3 open, 0 accepted, 0 rejected" in status


@pytest.mark.parametrize("seed", [1, 2])
async def test_the_raw_view_carries_the_whole_answer_once_in_order(demo, seed):
    server = await served(CALC_ANSWER, rate=3000)
    session = session_for(demo, server)
    clock, rnd = Clock(), random.Random(seed)
    sync = FrameSync(session, clock, mode="raw")
    try:
        session.start("add type hints")
        frames = await take_until_done(sync, session, clock, rnd)
    finally:
        await session.aclose()
        await server.close()
    assert answer_text(frames) == session.turn.text == CALC_ANSWER


@pytest.mark.parametrize("seed", range(8))
async def test_a_card_drawn_streaming_that_ends_refused_says_so(demo, seed):
    # the answer again: its blocks cannot apply twice; a card first drawn while its block
    # streamed ends with an error and no hunk, and must still be drawn again as it ended
    server = await served(CALC_ANSWER * 2, rate=4000)
    session = session_for(demo, server)
    clock, rnd = Clock(), random.Random(seed)
    sync = FrameSync(session, clock)
    try:
        session.start("add type hints")
        frames = await take_until_done(sync, session, clock, rnd)
    finally:
        await session.aclose()
        await server.close()
    shown = cards(frames)
    assert not [t for t in shown.values() if "streaming" in t]
    assert shown[0].startswith("✎ calc.py  #1 #2 #3  pending  +5 −3")
    assert sum(t.count("the lines to replace were not found") for t in shown.values()) == 3


async def test_a_decision_changes_the_card_line(demo):
    server = await served(CALC_ANSWER)
    session = session_for(demo, server)
    sync = FrameSync(session, Clock())
    try:
        await session.ask("add type hints")
        sync.take()
        h1, h2, _ = session.pending.hunks
        session.review.accept([h1.id])
        session.review.reject([h2.id])
        f = sync.take()
    finally:
        await session.aclose()
        await server.close()
    assert [(p.key, p.text) for p in f.answer if p.key is not None] == [
        (0, "✎ calc.py  #1✓ #2✗ #3  +5 −3")]
    assert sync.card_hunks(0) == [1, 2, 3]


async def test_restart_shows_every_turn_again_in_the_other_view(demo):
    server = await served([CALC_ANSWER, SUB_ANSWER])
    session = session_for(demo, server)
    sync = FrameSync(session, Clock())
    try:
        await session.ask("add type hints")
        await session.ask("and sub")
        sync.take()
        sync.mode = "raw"
        sync.restart()
        f = sync.take()
    finally:
        await session.aclose()
        await server.close()
    texts = [(p.text, p.style) for p in f.answer]
    assert texts[0] == ("› add type hints", "user")
    assert ("› follow-up and sub", "user") in texts
    assert "".join(p.text for p in f.answer if p.style == "text" and not p.line) == CALC_ANSWER + SUB_ANSWER


async def test_while_streaming_changed_files_are_handed_out_at_most_every_diff_every(demo):
    server = await served(CALC_ANSWER, rate=400)
    session = session_for(demo, server)
    clock = Clock()
    sync = FrameSync(session, clock)
    handed: list[float] = []
    try:
        session.start("add type hints")
        seen = 0
        while session.streaming:
            if session.turn.deltas == seen:  # a frame when more of the answer has arrived
                await asyncio.sleep(0.002)
                continue
            seen = session.turn.deltas
            # the frame clock moves per arrival, not with the wall: a loaded machine that
            # sees fewer, bigger arrivals still sees frames 0.03 apart, some held, some handed
            clock.t += 0.03
            f = sync.take()
            if f.dirty and session.streaming:
                handed.append(clock.t)
    finally:
        await session.aclose()
        await server.close()
    assert len(handed) >= 2
    gaps = [b - a for a, b in zip(handed, handed[1:], strict=False)]
    assert min(gaps) >= DIFF_EVERY - 1e-9


async def test_a_redirect_ends_the_first_turn_superseded_and_labels_the_second(demo):
    server = await served([CALC_ANSWER, SUB_ANSWER], faults=Faults(stall_after=STALL, only_first=1))
    session = session_for(demo, server)
    clock = Clock()
    sync = FrameSync(session, clock)
    frames: list[Frame] = []
    try:
        session.start("add type hints")
        while session.turn.deltas < STALL:
            await asyncio.sleep(0.01)
        clock.t += 1
        frames.append(sync.take())
        session.start("do sub instead")  # Enter while it streams: a redirect
        while session.streaming:
            await asyncio.sleep(0.01)
        clock.t += 1
        frames.append(sync.take())
    finally:
        await session.aclose()
        await server.close()
    first, second = session.turns
    ended = [e for f in frames for e in f.ended]
    assert [(e.turn, e.superseded) for e in ended] == [(first, True), (second, False)]
    texts = [(p.text, p.style) for f in frames for p in f.answer]
    assert ("■ interrupted", "dim") in texts
    assert ("↪ redirect do sub instead", "user") in texts
    assert texts.index(("■ interrupted", "dim")) < texts.index(("↪ redirect do sub instead", "user"))
    # the first answer's prose before the redirect, the second's after it
    at = texts.index(("↪ redirect do sub instead", "user"))
    assert ("Now sub, as asked.\n", "md") in texts[at:]
    assert all(t != "Now sub, as asked.\n" for t, _ in texts[:at])


async def test_a_failed_answer_ends_with_its_reason(demo):
    server = await served(CALC_ANSWER, faults=Faults(drop_after=20))
    session = session_for(demo, server)
    sync = FrameSync(session, Clock())
    try:
        session.start("add type hints")
        await session.wait()
        f = sync.take()
    finally:
        await session.aclose()
        await server.close()
    (ended,) = f.ended
    assert ended.failure and "dropped" in ended.failure
    assert f.answer[-1].style == "error" and f.answer[-1].text == f"✗ {ended.failure}"


async def test_a_new_change_set_is_announced_once(demo):
    server = await served([CALC_ANSWER, SUB_ANSWER])
    session = session_for(demo, server)
    sync = FrameSync(session, Clock())
    try:
        session.start("add type hints")
        await session.wait()
        first = sync.take()
        session.review.reject_all()  # everything decided: the next message starts afresh
        session.start("now sub")
        await session.wait()
        second = sync.take()
        third = sync.take()
    finally:
        await session.aclose()
        await server.close()
    assert first.new_change_set is not None
    assert second.new_change_set is session.pending is not first.new_change_set
    assert third.new_change_set is None
    assert ("Now sub, as asked.\n", "md") in [(p.text, p.style) for p in second.answer]
    assert session.pending.hunks and all(h.state == HunkState.PENDING for h in session.pending.hunks)


async def test_an_idle_frame_is_empty(demo):
    server = await served(CALC_ANSWER)
    session = session_for(demo, server)
    sync = FrameSync(session, Clock())
    try:
        f = sync.take(force_status=True)
        assert not f.changed and f.title == "Conversation" and "idle" in f.status
        assert not sync.take().changed and sync.take().status is None  # nothing new to say
    finally:
        await session.aclose()
        await server.close()


def test_every_card_style_is_one_the_pane_draws():
    """card_text's style for any mix of hunk states and errors is a style the conversation
    pane defines (an unknown one would crash the frame)."""
    from itertools import combinations

    from app.core.edits.hunks import Card, Hunk
    from app.ui.widgets.stream_view import STYLES
    from app.view.cards import card_text

    states = list(HunkState)
    for n in (1, 2):
        for combo in combinations(states, n):
            hunks = {i + 1: Hunk(i + 1, "f.py", i * 3, i * 3 + 1, ["a"], ["b"], state=st)
                     for i, st in enumerate(combo)}
            for done in (True, False):
                for error in ("", "not found"):
                    card = Card(0, "f.py", ids=list(hunks), done=done, error=error)
                    text, style = card_text([card], hunks)
                    assert style in STYLES and text.startswith(("✎ f.py", "⚠ f.py"))


def test_an_edit_block_starting_in_the_tail_shows_as_writing_not_as_markup():
    """While the parser holds back the start of a block (it cannot tell prose from an edit
    yet), the conversation says which file is being written, not the raw markup."""
    from app.view.frames import writing

    for cut in range(1, 8):
        tail = "Here it is.\ncalc.py\n```python\n" + "<<<<<<< SEARCH"[:cut + 2]
        assert writing(tail) == "Here it is.\nwriting calc.py…"
    assert writing("Done.\ncalc.py\n```py") == "Done.\nwriting calc.py…"
    assert writing("so\n<<<<<<") == "so\nwriting an edit…"
    for prose in ("plain words", "a `code` span", "x < y and y > z", "* a list item"):
        assert writing(prose) == prose
