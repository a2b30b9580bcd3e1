"""80×24 (issue 17): every pane stays reachable. The tree folds behind its toggle instead of
vanishing, the key bar keeps Help and Quit, and the status line drops whole parts instead of
cutting a word at the edge."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from pilot import Rig, ask, reviewing, until

from app.bench.demo import CALC_ANSWER
from app.core.edits.hunks import HunkState
from app.providers.openai_chat import OpenAIChat
from app.ui.app import SteerApp
from app.ui.widgets.diff_view import DiffView
from app.ui.widgets.file_tree import FileTree
from app.ui.widgets.key_bar import KeyBar, _Entry
from app.ui.widgets.key_bar import fit as fit_keys
from app.ui.widgets.line import Line
from app.ui.widgets.prompt import PromptInput
from app.view.status import SEP, Part, StatusLine, fit

SMALL = (80, 24)
LONG = "Qwen/Qwen3-Coder-30B-A3B-Instruct-GGUF:Q4_K_M"


def whole_parts(line: Line) -> None:
    """What the line draws is made of its parts, whole, in order (and maybe a last "…")."""
    text = line.text
    assert isinstance(text, StatusLine)
    shown = line.shown
    assert len(shown) <= line.content_region.width, shown
    pieces = shown.split(SEP)
    if pieces[-1] == "…":
        pieces.pop()
    parts = [p.text for p in text.parts]
    assert pieces and all(p in parts for p in pieces), (shown, parts)
    assert [parts.index(p) for p in pieces] == sorted(parts.index(p) for p in pieces)


async def test_at_80x24_the_tree_folds_behind_its_toggle(demo):
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=SMALL) as pilot:
            await until(pilot, lambda: "calc.py" in app.main.files_pane.files)
            tree, prompt = app.query_one(FileTree), app.query_one(PromptInput)
            keys = app.query_one(KeyBar).plain
            assert tree.region.width == 0  # folded away...
            assert "^t Files" in keys and "Help" in keys and "Quit" in keys  # ...behind a key
            await pilot.press("ctrl+t")
            await pilot.pause()
            assert tree.region.width > 0 and app.focused is tree  # shown, and the keys go there
            assert app.query_one(KeyBar).plain.startswith(" ▤ files")
            await pilot.press("down", "c")  # it works as a tree: c adds the file to the context
            await until(pilot, lambda: "calc.py" in app.session.context
                        or "README.md" in app.session.context)
            await pilot.press("ctrl+t")
            await pilot.pause()
            assert tree.region.width == 0 and app.focused is prompt  # hidden: keys back to typing
            await pilot.press("ctrl+f")  # going to the files shows them too
            await pilot.pause()
            assert tree.region.width > 0 and app.focused is tree


async def test_at_80x24_the_key_bar_keeps_help_and_quit_and_the_status_whole_parts(demo):
    async with Rig(demo, CALC_ANSWER) as rig:
        # a long model name, as real ones are: the status line cannot show everything
        rig.app = app = SteerApp(demo, OpenAIChat(rig.server.base_url, LONG), context=["calc.py"],
                                 watch_files=False, blink=False)
        async with app.run_test(size=SMALL) as pilot:
            status = app.query_one("#status", Line)
            whole_parts(status)
            assert status.shown != status.text  # too long for 80 columns: whole parts went
            assert status.shown.endswith("idle: type an instruction below")
            await ask(pilot, "add type hints and guard div against zero")
            await reviewing(pilot)
            diff = app.query_one(DiffView)
            assert app.focused is diff
            bar = app.query_one(KeyBar)
            await until(pilot, lambda: bar.plain.startswith(" ◆ reviewing"))
            # reviewing offers a dozen keys; the bar keeps what fits, Help and Quit always
            assert "y Accept" in bar.plain and "n Reject" in bar.plain
            assert "f1 Help" in bar.plain and "^q Quit" in bar.plain
            assert len(bar.plain) <= 80
            whole_parts(status)
            whole_parts(app.query_one("#stream-title", Line))
            # the tree shown on purpose: it takes the conversation's place, and the diff keeps
            # its width (at 22 columns it was unreadable)
            await pilot.press("ctrl+t")
            await pilot.pause()
            title = app.query_one("#diff-title", Line)
            assert title.shown == "Pending diff · calc.py"
            assert not app.query_one("#side").display and diff.size.width >= 50
            whole_parts(title)
            await pilot.press("ctrl+t")
            await pilot.pause()
            assert app.focused is diff  # the keys went back to the review
            await pilot.press("tab", "ctrl+t", "ctrl+t")  # from the prompt, there and back
            await pilot.pause()
            assert app.focused is app.query_one(PromptInput)  # not to the review: where it was
            await pilot.press("tab")
            await pilot.press("y")
            await until(pilot, lambda: rig.hunks()[0].state == HunkState.ACCEPTED)
            await pilot.pause(0.2)
            whole_parts(status)
            assert "1 accepted" in status.shown  # what matters stays


async def test_wide_screens_keep_the_tree_and_the_key_bar_as_it_was(demo):
    async with Rig(demo, CALC_ANSWER) as rig:
        app = rig.app
        async with app.run_test(size=(160, 48)) as pilot:
            tree = app.query_one(FileTree)
            assert tree.region.width > 0
            assert "Files" not in app.query_one(KeyBar).plain  # the tree is there to see
            await pilot.press("ctrl+t")  # hidden on purpose: now the bar says how to get it back
            await pilot.pause()
            assert tree.region.width == 0 and "^t Files" in app.query_one(KeyBar).plain
            await pilot.press("ctrl+t")
            await pilot.pause()
            assert tree.region.width > 0


def test_the_key_bar_drops_the_highest_rank_first_and_never_help_or_quit():
    def e(label: str, rank: int) -> _Entry:
        return _Entry("k", label, None, label, rank)

    entries = [e("Next", 2), e("Accept", 1), e("View", 3), e("Help", 0), e("Quit", 0), e("Stage", 3)]
    assert [x.label for x in fit_keys(entries, 200)] == [x.label for x in entries]
    assert [x.label for x in fit_keys(entries, 32)] == ["Next", "Accept", "Help", "Quit"]
    assert [x.label for x in fit_keys(entries, 31)] == ["Accept", "Help", "Quit"]
    assert [x.label for x in fit_keys(entries, 5)] == ["Help", "Quit"]


words = st.text(alphabet="abcdefghij:,", min_size=1, max_size=12)
parts_st = st.lists(st.builds(Part, st.lists(words, min_size=1, max_size=5).map(" ".join),
                              st.integers(0, 3)), min_size=1, max_size=7)


@given(parts_st, st.integers(1, 120))
def test_a_fitted_status_line_is_whole_parts_or_whole_words(parts, width):
    text = fit(parts, width)
    assert len(text) <= max(width, 1)
    pieces = text.split(SEP)
    if pieces[-1] == "…":
        pieces.pop()
    texts = [p.text for p in parts]
    if all(p in texts for p in pieces):
        return  # whole parts, in their order
    # one part left, still too wide: cut after a whole word (before a space, or before the
    # "," or ":" that ended the word), mid-word only when a single word fills the width
    assert len(pieces) == 1 and text.endswith("…"), (text, texts)
    head = text[:-1]
    assert any(p.startswith(head) and (p == head or p[len(head)] in " ,:" or
                                       (" " not in head and len(head) == width - 1))
               for p in texts), (text, texts)
