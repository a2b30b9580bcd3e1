"""The key bar follows every condition of the action table (app/ui/actions.py `State`), the
moment it changes and whoever changes it: the answer, a decision, the cursor, git opening,
a worker, another variant on screen. Each condition is flipped by driving the real app into
that state (a real git repository, a real loopback server, a real agent) and the bar is read
as it is drawn; nothing in a test asks for a refresh."""

from __future__ import annotations

import threading

import pytest
from conftest import init_repo, sr
from pilot import STALL, Rig, ask, reviewing, until
from test_acp import SRC, script

from app.bench.demo import CALC, CALC_ANSWER
from app.core.edits.hunks import OPEN, HunkState
from app.core.git.sync import Sync
from app.providers.acp import AcpAgent
from app.providers.openai_chat import OpenAIChat
from app.server.chat_server import ChatServer
from app.server.generation import Faults
from app.ui import actions, availability
from app.ui.app import SteerApp
from app.ui.dialogs.permission import PermissionScreen
from app.ui.widgets.diff_view import DiffView
from app.ui.widgets.key_bar import KeyBar
from app.ui.widgets.prompt import PromptInput
from app.ui.widgets.queue_view import QueueView

WIDE = (260, 48)  # room for every key: a narrower bar drops some (app/ui/widgets/key_bar.py)


def bar(app) -> str:
    return app.query_one(KeyBar).plain


async def listed(pilot, *entries: str, shown: bool = True) -> None:
    """Until the key bar lists every entry (or none of them); the bar's text on a hang."""
    app = pilot.app
    try:
        await until(pilot, lambda: all((e in bar(app)) == shown for e in entries), timeout=30)
    except AssertionError:
        raise AssertionError(f"{'missing' if shown else 'still listed'}: {entries} in "
                             f"{bar(app)!r}") from None


@pytest.fixture
def git_held(monkeypatch):
    """The repository opens when the test lets it, as on a slow disk or a huge repository:
    the user reviews before git has answered. The real Sync opens, only later."""
    gate = threading.Event()
    opened = Sync.open.__func__  # type: ignore[attr-defined]

    def held(cls, *args, **kw):
        gate.wait(60)  # the hang guard: a test that never lets go fails, it does not hang
        return opened(cls, *args, **kw)

    monkeypatch.setattr(Sync, "open", classmethod(held))
    yield gate
    gate.set()


def test_the_conditions_are_the_state_protocols_and_the_table_reads_no_other():
    assert set(actions.CONDITIONS) == {
        "streaming", "has_variants", "hunk_open", "any_open", "can_undo", "has_queue",
        "hunk_conflict", "any_accepted", "in_git", "any_refused", "failed", "asking",
        "line_mode", "named", "can_redo_rewind", "can_check", "check_failed", "checks"}
    read: list[str] = []

    class Reads:
        def __getattr__(self, name: str) -> bool:
            read.append(name)
            return True

    for when in actions.WHEN.values():
        when(Reads())  # type: ignore[arg-type]
    assert set(read) <= set(actions.CONDITIONS)
    assert {a.when for a in actions.ACTIONS if a.when} <= set(actions.WHEN)


async def test_no_condition_changes_without_the_bindings_hearing_of_it(demo):
    """Every condition is read from an owner on screen, and a change of it reaches the key
    bar: core's are compared each frame, every other one is a reactive of the widget that
    owns it and refreshes the bindings itself. A condition routed to no owner, or owned by a
    widget without telling the bindings, fails here."""
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            main = app.main
            assert set(availability.OWNER) == set(actions.CONDITIONS)
            assert {n for n, slot in availability.OWNER.items() if slot == "core"} == set(actions.CORE)
            heard: list[object] = []
            main.bindings_updated_signal.subscribe(main, heard.append, immediate=True)
            for name in actions.CONDITIONS:
                owner = getattr(main.availability, availability.OWNER[name])
                assert owner is not None, f"{name}: its owner is not on screen"
                was = getattr(owner, name)
                assert getattr(main.availability, name) == was
                if name in actions.CORE:
                    continue
                heard.clear()
                setattr(owner, name, ["calc.py"] if name == "named" else not was)
                assert heard, f"{name} changed and the bindings did not hear of it"
                setattr(owner, name, was)


async def test_decisions_and_git_arriving_each_change_the_bar(demo, git_held):
    async with Rig(demo, CALC_ANSWER, watch=True) as rig:
        app = rig.app
        async with app.run_test(size=WIDE) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            # hunk_open, any_open: the hunk under the cursor and the file can be decided
            await listed(pilot, "y Accept", "n Reject", "Y Accept file", "A Accept all",
                         "v Lines", "e Edit")
            # git has not answered yet: nothing to commit or stage, nothing to undo
            await listed(pilot, "C Commit", "S Stage", "u Undo", shown=False)
            await pilot.press("y")
            await until(pilot, lambda: rig.hunks()[0].state == HunkState.ACCEPTED)
            await listed(pilot, "u Undo")  # can_undo
            await listed(pilot, "S Stage", shown=False)  # accepted, but no git yet
            git_held.set()  # in_git, and with it any_accepted: git arrived, nothing else did
            await listed(pilot, "C Commit", "S Stage")
            # every hunk decided: nothing under the cursor or in the file to decide
            await pilot.press("A")
            await until(pilot, lambda: not any(h.state in OPEN for h in rig.hunks()))
            await listed(pilot, "y Accept", "Y Accept file", "A Accept all", shown=False)
            # undo every accept: nothing accepted (S goes), nothing left to undo (u goes)
            await pilot.press("u")
            await until(pilot, lambda: rig.hunks()[1].state in OPEN)
            await listed(pilot, "y Accept", "A Accept all")
            await pilot.press("u")
            await until(pilot, lambda: all(h.state in OPEN for h in rig.hunks()))
            await listed(pilot, "S Stage", "u Undo", shown=False)
            await listed(pilot, "C Commit")


async def test_the_file_vs_head_view_offers_no_key_that_decides_a_hunk(demo):
    async with Rig(demo, CALC_ANSWER, watch=True) as rig:
        app = rig.app
        async with app.run_test(size=WIDE) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            await until(pilot, lambda: app.main.live.in_git)
            await pilot.press("y")  # now the working tree differs from HEAD
            await until(pilot, lambda: rig.hunks()[0].state == HunkState.ACCEPTED)
            await listed(pilot, "y Accept", "n Reject", "v Lines", "e Edit", "d View")
            await pilot.press("d")  # a view to read, not to decide in: at once...
            await listed(pilot, "y Accept", "n Reject", "v Lines", "e Edit", shown=False)
            diff = app.query_one(DiffView)
            await until(pilot, lambda: diff.fd is None)
            # ... and once git's rows are up (a worker brings them)
            await listed(pilot, "y Accept", "n Reject", "v Lines", "e Edit", shown=False)
            await listed(pilot, "A Accept all", "d View")  # what stays: the whole answer, the view
            await pilot.press("d", "d")  # the index, then the pending diff again
            await until(pilot, lambda: diff.fd is not None)
            await pilot.press("j")  # (it opens at the file's first hunk, accepted: on to an open one)
            await listed(pilot, "y Accept", "n Reject", "v Lines", "e Edit")


async def test_an_edit_on_disk_under_the_cursor_brings_keep_mine_and_take_theirs(demo):
    async with Rig(demo, CALC_ANSWER, watch=True) as rig:
        app = rig.app
        async with app.run_test(size=WIDE) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            await until(pilot, lambda: app.main.live.watching)
            h2 = rig.hunks()[1]
            await pilot.press("j")
            diff = app.query_one(DiffView)
            await until(pilot, lambda: diff.hunk is h2)
            await listed(pilot, "m Keep mine", "T Take theirs", shown=False)
            text = (demo / "calc.py").read_text()
            (demo / "calc.py").write_text(text.replace("def div(a, b):", "def div(a, b):  # mine"))
            await until(pilot, lambda: h2.state == HunkState.CONFLICT)
            await listed(pilot, "m Keep mine", "T Take theirs")  # hunk_conflict
            await pilot.press("m")
            await until(pilot, lambda: h2.state == HunkState.REJECTED)
            await listed(pilot, "m Keep mine", "T Take theirs", shown=False)


async def test_streaming_and_the_queue_change_the_bar(demo):
    # the first answer stalls half-way until Esc; the follow-up is answered whole
    faults = Faults(stall_after=STALL, only_first=1)
    async with Rig(demo, [CALC_ANSWER, "Done.\n"], faults=faults) as rig:
        app = rig.app
        async with app.run_test(size=WIDE) as pilot:
            await listed(pilot, "Stop", shown=False)
            await ask(pilot, "add type hints")
            await until(pilot, lambda: app.session.turn.deltas >= STALL)
            await listed(pilot, "esc Stop")  # streaming
            prompt = app.query_one(PromptInput)
            prompt.value = "and a docstring"
            await pilot.press("tab")  # queued as a follow-up
            await until(pilot, lambda: app.session.queue)
            # has_queue: its keys are not in the bar (Ctrl+L is unlisted, Clear queue is the
            # palette's), so the palette is where it shows
            assert "Clear queue" in palette(app)
            await pilot.press("escape")
            await listed(pilot, "esc Stop", shown=False)
            await pilot.press("ctrl+l")
            await until(pilot, lambda: isinstance(app.focused, QueueView))
            await pilot.press("d")  # drop the follow-up
            await until(pilot, lambda: not app.session.queue)
            assert "Clear queue" not in palette(app)
            assert rig.server.stats.bodies and len(rig.server.stats.bodies) == 1


def palette(app) -> list[str]:
    return [a.palette for a, _run in app.main.palette_actions()]


async def test_a_request_that_failed_offers_its_retry_until_it_is_resent(demo):
    faults = Faults(status=401, fail_first=1)
    async with Rig(demo, CALC_ANSWER, faults=faults) as rig:
        app = rig.app
        async with app.run_test(size=WIDE) as pilot:
            await ask(pilot, "add type hints")
            await until(pilot, lambda: app.session.failed is not None)
            await listed(pilot, "f5 Retry")  # failed
            await pilot.press("f5")
            await until(pilot, lambda: app.session.turn.state == "done")
            await listed(pilot, "f5 Retry", shown=False)
            assert len(rig.server.stats.bodies) == 2


V_ADD = "One.\n\n" + sr("calc.py", "def add(a, b):\n", "def add(a: int, b: int):\n")
V_BOTH = V_ADD + sr("calc.py", "def pow(a, b):\n", "def pow(a: int, b: int):\n")


async def test_variants_and_a_refused_edit_change_the_bar_as_the_shown_variant_changes(tmp_path):
    root = init_repo(tmp_path / "demo", {"calc.py": CALC})
    # variant 1 proposes a hunk and an edit that cannot apply; variant 2 the same hunk only
    server = ChatServer(replay=[V_BOTH, V_ADD])
    await server.start()

    def siblings(n):
        return None, [OpenAIChat(server.base_url, "replay") for _ in range(n - 1)]

    app = SteerApp(root, OpenAIChat(server.base_url, "replay"), context=["calc.py"],
                   watch_files=False, blink=False, ask=siblings)
    app.main.default_variants = 2
    try:
        async with app.run_test(size=WIDE) as pilot:
            await pilot.press("ctrl+d")
            await listed(pilot, "◆ reviewing")
            await listed(pilot, "] Next variant", "= Compare", shown=False)
            await pilot.press("tab")
            prompt = app.query_one(PromptInput)
            await until(pilot, lambda: app.focused is prompt)
            prompt.value = "type it"
            await pilot.press("f3")
            await until(pilot, lambda: len(app.variants.items) == 2)
            await until(pilot, lambda: not app.variants.streaming)
            await pilot.press("tab")  # (typed in the prompt, [ ] = are text: unlisted there)
            await until(pilot, lambda: isinstance(app.focused, DiffView))
            await listed(pilot, "] Next variant", "= Compare")  # has_variants
            refused = [i for i, v in enumerate(app.variants.items) if v.session.refused]
            assert len(refused) == 1  # one variant's edit could not be applied
            if app.variants.shown != refused[0]:
                await pilot.press("right_square_bracket")
            await listed(pilot, "r Retry refused")  # any_refused, on the variant shown
            await pilot.press("right_square_bracket")  # the other: nothing refused there
            await listed(pilot, "r Retry refused", shown=False)
            await listed(pilot, "y Accept")
            await pilot.press("right_square_bracket")
            await listed(pilot, "r Retry refused")
    finally:
        await server.close()


async def test_an_agents_question_is_listed_until_it_is_answered(tmp_path):
    repo = init_repo(tmp_path / "r", {"f.txt": SRC})
    options = [["once", "Allow once", "allow_once"], ["no", "Reject", "reject_once"]]
    cmd = script(tmp_path, [
        {"permission": {"id": "p1", "title": "Run make test", "kind": "execute", "options": options}},
        {"say": "Ran it."}])
    app = SteerApp(repo, AcpAgent(cmd, str(repo)), watch_files=False, blink=False)
    async with app.run_test(size=WIDE) as pilot:
        await ask(pilot, "run the tests")
        await until(pilot, lambda: app.session.agent.permissions, timeout=30)
        await listed(pilot, "Answer the agent")  # asking
        await pilot.press("ctrl+g")
        await until(pilot, lambda: isinstance(app.screen, PermissionScreen))
        await pilot.press("1")
        await until(pilot, lambda: not app.session.agent.permissions, timeout=30)
        await listed(pilot, "Answer the agent", shown=False)
