"""The conversation pane: prose as Markdown while it streams, edit cards instead of edit
syntax, a card leads to its hunk, the raw text on request."""

from __future__ import annotations

from pilot import SIZE, Rig, ask, reviewing, until
from textual.app import App, ComposeResult

from app.bench.demo import CALC_ANSWER
from app.core.edits.hunks import HunkState
from app.ui.widgets.diff_view import DiffView
from app.ui.widgets.stream_view import StreamView

PROSE = """Here is what changed:

- `add` takes **floats** now
- `div` guards against zero

```python
def div(a: float, b: float) -> float:
    return a / b
```
"""


class Host(App):
    def compose(self) -> ComposeResult:
        yield StreamView(id="s")


def colours(view: StreamView) -> set[str]:
    out = set()
    for y in range(view.size.height):
        for seg in view.render_line(y):
            if seg.style and seg.style.color:
                out.add(str(seg.style.color))
    return out


async def test_prose_renders_as_markdown_while_it_streams():
    app = Host()
    async with app.run_test(size=(60, 30)) as pilot:
        view = app.query_one(StreamView)
        view.add_markdown("Here is what changed:\n")
        view.set_tail("- `add` takes **flo")  # mid-word: shown already, as Markdown
        await pilot.pause()
        lines = [view.render_line(y).text for y in range(view.size.height)]
        assert any(line.startswith(" • add takes") for line in lines)  # a list item already
        view.add_markdown(PROSE.split("\n", 1)[1])  # the rest, final
        await pilot.pause()
        lines = [view.render_line(y).text.rstrip() for y in range(view.size.height)]
        assert " • add takes floats now" in lines and " • div guards against zero" in lines
        assert not any("`" in line or "**" in line for line in lines)  # markup, not markers
        code = next(y for y, line in enumerate(lines) if "def div" in line)
        segs = [s for s in view.render_line(code) if s.text.strip()]
        assert len({str(s.style.color) for s in segs}) >= 3  # highlighted by pygments
        span = next(s for y in range(len(lines)) for s in view.render_line(y) if s.text == "add")
        assert span.style.color is not None  # a code span has its own colour
        # only the open paragraph is drawn again: a finished one keeps its strips
        first = view._blocks[0]
        kept = first.strips
        view.set_tail("more")
        await pilot.pause()
        assert view._blocks[0].strips is kept


async def test_a_long_conversation_lets_go_of_what_is_far_above_and_draws_it_again():
    app = Host()
    async with app.run_test(size=(60, 20)) as pilot:
        view = app.query_one(StreamView)
        for i in range(120):  # a long session: many paragraphs, many screens
            view.write_line(f"› question {i}", "user")
            view.add_markdown(f"Answer {i}: the **function** `f{i}` now checks its input.\n\n")
        await pilot.pause()
        rows = len(view._rows)
        held = [b for b in view._blocks if b.strips is not None]
        assert rows > 300 and len(held) < len(view._blocks) // 3  # most let their strips go
        assert view.text.count("the **function**") == 120  # the text itself is all there
        # scrolled back to the top, the first paragraphs are drawn as they were
        view.action_scroll_by(-10_000)
        await pilot.pause()
        lines = [view.render_line(y).text.rstrip() for y in range(view.size.height)]
        assert "› question 0" in lines and any("Answer 0: the function f0 now" in t for t in lines)
        assert len(view._rows) == rows  # the same rows: heights kept while let go


async def test_a_card_leads_to_its_hunk_by_enter_and_by_click(demo):
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "add type hints")
            await reviewing(pilot)
            diff = app.query_one(DiffView)
            h1, h2, h3 = rig.hunks()
            await pilot.press("j", "j")
            assert diff.hunk is h3
            await pilot.press("ctrl+o")  # to the conversation
            assert app.focused is app.query_one(StreamView)
            await pilot.press("j", "enter")  # the card, then Enter
            await until(pilot, lambda: app.focused is diff)
            assert diff.hunk is h1  # the card's first hunk
            await pilot.press("y")
            await until(pilot, lambda: h1.state == HunkState.ACCEPTED)
            stream = app.query_one(StreamView)
            assert "✎ calc.py  #1✓ #2 #3  +5 −3" in stream.text
            diff.select(h3.id)
            row = next(r for r, (i, _) in enumerate(stream._rows) if stream._blocks[i].kind == "card")
            await pilot.click(StreamView, offset=(3, row - stream._top))
            await until(pilot, lambda: diff.hunk is h1 and app.focused is diff)
