"""The conversation only grows (DESIGN rule 10): decisions, reasons, rejections and files
changed on disk are appended, never spliced into earlier messages, so every request
continues the last one. Checked on the wire (what a real `steer serve` on 127.0.0.1
received) over the persistent WebSocket (previous_response_id) and Chat Completions SSE (the
same byte prefix), through the real Session, for a scripted 20-turn session; and the two
exceptions (a rewind, a file taken out of the context) say so in the answer's title."""

from __future__ import annotations

import asyncio
import json

import pytest
from conftest import init_repo

from app.bench.transport import continuations, scripted_repo, scripted_session, slot_answer
from app.core.conversation import resume
from app.core.conversation.session import Session
from app.core.disk.workspace import Workspace
from app.core.storage.store import SessionStore
from app.providers.openai_chat import OpenAIChat
from app.providers.openai_responses import OpenAIResponses
from app.providers.responses_wire import from_input
from app.server.chat_server import ChatServer
from app.view.status import answer_title

LONG = "word " * 4000


async def _serve(answers: list[str], **kw: object) -> ChatServer:
    server = ChatServer(replay=answers, **kw)  # type: ignore[arg-type]
    await server.start()
    return server


def _provider(name: str, server: ChatServer) -> OpenAIChat | OpenAIResponses:
    if name == "websocket":
        return OpenAIResponses(server.base_url, "replay", stall_timeout=10, connect_timeout=5)
    return OpenAIChat(server.base_url, "replay")


def _bytes(messages: list[dict]) -> str:
    return json.dumps([{"role": m["role"], "content": m["content"]} for m in messages],
                      ensure_ascii=False)


@pytest.mark.parametrize("transport", ["websocket", "chat_sse"])
async def test_twenty_scripted_turns_each_continue_the_last_on_the_wire(tmp_path, transport):
    turns = 20
    server = await _serve([slot_answer(n) for n in range(turns)])
    try:
        ws = scripted_repo(init_repo(tmp_path / "repo"))
        answers = await scripted_session(ws, _provider(transport, server), turns)
        bodies = list(server.stats.bodies)
        kept = list(server.responses.kept)
    finally:
        await server.close()
    assert len(bodies) == turns  # one request a turn: nothing was resent in full after a miss
    assert continuations(bodies, answers, kept if transport == "websocket" else None) == \
        [True] * (turns - 1)
    # byte-prefix growth, rebuilt independently of the bench's helper
    convs = []
    for i, body in enumerate(bodies):
        if transport == "chat_sse":
            conv = body["messages"]
        else:
            assert (i == 0) == ("previous_response_id" not in body)
            if i:  # only the new items go out, after the response the server kept last
                assert body["previous_response_id"] == kept[i - 1]
                assert len(body["input"]) <= 4 and body["instructions"] == bodies[0]["instructions"]
                conv = [*convs[-1], {"role": "assistant", "content": answers[i - 1]}]
            else:
                conv = [{"role": "system", "content": body["instructions"]}]
            conv = conv + from_input(body["input"])
        if i:
            before = _bytes([*convs[-1], {"role": "assistant", "content": answers[i - 1]}])
            assert _bytes(conv).startswith(before[:-1]) and len(conv) > len(convs[-1]) + 1
            assert not conv[-1]["content"].startswith("Earlier in this session")
        convs.append(conv)
    everything = _bytes(convs[-1])
    # what changed on disk outside steer reached the model, appended when it changed
    assert "- note 2" in everything and "# end 2" in everything
    # the reasons of rejections were told, each once
    assert everything.count("(reason: name it g3, not f)") == 1
    assert "(reason: not now)" in everything


async def test_after_a_reject_all_the_next_question_continues_the_response(tmp_path):
    """The case of the issue: a reject-all, then a new question. It used to go out in full,
    the rejections first, without previous_response_id."""
    server = await _serve([slot_answer(0), slot_answer(1)])
    try:
        ws = scripted_repo(init_repo(tmp_path / "repo"))
        s = Session(ws, _provider("websocket", server), fmt="search_replace",
                    context=["slots.py"])
        await s.ask("add f0 and f1")
        s.review.reject_all("wrong names")
        second = await s.ask("add f2 and f3")
        await s.aclose()
        bodies = server.stats.bodies
        kept = list(server.responses.kept)
    finally:
        await server.close()
    assert second.kind == "ask" and second.complete
    assert bodies[1]["previous_response_id"] == kept[0]
    new = bodies[1]["input"]
    assert [m["role"] for m in new] == ["user"]  # the question only: nothing before it again
    assert new[0]["content"].startswith("My decisions on your last edits:")
    assert "(reason: wrong names)" in new[0]["content"]
    assert "slots.py" not in new[0]["content"].split("\n")[0]  # unchanged: not shown again
    assert "changed since you last saw them" not in new[0]["content"]
    assert s.sent.full == ""


async def test_the_request_after_an_esc_continues_the_last_completed_response(tmp_path):
    """Esc closes the busy socket; the next request goes out on the spare one and still
    continues the server's last response, with the cut answer as a new item."""
    server = await _serve([slot_answer(0), LONG, slot_answer(1)], rate=2000)
    try:
        ws = scripted_repo(init_repo(tmp_path / "repo"))
        p = _provider("websocket", server)
        s = Session(ws, p, fmt="search_replace", context=["slots.py"])
        await s.ask("add f0 and f1")
        cut = s.start("annotate everything")  # hunks open: a follow-up
        while cut.deltas < 20:
            await asyncio.sleep(0.01)
        s.interrupt()
        await s.wait()
        third = await s.ask("now just f2 and f3")
        await s.aclose()
        bodies = server.stats.bodies
        kept = list(server.responses.kept)
    finally:
        await server.close()
    assert cut.state == "interrupted" and third.complete
    assert bodies[2]["previous_response_id"] == kept[0]  # the cut one was never kept
    roles = [(m["role"], m["content"]) for m in bodies[2]["input"]]
    assert roles[0][0] == "user" and roles[0][1].endswith("annotate everything")
    assert roles[1] == ("assistant", cut.text) and roles[2][1].endswith("now just f2 and f3")


async def test_a_rewind_goes_on_from_the_earlier_turn_and_the_title_says_sent_in_full(tmp_path):
    root = init_repo(tmp_path / "repo")
    server = await _serve([slot_answer(0), slot_answer(1), slot_answer(2)])
    try:
        ws = scripted_repo(root)
        s = Session(ws, _provider("websocket", server), fmt="search_replace",
                    context=["slots.py"])
        resume.start(s, SessionStore(root))
        await s.ask("add f0 and f1")
        s.review.accept_all()
        second = await s.ask("add f2 and f3")
        assert "sent in full" not in answer_title(second, s)
        s.review.reject_all()
        resume.rewind_conversation(s, 1)  # back to before the second question
        third = await s.ask("add f4 and f5 instead")
        await s.aclose()
        bodies = server.stats.bodies
    finally:
        await server.close()
    assert "sent in full (rewound to before turn 2)" in answer_title(third, s)
    assert "previous_response_id" not in bodies[2]  # the server's last is not its prefix
    contents = [m["content"] for m in bodies[2]["input"]]
    assert len(contents) == 3 and contents[-1].endswith("add f4 and f5 instead")
    assert not any("add f2 and f3" in c for c in contents)  # the rewound turn is gone


async def test_a_file_taken_out_of_the_context_starts_afresh_and_says_why(tmp_path):
    server = await _serve([slot_answer(0), slot_answer(1)])
    try:
        ws = scripted_repo(init_repo(tmp_path / "repo"))
        s = Session(ws, OpenAIChat(server.base_url, "replay"), fmt="search_replace",
                    context=["slots.py", "notes.md"])
        await s.ask("add f0 and f1")
        s.review.reject_all("no")
        s.files.remove("notes.md")
        second = await s.ask("add f2 and f3")
        await s.aclose()
        bodies = server.stats.bodies
    finally:
        await server.close()
    assert "sent in full (notes.md left the context)" in answer_title(second, s)
    sent = bodies[1]["messages"]
    assert len(sent) == 2 and "# Notes" not in sent[1]["content"]  # the model stops seeing it
    assert "Earlier in this session I rejected" in sent[1]["content"]  # rejections kept


async def test_a_resumed_session_goes_on_with_the_same_prefix_and_shows_only_what_changed(tmp_path):
    root = init_repo(tmp_path / "repo")
    store = SessionStore(root)
    server = await _serve([slot_answer(0), slot_answer(1), slot_answer(2)])
    try:
        ws = scripted_repo(root)
        a = Session(ws, OpenAIChat(server.base_url, "replay"), fmt="search_replace",
                    context=["slots.py", "notes.md"])
        resume.start(a, store)
        await a.ask("add f0 and f1")
        a.review.accept_all()
        await a.ask("add f2 and f3")
        a.review.reject_all("later")
        answer = a.turn.text
        await a.aclose()
        (root / "notes.md").write_text("# Notes\n- edited while steer was closed\n")
        b = Session(Workspace(root), OpenAIChat(server.base_url, "replay"), fmt="search_replace")
        resume.resume(b, store)
        await b.ask("add f4 and f5")
        await b.aclose()
        bodies = server.stats.bodies
    finally:
        await server.close()
    before = [*bodies[1]["messages"], {"role": "assistant", "content": answer}]
    assert bodies[2]["messages"][: len(before)] == before
    new = bodies[2]["messages"][-1]["content"]
    assert "edited while steer was closed" in new  # changed since the model saw it
    assert "# slot 5\n" not in new  # slots.py as the model last saw it: not sent again
    assert "(reason: later)" in new


def test_the_continuation_check_catches_a_spliced_request():
    """The bench's reader of the wire: a request that edits an earlier message, or skips the
    answer, does not count as continuing."""
    a = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q1"}]}
    good = {"messages": [*a["messages"], {"role": "assistant", "content": "r1"},
                         {"role": "user", "content": "q2"}]}
    spliced = {"messages": [a["messages"][0], {"role": "user", "content": "note\n\nq1"},
                            {"role": "assistant", "content": "r1"}, {"role": "user", "content": "q2"}]}
    assert continuations([a, good], ["r1", "r2"]) == [True]
    assert continuations([a, spliced], ["r1", "r2"]) == [False]
    assert continuations([a, good], ["r1 edited", "r2"]) == [False]
    ws_a = {"instructions": "s", "input": [{"type": "message", "role": "user", "content": "q1"}]}
    ws_b = {"instructions": "s", "previous_response_id": "resp_2",
            "input": [{"type": "message", "role": "user", "content": "q2"}]}
    assert continuations([ws_a, ws_b], ["r1", "r2"], ["resp_1", "resp_2"]) == [False]
    assert continuations([ws_a, {**ws_b, "previous_response_id": "resp_1"}], ["r1", "r2"],
                         ["resp_1", "resp_2"]) == [True]



async def test_a_conversation_that_would_outgrow_the_window_starts_afresh_and_says_why(tmp_path):
    server = await _serve([slot_answer(0), slot_answer(1), slot_answer(2)])
    try:
        ws = scripted_repo(init_repo(tmp_path / "repo"))
        p = OpenAIChat(server.base_url, "replay")
        s = Session(ws, p, fmt="search_replace", context=["slots.py"])
        first = s.budget("add f0 and f1").used
        p.context_window = int(first * 1.6)  # the first fits (75% of the window), two do not
        await s.ask("add f0 and f1")
        s.review.accept_all()
        second = await s.ask("add f2 and f3")
        await s.aclose()
        bodies = server.stats.bodies
    finally:
        await server.close()
    assert "sent in full (the conversation outgrew the model's context window)" in \
        answer_title(second, s)
    assert len(bodies[1]["messages"]) == 2  # afresh: the system prompt and the question
    assert "def f0():" in bodies[1]["messages"][1]["content"]  # slots.py as it is now


async def test_a_resumed_session_continues_the_servers_last_response_over_the_websocket(tmp_path):
    """A session resumed in a new process (a new provider, no socket, nothing in memory)
    still continues the response the server keeps: its id is saved with the answer."""
    root = init_repo(tmp_path / "repo")
    store = SessionStore(root)
    server = await _serve([slot_answer(0), slot_answer(1), slot_answer(2)])
    try:
        ws = scripted_repo(root)
        a = Session(ws, _provider("websocket", server), fmt="search_replace",
                    context=["slots.py"])
        resume.start(a, store)
        await a.ask("add f0 and f1")
        a.review.accept_all()
        await a.ask("add f2 and f3")
        a.review.reject_all("later")
        await a.aclose()
        b = Session(Workspace(root), _provider("websocket", server), fmt="search_replace")
        resume.resume(b, store)
        third = await b.ask("add f4 and f5")
        await b.aclose()
        bodies = server.stats.bodies
        kept = list(server.responses.kept)
    finally:
        await server.close()
    assert third.complete and len(bodies) == 3
    assert bodies[2]["previous_response_id"] == kept[1]
    assert [m["role"] for m in bodies[2]["input"]] == ["user"]
    assert "(reason: later)" in bodies[2]["input"][0]["content"]
    assert "sent in full" not in answer_title(third, b)
