"""The stream pane's soft wrap: every character exactly once, rows within the width, and
breaks after spaces where a row has one."""

from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len

from app.view.wrap import wrap_spans as _wrap


@given(st.text(alphabet="ab  c\u00e9\u4e2d\t.", max_size=80), st.integers(1, 16))
def test_rows_cover_the_line_once_and_fit(line, width):
    line = line.expandtabs(4)
    spans = _wrap(line, width)
    assert spans[0][0] == 0 and spans[-1][1] == len(line)
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert end == start
    for start, end in spans:
        assert start < end or len(line) == 0
        # only the spaces a row ends with may run past the width (cropped when drawn)
        kept = line[start:end].rstrip(" ")
        assert cell_len(kept) <= width or len(kept) == 1  # a wide character alone may not fit


@given(st.lists(st.text(alphabet="abcdé", min_size=1, max_size=6), min_size=1, max_size=12),
       st.integers(6, 20))
def test_words_are_not_split_when_they_fit(words, width):
    line = " ".join(words)
    for _start, end in _wrap(line, width)[:-1]:
        # a row ends at a word boundary (after a space)
        assert line[end - 1] == " "


def test_a_word_longer_than_the_row_is_cut():
    assert _wrap("abcdefghij klm", 4) == [(0, 4), (4, 8), (8, 11), (11, 14)]
