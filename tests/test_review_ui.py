"""Trustworthy review: no keystroke decides on a hunk the user did not have on screen, and
drafts and the queue survive every move. Real app, real loopback server, keys at human
speed."""

from __future__ import annotations

import asyncio
import time

from pilot import SIZE, STALL, Rig, ask, disk, until

from app.bench.demo import CALC, CALC_ANSWER
from app.core.diff import OPEN, HunkState
from app.server.chat_server import Faults
from app.ui.diff_view import DiffView
from app.ui.prompt import PromptInput
from app.ui.queue_view import QueueView

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


async def test_letters_just_after_the_review_opened_are_text_not_decisions(demo):
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            diff = app.query_one(DiffView)
            await ask(pilot, "add type hints")
            await until(pilot, lambda: app.session.turn.state == "done" and app.focused is diff)
            assert time.monotonic() < diff.guard_until  # the review just opened by itself
            assert "letters still type" in app.query_one("#keys").plain  # and says so
            await pilot.press("y", "e", "s")
            prompt = app.query_one(PromptInput)
            assert prompt.value == "yes" and app.focused is prompt
            assert all(h.state in OPEN for h in rig.hunks()) and disk(demo) == CALC
            prompt.value = ""
            await pilot.press("tab")  # deliberately to the review: now y is a decision
            assert app.focused is app.query_one(DiffView)
            await pilot.press("y")
            await until(pilot, lambda: rig.hunks()[0].state == HunkState.ACCEPTED)


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
            assert app.focused is diff and app.main.selected == "calc.py"
            await pilot.press("k")  # onto hunk #1, the complete one
            first = rig.hunks()[0]
            assert diff.hunk is first
            title = app.query_one("#diff-title")
            await until(pilot, lambda: "new hunks streaming in README.md" in title.text)
            assert app.main.selected == "calc.py" and diff.hunk is first  # not dragged along
            await until(pilot, lambda: app.session.turn.state == "done")
            assert "streaming" not in title.text
            assert app.main.selected == "calc.py" and diff.hunk is first
            await pilot.press("y")
            await until(pilot, lambda: first.state == HunkState.ACCEPTED)
            assert (demo / "README.md").read_text() == "# Demo\n\nA calculator.\n"


async def test_a_draft_survives_going_to_the_review_and_back(demo):
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            prompt = app.query_one(PromptInput)
            await type_slowly(pilot, "make it", every=0.0)
            await pilot.press("ctrl+r")  # to the review, the draft stays
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
