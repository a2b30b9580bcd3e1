"""Variants in the real app (Pilot): F3 sends the typed instruction as three variants that
stream at once from a real loopback server into three tabs; [ and ] switch; a hunk of one
variant and a non-overlapping hunk of another are both accepted; the overlapping one shows as
superseded; = compares; ! runs the check and marks the tabs; Esc stops every variant."""

from __future__ import annotations

from conftest import init_repo, sr
from pilot import SIZE, until

from app.bench.demo import CALC
from app.core.edits.hunks import HunkState
from app.providers.openai_chat import OpenAIChat
from app.server.chat_server import ChatServer
from app.ui.app import SteerApp
from app.ui.dialogs.compare import CompareScreen
from app.ui.panes.review import ReviewPane
from app.ui.widgets.diff_view import DiffView
from app.ui.widgets.line import Line
from app.ui.widgets.prompt import PromptInput

ADD = "def add(a, b):\n    return a + b\n"
SUB = "def sub(a, b):\n    return a - b\n"
MUL = "def mul(a, b):\n    return a * b\n"
V1 = ("Variant one.\n\n" + sr("calc.py", ADD, "def add(a: int, b: int) -> int:\n    return a + b\n")
      + sr("calc.py", MUL, "def mul(a: int, b: int) -> int:\n    return a * b\n"))
V2 = "Variant two.\n\n" + sr("calc.py", ADD, "def add(a: float, b: float) -> float:\n    return a + b\n")
V3 = "Variant three.\n\n" + sr("calc.py", SUB, "def sub(a, b):\n    return a - b  # difference\n")


def make_app(root, server, check=None):
    def ask(n):
        return None, [OpenAIChat(server.base_url, "replay") for _ in range(n - 1)]

    from app.config import Settings

    settings = Settings(check=check) if check else None
    return SteerApp(root, OpenAIChat(server.base_url, "replay"), settings, context=["calc.py"],
                    watch_files=False, blink=False, ask=ask)


def of(app, word):
    """The variant whose answer says `word` (the server hands answers out in arrival order)."""
    return next(i for i, v in enumerate(app.variants.items) if word in v.session.turn.text)


async def test_three_variants_stream_into_tabs_and_combine(tmp_path):
    root = init_repo(tmp_path / "demo", {"calc.py": CALC})
    server = ChatServer(replay=[V1, V2, V3], rate=60)
    await server.start()
    app = make_app(root, server, check="grep -q float calc.py")
    try:
        async with app.run_test(size=SIZE) as pilot:
            prompt = app.query_one(PromptInput)
            for ch in "type it":
                await pilot.press(ch if ch != " " else "space")
            await pilot.press("f3")
            await until(pilot, lambda: len(app.variants.items) == 3)
            tabs = app.query_one("#variant-tabs", Line)
            await until(pilot, lambda: not app.variants.streaming)
            # all three streamed at the same time: every first token came before any end
            turns = [v.session.turn for v in app.variants.items]
            assert max(t.first_token for t in turns) < min(t.ended for t in turns)
            assert prompt.value == "" and app.focused is prompt  # nothing moved the keys
            # typed in the prompt, the variants' keys are text (rule 8)
            for key in ("left_square_bracket", "x", "right_square_bracket", "equals_sign",
                        "exclamation_mark"):
                await pilot.press(key)
            assert prompt.value == "[x]=!" and app.variants.shown == 0
            assert not isinstance(app.screen, CompareScreen) and not app.main.set.checks
            prompt.value = ""
            await pilot.pause(0.2)
            assert tabs.text.count("✓") == 3
            # [ and ] switch what the review shows
            await pilot.press("tab")
            diff = app.query_one(DiffView)
            await until(pilot, lambda: app.focused is diff)
            await pilot.press("right_square_bracket")
            assert app.variants.shown == 1 and "▸[2" in tabs.text
            await pilot.press("left_square_bracket")
            assert app.variants.shown == 0
            # accept variant two's add() ...
            app.variants.show(of(app, "two"))
            await pilot.pause(0.1)
            two = app.variants.session
            await until(pilot, lambda: diff.hunk is not None)
            assert diff.hunk.state == HunkState.PENDING
            await pilot.press("y")
            await until(pilot, lambda: "float" in (root / "calc.py").read_text())
            # ... variant one's add() gave way, its mul() did not
            app.variants.show(of(app, "one"))
            await pilot.pause(0.1)
            one = app.variants.session
            add1 = next(h for h in one.pending.hunks if "def add" in h.new[0])
            mul1 = next(h for h in one.pending.hunks if "def mul" in h.new[0])
            assert add1.state == HunkState.SUPERSEDED and mul1.state == HunkState.PENDING
            app.query_one(ReviewPane).select("calc.py", add1.id)
            await pilot.press("y")  # a superseded hunk cannot be taken ...
            assert add1.state == HunkState.SUPERSEDED
            assert app.focused is diff and app.query_one(PromptInput).value == ""  # ... nor typed
            app.query_one(ReviewPane).select("calc.py", mul1.id)
            await pilot.press("y")
            await until(pilot, lambda: "def mul(a: int" in (root / "calc.py").read_text())
            text = (root / "calc.py").read_text()
            assert "def add(a: float, b: float) -> float:" in text and "def add(a: int" not in text
            assert two is not one
            # = shows each variant's version of the region
            app.query_one(ReviewPane).select("calc.py", add1.id)
            await pilot.press("equals_sign")
            await until(pilot, lambda: isinstance(app.screen, CompareScreen))
            versions = {v.index: [t for t, _ in lines] for v, lines, _ in app.screen.versions}
            what = {v.index: w for v, _, w in app.screen.versions}
            assert what[app.variants.items[of(app, "one")].index] == "superseded"
            assert what[app.variants.items[of(app, "two")].index] == "accepted"
            assert any("def add(a: int, b: int) -> int:" in lines for lines in versions.values())
            assert any("def add(a: float, b: float) -> float:" in lines for lines in versions.values())
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, CompareScreen))
            # ! checks every variant in a throwaway worktree and marks the tabs
            await pilot.press("exclamation_mark")
            await until(pilot, lambda: len(app.main.set.checks) == 3, timeout=30)
            # each variant whole, over the disk as it is now: one's add() writes int again
            passed = {i for i, r in app.main.set.checks.items() if r.passed}
            assert passed == {v.index for v in app.variants.items} - {app.variants.items[of(app, "one")].index}
            await until(pilot, lambda: tabs.text.count("pass") == 2 and "FAIL" in tabs.text)
            cards = app.query_one("#variant-cards").render()
            assert "variant 3" in str(cards) and "check passed" in str(cards)
    finally:
        await server.close()


async def test_esc_stops_every_variant(tmp_path):
    root = init_repo(tmp_path / "demo", {"calc.py": CALC})
    server = ChatServer(replay=[V1 * 20, V2 * 20, V3 * 20], rate=100)
    await server.start()
    app = make_app(root, server)
    try:
        async with app.run_test(size=SIZE) as pilot:
            app.query_one(PromptInput).value = "type it"
            await pilot.press("f3")
            await until(pilot, lambda: len(app.variants.items) == 3
                        and all(v.session.streaming for v in app.variants.items))
            await pilot.press("escape")
            await until(pilot, lambda: not app.variants.streaming)
            assert all(v.session.turn.state == "interrupted" for v in app.variants.items)
    finally:
        await server.close()


async def test_steer_variants_n_sends_every_new_instruction_as_n(tmp_path):
    root = init_repo(tmp_path / "demo", {"calc.py": CALC})
    server = ChatServer(replay=[V1, V2, V3, V1, V2], rate=0)
    await server.start()

    def ask(n):
        return None, [OpenAIChat(server.base_url, "replay") for _ in range(n - 1)]

    from app.config import Settings

    app = SteerApp(root, OpenAIChat(server.base_url, "replay"), Settings(variants=2),
                   context=["calc.py"], watch_files=False, blink=False, ask=ask)
    try:
        async with app.run_test(size=SIZE) as pilot:
            app.query_one(PromptInput).value = "type it"
            await pilot.press("enter")
            await until(pilot, lambda: len(app.variants.items) == 2 and not app.variants.streaming)
            assert len(server.stats.bodies) == 2
            # hunks are open: the next message is a follow-up to both, not a new set
            app.query_one(PromptInput).value = "and sub()"
            await pilot.press("enter")
            await until(pilot, lambda: len(server.stats.bodies) == 4 and not app.variants.streaming)
            assert len(app.variants.items) == 2
            assert all(v.session.turn.kind == "follow-up" for v in app.variants.items)
    finally:
        await server.close()
