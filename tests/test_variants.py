"""Parallel variants in the engine: three answers to one instruction from a real loopback
server, each in its own change set; hunks taken from two of them combine, an overlapping one
is superseded until the accept it gave way to is undone, and the next message tells the
model what was taken from which variant."""

from __future__ import annotations

import asyncio

import pytest
from conftest import sr

from app.bench.demo import CALC
from app.core.conversation.session import Session
from app.core.disk.workspace import Workspace
from app.core.edits.hunks import HunkState
from app.core.variants.group import Variants, VariantsRefused, summary, version
from app.providers.openai_chat import OpenAIChat
from app.server.chat_server import ChatServer

ADD = "def add(a, b):\n    return a + b\n"
SUB = "def sub(a, b):\n    return a - b\n"
MUL = "def mul(a, b):\n    return a * b\n"
DIV = "def div(a, b):\n    return a / b\n"

V1 = ("Variant one.\n\n" + sr("calc.py", ADD, "def add(a: int, b: int) -> int:\n    return a + b\n")
      + sr("calc.py", MUL, "def mul(a: int, b: int) -> int:\n    return a * b\n"))
V2 = ("Variant two.\n\n" + sr("calc.py", ADD, "def add(a: float, b: float) -> float:\n    return a + b\n")
      + sr("calc.py", DIV, "def div(a, b):\n    if b == 0:\n        raise ZeroDivisionError\n    return a / b\n"))
V3 = "Variant three.\n\n" + sr("calc.py", SUB, "def sub(a, b):\n    return a - b  # difference\n")
NEXT = "Done.\n"


@pytest.fixture
async def trio(demo):
    server = ChatServer(replay=[V1, V2, V3, NEXT], rate=3000)
    await server.start()
    ws = Workspace(demo)
    main = Session(ws, OpenAIChat(server.base_url, "replay"), fmt="search_replace",
                   context=["calc.py"])
    variants = Variants(main)
    yield variants, server, demo
    await variants.aclose()
    await server.close()


def by_text(variants: Variants) -> dict[str, Session]:
    """Which session got which answer (the server hands them out in arrival order)."""
    out = {}
    for v in variants.items:
        text = v.session.turn.text
        out["one" if "one" in text else "two" if "two" in text else "three"] = v.session
    return out


def hunk(session: Session, needle: str):
    return next(h for h in session.pending.hunks if any(needle in t for t in h.new))


async def test_three_variants_combine_supersede_and_undo(trio):
    variants, server, demo = trio
    siblings = [OpenAIChat(server.base_url, "replay") for _ in range(2)]
    turns = variants.ask("type the calculator", siblings)
    assert len(turns) == 3 and len(variants.items) == 3
    await variants.wait()
    assert all(t.complete for t in turns)
    s = by_text(variants)
    assert set(s) == {"one", "two", "three"}
    # each variant its own change set, on the same file
    assert len({id(v.session.pending) for v in variants.items}) == 3

    # take variant 2's add(): variant 1's add() overlaps it, its mul() does not
    add2 = hunk(s["two"], "float")
    out = s["two"].review.accept([add2.id])
    assert out.accepted == [add2.id]
    add1, mul1 = hunk(s["one"], "a: int, b: int) -> int:\n"[:14]), hunk(s["one"], "def mul(a: int")
    assert add1.state == HunkState.SUPERSEDED and "variant" in add1.note
    assert mul1.state == HunkState.PENDING
    # a superseded hunk cannot be taken, even on purpose
    assert s["one"].review.accept([add1.id]).accepted == []
    assert add1.state == HunkState.SUPERSEDED

    # a non-overlapping hunk of variant 1 and one of variant 3 combine with it
    assert s["one"].review.accept([mul1.id]).accepted == [mul1.id]
    sub3 = hunk(s["three"], "difference")
    assert s["three"].review.accept([sub3.id]).accepted == [sub3.id]
    text = (demo / "calc.py").read_text()
    assert "def add(a: float, b: float) -> float:" in text
    assert "def mul(a: int, b: int) -> int:" in text
    assert "return a - b  # difference" in text
    assert "def add(a: int" not in text

    # undo goes back in the set's order: variant 3's accept first, then 1's, then 2's
    await variants.undo()
    assert "# difference" not in (demo / "calc.py").read_text()
    assert sub3.state == HunkState.PENDING
    await variants.undo()
    await variants.undo()
    assert (demo / "calc.py").read_text() == CALC
    # the accept it gave way to is undone: variant 1's add() is a plain hunk again
    add1 = hunk(s["one"], "def add(a: int")
    assert add1.state == HunkState.PENDING and add1.ancestor is None
    assert add1.old == ["def add(a, b):"]
    assert s["one"].review.accept([add1.id]).accepted == [add1.id]
    assert "def add(a: int, b: int) -> int:" in (demo / "calc.py").read_text()
    # and now variant 2's add() is the superseded one
    assert hunk(s["two"], "float").state == HunkState.SUPERSEDED


async def test_the_next_message_tells_what_was_taken_from_which_variant(trio):
    variants, server, demo = trio
    variants.ask("type the calculator", [OpenAIChat(server.base_url, "replay") for _ in range(2)])
    await variants.wait()
    s = by_text(variants)
    s["two"].review.accept([hunk(s["two"], "float").id])
    for v in variants.items:  # everything else turned down: the set is over
        v.session.review.reject_all()
    variants.start("now add docstrings")
    assert not variants.active and variants.session is variants.main
    await variants.wait()
    sent = server.stats.bodies[-1]["messages"][-1]["content"]
    assert "answered as 3 variants" in sent
    main_index = next(v.index for v in [*variants.items])
    assert main_index == 1
    assert "variant 2" in sent and "variant 2 (openai-chat:replay): 1 hunk: calc.py line 4" in sent


async def test_open_hunks_send_the_next_message_to_every_variant(trio):
    variants, server, demo = trio
    variants.ask("type the calculator", [OpenAIChat(server.base_url, "replay") for _ in range(2)])
    await variants.wait()
    before = len(server.stats.bodies)
    variants.start("also keep the comments")  # hunks are open: a follow-up to each variant
    await variants.wait()
    assert variants.active and len(server.stats.bodies) == before + 3


async def test_variants_are_refused_with_a_reason(trio):
    variants, server, demo = trio
    with pytest.raises(VariantsRefused, match="1 to 8"):
        variants.ask("x", [OpenAIChat(server.base_url, "replay") for _ in range(8)])
    variants.main.start("type it")
    with pytest.raises(VariantsRefused, match="streaming"):
        variants.ask("x", [OpenAIChat(server.base_url, "replay")])
    await variants.wait()
    with pytest.raises(VariantsRefused, match="open hunks"):
        variants.ask("x", [OpenAIChat(server.base_url, "replay")])


async def test_compare_and_summary(trio):
    variants, server, demo = trio
    variants.ask("type the calculator", [OpenAIChat(server.base_url, "replay") for _ in range(2)])
    await variants.wait()
    s = by_text(variants)
    variants.show(next(i for i, v in enumerate(variants.items) if v.session is s["one"]))
    add1 = hunk(s["one"], "def add(a: int")
    region = dict((v.session, [t for t, _ in lines]) for v, lines, _ in variants.region("calc.py", add1))
    assert "def add(a: int, b: int) -> int:" in region[s["one"]]
    assert "def add(a: float, b: float) -> float:" in region[s["two"]]
    assert "def add(a, b):" in region[s["three"]]  # variant 3 leaves add() as it is
    assert version(s["three"].pending.files["calc.py"], 3, 5, 0)[0] == ("def add(a, b):", False)
    assert ("def add(a: int, b: int) -> int:", True) in version(s["one"].pending.files["calc.py"], 3, 5, 0)
    rows = [summary(v) for v in variants.items]
    assert [r["variant"] for r in rows] == [1, 2, 3]
    assert all(r["state"] == "done" and r["tokens"] > 0 and r["hunks"] >= 1 for r in rows)


async def test_a_redirect_goes_to_every_variant_and_esc_stops_them_all(demo):
    long = [V1 * 30, V2 * 30, V3 * 30, NEXT, NEXT, NEXT]
    server = ChatServer(replay=long, rate=200)
    await server.start()
    ws = Workspace(demo)
    variants = Variants(Session(ws, OpenAIChat(server.base_url, "replay"), fmt="search_replace",
                                context=["calc.py"]))
    try:
        variants.ask("type it", [OpenAIChat(server.base_url, "replay") for _ in range(2)])
        while not all(v.session.turn.first_token for v in variants.items):
            await asyncio.sleep(0.01)
        variants.start("only add(), please")  # mid-stream: a redirect of each
        assert [v.session.turn.kind for v in variants.items] == ["redirect"] * 3
        await variants.wait()
        assert len(server.stats.bodies) == 6
        assert all("only add(), please" in b["messages"][-1]["content"] for b in server.stats.bodies[3:])
        # and Esc stops every one of them
        variants.start("again, slower")
        assert variants.interrupt()
        assert not variants.streaming
        assert all(v.session.turn.state == "interrupted" for v in variants.items)
    finally:
        await variants.aclose()
        await server.close()
