"""The hidden-character set (app/core/text/invisible.py) is Unicode's: every code point the
standard's files name as default-ignorable, format, control or separator is flagged and
shown as an escape, and nothing else is (tests/invisible_oracle.py is typed from those
files, not from the app)."""

from __future__ import annotations

import pytest
from invisible_oracle import BIDI_CONTROL, HIDDEN, LAYOUT, PRESENTATION, hidden_at

from app.core.text import invisible
from app.core.text.invisible import HIDDEN as APP_HIDDEN
from app.core.text.invisible import added, code_points, warning
from app.view.outside_text import escape, visible

EVERY = "".join(map(chr, range(0x110000)))  # in order: each selector follows a hidden one


def test_the_set_is_unicodes_default_ignorable_format_control_and_separators():
    flagged = {m.start() for m in APP_HIDDEN.finditer(EVERY)}
    assert flagged - HIDDEN - PRESENTATION == set(), "flagged, and not in Unicode's lists"
    assert (HIDDEN | PRESENTATION) - flagged == set(), "in Unicode's lists, and not flagged"
    assert not flagged & LAYOUT
    assert invisible.POINTS == HIDDEN
    assert {ord(c) for c in invisible.BIDI} == BIDI_CONTROL


def test_the_table_steer_reads_is_what_the_regex_module_derives_now():
    """invisible_table.py is written by `python -m app.bench.unicode_table`; after a `regex`
    upgrade (a new Unicode) this says to write it again."""
    from app.bench.unicode_table import TABLE, render

    assert TABLE.read_text() == render(), "run python -m app.bench.unicode_table"


def test_no_such_character_lies_outside_the_planes_scanned():
    everywhere = set().union(*code_points(range(17)).values())
    assert everywhere == set().union(*code_points().values())


@pytest.mark.parametrize("ch", ["\u3164", "\u115f", "\u1160", "\uffa0", "\u034f", "\u17b4",
                                "\u17b5", "\u180b", "\u180f", "\u2065", "\ufe00", "\ufff0",
                                "\U000e0100", "\U000e0fff", "\u0600", "\U0001343f"])
def test_the_characters_a_hand_list_missed_are_flagged_and_shown(ch):
    line = f"if user{ch} == admin:"
    assert added(["if user == admin:"], [line]) == f"invisible characters: U+{ord(ch):04X}"
    assert escape(ch) in visible(line) and ch not in visible(line)


def test_an_emojis_presentation_selector_is_not_flagged_and_a_stray_one_is():
    assert warning(['print("\u26a0\ufe0f careful")', "x = '\u2764\ufe0e'"]) is None
    assert visible("\u26a0\ufe0f ok") == "\u26a0 ok"  # dropped from display, as before
    for line, at in (("admin\ufe0f = True", 5), ("\ufe0fx", 0), ("\u26a0\ufe0f\ufe0f", 2),
                     ("a\u200b\ufe0e", 2), ("1\ufe0f\u20e3", 1), ("\u26a0\n\ufe0f", 2)):
        assert [m.start() for m in APP_HIDDEN.finditer(line)] == \
            [i for i in range(len(line)) if hidden_at(line, i)], line
        assert hidden_at(line, at)
        assert f"U+{ord(line[at]):04X}" in (warning([line]) or "")
        assert escape(line[at]) in visible(line, tabs=None)
