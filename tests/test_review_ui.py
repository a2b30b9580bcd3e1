"""Trustworthy review: no keystroke decides on a hunk the user did not have on screen, and
drafts and the queue survive every move. Real app, real loopback server, keys at human
speed."""

from __future__ import annotations

import asyncio

from pilot import SIZE, STALL, Rig, ask, disk, reviewing, until

from app.bench.demo import CALC, CALC_ANSWER
from app.core.edits.hunks import OPEN, HunkState
from app.server.generation import Faults
from app.ui.widgets.diff_view import DiffView
from app.ui.widgets.prompt import PromptInput
from app.ui.widgets.queue_view import QueueView

SENTENCE = "Add a test. And a doc."


async def type_slowly(pilot, text: str, every: float = 0.06) -> None:
    for ch in text:
        await pilot.press(ch if ch != " " else "space")
        await asyncio.sleep(every)


async def test_typing_while_an_answer_ends_keeps_every_letter_in_the_prompt(demo):
    # the answer stalls, then ends while the user types a follow-up at human speed
    faults = Faults(stall_after=STALL, stall_seconds=0.4)
    async with Rig(demo, CALC_ANSWER, faults=faults) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await until(pilot, lambda: app.session.turn.deltas >= STALL)
            await type_slowly(pilot, SENTENCE)  # the answer ends somewhere in here
            await until(pilot, lambda: app.session.turn.state == "done")
            await pilot.pause(0.2)
            prompt = app.query_one(PromptInput)
            assert prompt.value == SENTENCE and app.focused is prompt
            assert all(h.state in OPEN for h in rig.hunks())  # the "A" of "And" accepted nothing
            assert disk(demo) == CALC


async def test_an_answer_ending_moves_no_key_and_tab_then_y_accepts_exactly_one_hunk(demo):
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            prompt = app.query_one(PromptInput)
            await ask(pilot, "add type hints")
            await until(pilot, lambda: app.session.turn.state == "done")
            await pilot.pause(0.3)
            assert app.focused is prompt  # the answer ended: the keys stayed where they were
            bar = app.query_one("#keys").plain
            assert "✎ typing" in bar and "3 hunks to review: Tab" in bar, bar  # and it says so
            await until(pilot, lambda: "3 hunks to review: Tab" in app.query_one("#stream-title").text)
            await pilot.press("y", "e", "s")
            assert prompt.value == "yes" and app.focused is prompt
            assert "3 hunks to review: Ctrl+D" in app.query_one("#keys").plain  # Tab would send it
            assert all(h.state in OPEN for h in rig.hunks()) and disk(demo) == CALC
            prompt.value = ""
            await pilot.press("tab")  # deliberately to the review: now y is a decision
            assert app.focused is app.query_one(DiffView)
            assert "◆ reviewing" in app.query_one("#keys").plain
            await pilot.press("y")
            await until(pilot, lambda: rig.hunks()[0].state == HunkState.ACCEPTED)
            await pilot.pause(0.2)
            assert [h.state for h in rig.hunks()] == [HunkState.ACCEPTED, HunkState.PENDING,
                                                      HunkState.PENDING]  # exactly one
            await pilot.press("tab")  # and back to typing
            assert app.focused is prompt
            assert "2 hunks to review: Tab" in app.query_one("#keys").plain


async def test_ctrl_d_goes_to_the_review_from_a_draft_and_keeps_it(demo):
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            prompt = app.query_one(PromptInput)
            await ask(pilot, "add type hints")
            await until(pilot, lambda: app.session.turn.state == "done")
            await type_slowly(pilot, "Now also", every=0.0)
            prompt.cursor_position = 3  # Ctrl+D is no longer the prompt's delete-right
            await pilot.press("ctrl+d")
            assert app.focused is app.query_one(DiffView) and prompt.value == "Now also"
            assert all(h.state in OPEN for h in rig.hunks())
            del rig


TWO_FILES = CALC_ANSWER.replace("The division now fails loudly instead of returning inf.\n", "") + '''
README.md
```markdown
<<<<<<< SEARCH
A calculator.
=======
A calculator with type hints.
>>>>>>> REPLACE
```
'''


async def test_the_review_stays_put_while_the_stream_moves_to_another_file(demo):
    # the answer pauses inside calc.py's second block, then goes on into README.md
    async with Rig(demo, TWO_FILES, rate=100, faults=Faults(stall_after=STALL, stall_seconds=1.0),
                   context=("calc.py", "README.md")) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "type hints and say so")
            await until(pilot, lambda: len(rig.hunks()) == 2 and app.session.turn.deltas >= STALL)
            diff = app.query_one(DiffView)
            await pilot.press("tab")  # to the review while it streams
            assert app.focused is diff and app.main.review.selected == "calc.py"
            await pilot.press("k")  # onto hunk #1, the complete one
            first = rig.hunks()[0]
            assert diff.hunk is first
            title = app.query_one("#diff-title")
            await until(pilot, lambda: "new hunks streaming in README.md" in title.text)
            assert app.main.review.selected == "calc.py" and diff.hunk is first  # not dragged along
            await until(pilot, lambda: app.session.turn.state == "done")
            assert "streaming" not in title.text
            assert app.main.review.selected == "calc.py" and diff.hunk is first
            await pilot.press("y")
            await until(pilot, lambda: first.state == HunkState.ACCEPTED)
            assert (demo / "README.md").read_text() == "# Demo\n\nA calculator.\n"


async def test_a_draft_survives_going_to_the_review_and_back(demo):
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            prompt = app.query_one(PromptInput)
            await type_slowly(pilot, "make it", every=0.0)
            await pilot.press("ctrl+d")  # to the review, the draft stays
            assert app.focused is app.query_one(DiffView)
            await pilot.press("tab")
            assert app.focused is prompt and prompt.cursor_position == len("make it")
            assert prompt.selection.is_empty  # nothing selected: the next key appends
            await type_slowly(pilot, " faster", every=0.0)
            assert prompt.value == "make it faster"
            del rig


async def test_editing_a_queued_message_keeps_its_place(demo):
    async with Rig(demo, CALC_ANSWER, faults=Faults(stall_after=STALL)) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await until(pilot, lambda: app.session.streaming and app.session.turn.deltas >= STALL)
            prompt = app.query_one(PromptInput)
            for text in ("first", "second", "third"):
                prompt.value = text
                await pilot.press("tab")
            assert app.session.queue == ["first", "second", "third"]
            await pilot.press("ctrl+l")  # the documented key to the queue
            queue = app.query_one(QueueView)
            assert app.focused is queue
            await pilot.press("down", "enter")  # Enter edits the selected one at once
            assert app.focused is prompt and prompt.value == "second"
            assert prompt.cursor_position == len("second") and prompt.selection.is_empty
            await type_slowly(pilot, " more", every=0.0)
            await pilot.press("enter")  # saves it, in its place (no redirect)
            assert app.session.queue == ["first", "second more", "third"]
            assert app.session.streaming and len(app.session.turns) == 1
            await pilot.press("ctrl+l")
            await pilot.press("escape")  # Esc in the queue leaves it; the model goes on
            assert app.session.streaming and app.focused is prompt
            del rig


def screen_text(app) -> str:
    """What the terminal shows now (the compositor's picture, stale lines included)."""
    from rich.console import Console

    console = Console(width=SIZE[0], height=SIZE[1], record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(app.screen._compositor)
    return console.export_text()


async def test_choosing_another_file_never_leaves_the_last_ones_lines_on_screen(demo):
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            await pilot.press("j", "j")  # down the file: the view scrolls
            await pilot.pause(0.1)
            assert "ZeroDivisionError" in screen_text(app)
            tree = app.query_one("#tree")
            tree.focus()
            tree.move_cursor(tree.root.children[0])  # README.md
            await pilot.press("enter")
            await until(pilot, lambda: app.main.review.selected == "README.md")
            await pilot.pause(0.1)
            shown = screen_text(app)
            assert "No pending changes for README.md" in shown
            assert "ZeroDivisionError" not in shown and "def add(" not in shown
            del rig


async def test_a_new_theme_colours_the_code_at_once(demo):
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            diff = app.query_one(DiffView)
            assert diff.syntax == "monokai"
            await pilot.press("t")  # steer-light: its own syntax style, in the same frame
            await pilot.pause(0.1)
            assert app.theme == "steer-light" and diff.syntax == "friendly"
            del rig


async def test_labels_say_what_was_written(demo):
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            await pilot.press("j")
            h2 = rig.hunks()[1]  # -def div(a, b): / +3 lines
            # only "+    if b == 0:" picked: it leaves the file unparsable, so a first y says
            # so and a second takes it
            await pilot.press("v", "j", "j", "space", "y")
            await pilot.pause(0.2)
            assert h2.state == HunkState.PENDING
            await pilot.press("y")
            await until(pilot, lambda: h2.state == HunkState.ACCEPTED)
            assert h2.note == "partly accepted: +1 −0 of +3 −1"
            assert "+1 −0 of +3 −1" in screen_text(app)
            del rig


REFUSED = CALC_ANSWER + '''
calc.py
```python
<<<<<<< SEARCH
def pow(a, b):
    return a ** b
=======
def pow(a: float, b: float) -> float:
    return a ** b
>>>>>>> REPLACE
```

helpers.py
```python
<<<<<<< SEARCH
def helper():
=======
def helper() -> None:
>>>>>>> REPLACE
```
'''


async def test_a_refused_edit_is_shown_and_can_be_retried_and_no_file_is_made_up(demo):
    async with Rig(demo, [REFUSED, "Sorry, there is no pow in calc.py.\n"]) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            assert not app.query_one("#tree").has("helpers.py")  # only named, never created
            status = app.query_one("#status").text
            assert "2 edits refused (r retries)" in status
            await pilot.press("r")
            await until(pilot, lambda: len(rig.server.stats.bodies) == 2)
            sent = rig.server.stats.bodies[1]["messages"][-1]["content"]
            assert "could not be applied" in sent and "helpers.py" in sent
            assert "calc.py\n```python\n" in sent  # the file as it is now, to get it right
            await until(pilot, lambda: app.session.turn.state == "done")
            assert app.session.turn.kind == "follow-up"


async def test_quitting_with_open_hunks_asks_first(demo):
    from app.ui.dialogs.questions import ConfirmScreen

    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            await pilot.press("ctrl+q")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            assert "3 hunks are still open" in app.screen.question
            await pilot.press("n")
            await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
            assert app.is_running and app.session.pending.hunks
            await pilot.press("ctrl+q", "y")
            await until(pilot, lambda: not app.is_running)
            del rig


async def test_the_status_counts_a_decision_at_once_while_the_answer_streams(demo):
    async with Rig(demo, CALC_ANSWER, faults=Faults(stall_after=STALL)) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await until(pilot, lambda: len(rig.hunks()) == 2 and app.session.turn.deltas >= STALL)
            status = app.query_one("#status")
            await until(pilot, lambda: "2 hunks: 1 open, 1 streaming" in status.text)
            await pilot.press("tab", "k", "y")
            await until(pilot, lambda: rig.hunks()[0].state == HunkState.ACCEPTED)
            await pilot.pause(0.05)
            assert "2 hunks: 0 open, 1 streaming, 1 accepted" in status.text  # not a second later


TABS = "def f():\n\tif True:\n\t\treturn 1\t# one\n\treturn 2\n"
TAB_ANSWER = ("f.py\n```python\n<<<<<<< SEARCH\n\t\treturn 1\t# one\n=======\n\t\treturn 10\t# ten\n"
              ">>>>>>> REPLACE\n```\n")
LONG = "x = compute(" + ", ".join(f"arg{i}" for i in range(40)) + ")\n"
LONG_ANSWER = ("f.py\n```python\n<<<<<<< SEARCH\n" + LONG + "=======\n"
               + LONG.replace("arg39)", "arg39, extra=True)") + ">>>>>>> REPLACE\n```\n")


async def test_tabs_expand_alike_everywhere_and_long_lines_show_their_change(tmp_path):
    from conftest import init_repo

    root = init_repo(tmp_path / "t", {"f.py": TABS + LONG})
    async with Rig(root, [TAB_ANSWER + "\n" + LONG_ANSWER], context=("f.py",)) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "edit")
            await reviewing(pilot)
            shown = screen_text(app)
            assert "\t" not in shown
            assert "-         return 1    # one" in shown  # 4-column stops, as in the file
            assert "+         return 10   # ten" in shown
            await pilot.press("j")  # the long line's hunk: its change is far right
            await pilot.pause(0.1)
            shown = screen_text(app)
            assert "extra=True" in shown and "…" in shown  # scrolled to the change, marked
            await pilot.press("home")
            await pilot.pause(0.1)
            assert "x = compute(" in screen_text(app)
            await pilot.press("s")  # side by side: each half stays in its half
            await pilot.pause(0.1)
            for line in screen_text(app).splitlines():
                assert len(line) <= SIZE[0]
            del rig


async def test_undo_in_the_app_reaches_an_accept_made_before_it_started(demo):
    from conftest import stream

    from app.core.disk.workspace import Workspace
    from app.core.review.review import Review

    ws = Workspace(demo)
    Review(ws, stream(ws, CALC_ANSWER, context=["calc.py"])).accept_all()  # like `steer run`
    assert disk(demo) != CALC
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.main.availability.can_undo)
            await pilot.press("tab", "u")
            await until(pilot, lambda: disk(demo) == CALC)
            del rig
