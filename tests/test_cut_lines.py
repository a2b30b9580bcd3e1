"""No line steer draws ends in half a word (issue 30): `clip` (any one line of text, styled
or not) and `fit` (a line of parts) cut after a whole word or drop whole parts, at any width,
for any text; and the line builders' output, fitted at every width from 20 to 200 cells,
holds only whole words of what they built."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style

from app.core.conversation.turn import Turn
from app.view.status import Part, StatusLine, answer_title, clip, clip_segments, fit

WORD = st.text(st.sampled_from("abcxyz09_-:/.()⚠✓日本é"), min_size=1, max_size=12)
TEXT = st.lists(WORD, min_size=1, max_size=12).map(" ".join)


def whole_words(shown: str, full: str) -> bool:
    """Every word of `shown` (a trailing "…" taken off) is a word of `full`, in order, the
    last one too: nothing was cut inside a word (unless one word alone is wider than the
    line, which is then cut where the line ends)."""
    body = shown[:-1] if shown.endswith("…") and not full.endswith("…") else shown
    words, full_words = body.split(), full.split()
    if not words:
        return True
    if len(full_words) >= 1 and len(words) == 1 and not full.startswith(words[0] + " ") \
            and words[0] != full_words[0]:
        return full_words[0].startswith(words[0])  # the first word alone: cut at the edge
    return words == full_words[:len(words)] or (
        words[:-1] == full_words[:len(words) - 1]
        and words[-1] == full_words[len(words) - 1].rstrip(" ·,:;"))  # its punctuation may go


@given(TEXT, st.integers(0, 200))
def test_clip_fits_and_cuts_after_a_whole_word(text, width):
    shown = clip(text, width)
    assert cell_len(shown) <= max(width, 0)
    if cell_len(text) <= width:
        assert shown == text
    elif width == 0:
        assert shown == ""
    else:
        assert shown.endswith("…")
        assert whole_words(shown, text), (shown, text)


@given(st.lists(st.tuples(TEXT, st.sampled_from([None, Style(bold=True), Style(dim=True)])),
                min_size=1, max_size=4), st.integers(1, 120))
def test_styled_runs_are_cut_as_their_text_is(runs, width):
    segs = [Segment(t, s) for t, s in runs]
    plain = "".join(t for t, _ in runs)
    cut = clip_segments(segs, width)
    assert "".join(seg.text for seg in cut) == clip(plain, width)


@given(st.lists(st.tuples(TEXT, st.integers(0, 5)), min_size=1, max_size=6), st.integers(1, 200))
def test_a_line_of_parts_drops_whole_parts(parts, width):
    ps = [Part(t, r) for t, r in parts]
    shown = fit(ps, width)
    assert cell_len(shown) <= width
    assert whole_parts(shown, ps), (shown, ps)


def whole_parts(shown: str, parts: list[Part]) -> bool:
    """Every part shown is a whole part, but the last, which may be cut after a word."""
    kept = [p for p in shown.removesuffix(" · …").removesuffix("…").split(" · ") if p]
    texts = [p.text for p in parts]
    if not all(k in texts for k in kept[:-1]):
        return False
    return not kept or kept[-1] in texts or any(
        whole_words(kept[-1] + "…", t) for t in texts)


def _turn(state: str, tokens: int, elapsed: float) -> Turn:
    t = Turn("add type hints to every function", "ask")
    t.state, t.deltas = state, tokens
    t.started, t.ended = 0.0, elapsed
    t.first_token = elapsed / 10 if tokens else None
    return t


@given(st.sampled_from(["connecting", "streaming", "done", "interrupted"]),
       st.integers(0, 10**6), st.floats(0, 5000))
def test_the_conversation_title_fits_every_width_by_whole_parts_and_keeps_the_figures(
        state, tokens, elapsed):
    title = answer_title(_turn(state, tokens, elapsed))
    assert isinstance(title, StatusLine)
    for width in range(20, 201):
        shown = title.fit(width)
        assert cell_len(shown) <= width
        assert whole_parts(shown, list(title.parts)), (width, shown)
    # wide enough for the head, the state and the live figures: they are kept
    live = [p.text for p in title.parts if p.rank <= 2]
    if sum(cell_len(t) + 3 for t in live) <= 60:
        shown = title.fit(60)
        assert all(t in shown for t in live), shown
