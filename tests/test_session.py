"""Session: turns, change sets, steering, the queue and the turn's clock, against a real
loopback server speaking Chat Completions."""

from __future__ import annotations

import asyncio

import pytest

from app.bench.demo import CALC, CALC_ANSWER, SUB_ANSWER
from app.core.conversation.session import ContextError, Session
from app.core.disk.workspace import Workspace
from app.core.provider import Capabilities
from app.providers.openai_chat import OpenAIChat
from app.server.chat_server import ChatServer
from app.server.generation import Faults, split_tokens
from app.view.status import turn_figures

STALL = len(split_tokens(CALC_ANSWER[: CALC_ANSWER.index("if b == 0:") + len("if b == 0:\n")]))


@pytest.fixture
async def rig(demo):
    servers: list[ChatServer] = []
    sessions: list[Session] = []

    async def make(answers, fmt="search_replace", provider_cls=OpenAIChat, **kw):
        server = ChatServer(replay=answers, **kw)
        await server.start()
        servers.append(server)
        s = Session(Workspace(demo), provider_cls(server.base_url, "replay"), fmt=fmt,
                    context=["calc.py"])
        sessions.append(s)
        return s, server

    yield make
    for s in sessions:
        await s.aclose()
    for server in servers:
        await server.close()


async def test_an_answer_is_timed_by_one_clock(rig):
    session, _ = await rig(CALC_ANSWER, rate=4000)
    turn = await session.ask("add type hints")
    assert turn.state == "done" and turn.complete
    assert 0 < turn.connect_time <= turn.ttft <= turn.elapsed
    assert turn.tokens == turn.usage.completion == len(split_tokens(CALC_ANSWER))
    # the speed comes from the same stamps (how fast it can go: `steer bench engine`)
    assert turn.tokens_per_s == pytest.approx((turn.deltas - 1) / (turn.elapsed - turn.ttft))
    assert turn.text == CALC_ANSWER


async def test_follow_ups_continue_the_change_set_until_everything_is_decided(rig):
    session, server = await rig([CALC_ANSWER, SUB_ANSWER, SUB_ANSWER])
    first = await session.ask("add type hints")
    pending = session.pending
    assert first.kind == "ask" and len(pending.hunks) == 3
    second = await session.ask("and sub")  # hunks still open: same change set
    assert second.kind == "follow-up" and session.pending is pending
    assert len(pending.hunks) == 4
    body = server.stats.bodies[1]["messages"]
    assert body[-2] == {"role": "assistant", "content": CALC_ANSWER}  # it sees its answer
    session.review.accept([pending.hunks[0].id])
    session.review.reject_all()
    third = await session.ask("again")  # all decided: a new change set on fresh snapshots
    assert third.kind == "ask" and session.pending is not pending
    assert session.pending.bases["calc.py"].lines != CALC.splitlines()  # the accept is the base
    msg = server.stats.bodies[1]["messages"][-1]["content"]
    assert "and sub" in msg
    # the conversation only grows: the new change set is appended after the last request and
    # its answer, with calc.py as the accept left it and the decisions not told yet
    sent = [server.stats.bodies[i]["messages"] for i in range(3)]
    assert sent[2][: len(sent[1]) + 1] == [*sent[1], {"role": "assistant", "content": SUB_ANSWER}]
    new = sent[2][-1]["content"]
    assert len(sent[2]) == len(sent[1]) + 2 and new.endswith("again")
    assert "changed since you last saw them" in new and "\n".join(
        session.pending.bases["calc.py"].lines) in new
    assert "My decisions on your last edits" in new and "rejected (do not propose again)" in new


async def test_redirect_interrupts_and_the_model_hears_where_it_stopped(rig):
    session, server = await rig([CALC_ANSWER, SUB_ANSWER], faults=Faults(stall_after=STALL, only_first=1))
    first = session.start("add type hints")
    while first.deltas < STALL:
        await asyncio.sleep(0.01)
    second = session.start("do sub instead")  # Enter while streaming
    # settled at once, not on a later tick: the UI shows it in the same frame
    assert first.state == "interrupted" and first.finish_reason == "cancelled"
    assert second.kind == "redirect"
    await session.wait()
    assert second.state == "done"
    messages = server.stats.bodies[1]["messages"]
    assert messages[-2] == {"role": "assistant", "content": first.text}
    assert "I interrupted your answer" in messages[-1]["content"]
    # the cut-off hunk stays reviewable, marked incomplete; sub's hunk joins it
    hunks = session.pending.hunks
    assert any(h.incomplete for h in hunks)
    assert ["def sub(a: float, b: float) -> float:"] in [h.new for h in hunks]


async def test_interrupt_stops_now_and_keeps_the_complete_hunks(rig):
    session, _ = await rig(CALC_ANSWER, faults=Faults(stall_after=STALL))
    turn = session.start("add type hints")
    while turn.deltas < STALL:
        await asyncio.sleep(0.01)
    assert session.interrupt()
    assert turn.state == "interrupted" and not session.streaming
    assert not session.interrupt()  # nothing left to stop
    first, second = session.pending.hunks
    assert not first.incomplete and second.incomplete


async def test_the_queue_runs_after_a_complete_answer_only(rig):
    session, server = await rig([CALC_ANSWER, SUB_ANSWER], rate=3000)
    session.start("add type hints")
    session.enqueue("then sub")
    await session.wait()
    assert [t.kind for t in session.turns] == ["ask", "follow-up"]
    assert session.turns[1].instruction == "then sub" and not session.queue
    # after a failure the queue waits: the user decides what happens next
    failing, _ = await rig(CALC_ANSWER, faults=Faults(drop_after=10))
    failing.start("add type hints")
    failing.enqueue("then sub")
    await failing.wait()
    assert len(failing.turns) == 1 and failing.turn.state == "error"
    assert failing.queue == ["then sub"]


WHOLE_CALC = "Here it is.\n\ncalc.py\n```python\n" + CALC.replace(
    "def add(a, b):", "def add(a: int, b: int) -> int:") + "```\n"


async def test_whole_file_requests_send_the_file_as_the_prediction(rig, demo):
    session, server = await rig(WHOLE_CALC, fmt="whole")
    turn = await session.ask("add type hints to add")
    body = server.stats.bodies[-1]
    assert body["prediction"] == {"type": "content",
                                  "content": f"calc.py\n```python\n{CALC.rstrip()}\n```\n"}
    # the server's figures reach the turn: most of the prediction was kept
    u = turn.usage
    assert u.accepted_prediction > 0 and u.rejected_prediction > 0
    assert u.accepted_prediction > 5 * u.rejected_prediction
    assert "predicted" in turn_figures(turn) and f"{u.accepted_prediction}/" in turn_figures(turn)
    # a follow-up, another format, or a back-end without predicted outputs sends none
    await session.ask("now add a docstring")
    assert "prediction" not in server.stats.bodies[-1]
    sr, sr_server = await rig(CALC_ANSWER, fmt="search_replace")
    await sr.ask("add type hints")
    assert "prediction" not in sr_server.stats.bodies[-1]


async def test_a_server_refusing_predictions_gets_the_request_again_without(rig):
    session, server = await rig(WHOLE_CALC, fmt="whole", faults=Faults(refuse_prediction=True))
    turn = await session.ask("add type hints to add")
    assert turn.complete and turn.error is None
    assert ["prediction" in b for b in server.stats.bodies] == [True, False]
    session.review.reject_all()
    await session.ask("again")  # a new change set, whole again: the provider remembers
    assert ["prediction" in b for b in server.stats.bodies] == [True, False, False]
    assert session.provider.predicts is False


async def test_prefill_and_format_come_from_declared_capabilities(rig):
    class Prefilled(OpenAIChat):  # the same wire; a back-end that declares it continues answers
        capabilities = Capabilities(prefill=True, preferred_format="whole", model_class="tiny")

    whole = "def add(a, b):\n    return a + b\n```\n"
    session, server = await rig(whole, fmt="auto", provider_cls=Prefilled)
    turn = await session.ask("shorten it")
    # the measured cost for the declared (tiny) model, not a guess from its name
    assert session.fmt == "whole" and "no format applied exactly" in session.fmt_reason
    assert turn.text.startswith("calc.py\n```python\n")  # the prefill is the answer's start
    assert session.pending.files["calc.py"].proposal() == ["def add(a, b):", "    return a + b"]
    plain, _ = await rig(CALC_ANSWER, fmt="auto")
    t2 = await plain.ask("add type hints")
    assert t2.text == CALC_ANSWER  # no prefill for a back-end that does not declare it


async def test_context_paths_are_checked(rig, demo):
    session, _ = await rig(CALC_ANSWER)
    with pytest.raises(ContextError, match="outside"):
        session.files.add("../elsewhere.py")
    with pytest.raises(ContextError, match="no such file"):
        session.files.add("missing.py")
    assert session.files.add("./README.md") == "README.md"
    assert session.context == ["calc.py", "README.md"]
    session.files.remove("calc.py")
    assert session.context == ["README.md"]
