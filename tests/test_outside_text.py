"""The one boundary for outside text (app/view/outside_text.py): whatever a file, a name, a
model or an agent holds, what reaches the screen has no character a terminal would obey,
reads as the data with escapes shown, and is never parsed as markup."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st
from invisible_oracle import hidden_at, holds_any

from app.core.text.invisible import found, warning
from app.view.outside_text import escape, has_hidden, name, terminal, to_text, visible

HOSTILE = "t\x1b]2;PWNED\x07 red\x1b[31mX \x1b[2J \x9b31m \u202eevil\u202c \u200bzw \ufeffbom [/] [@click=app.quit]x[/]"
# (a list of one_of, not text(alphabet=one_of(...)): hypothesis merges that alphabet into one
# range of all code points, and the characters listed here would hardly ever be drawn)
text_st = st.lists(st.one_of(st.characters(), st.sampled_from(list(
    "\x1b\x07\x9b\u202e\u2066\u200b\ufeff\ufe0f\ufe0e\t[]/@=\u3164\u115f\uffa0\u034f\u17b4"
    "\u180b\ufe00\U000e0100\u26a0a\n")))).map("".join)


def test_hostile_bytes_become_visible_escapes():
    shown = visible(HOSTILE)
    assert "\x1b" not in shown and "\x07" not in shown and "\x9b" not in shown
    assert "\\x1b]2;PWNED\\x07" in shown and "red\\x1b[31mX" in shown and "\\x9b31m" in shown
    assert "\\u202eevil\\u202c" in shown and "\\u200bzw" in shown and "\\ufeffbom" in shown
    assert "[/] [@click=app.quit]x[/]" in shown  # brackets are text, kept as typed


def test_tabs_expand_in_content_and_show_in_names():
    assert visible("\tx = 1") == "    x = 1" and visible("ab\tc") == "ab  c"
    assert name("a\tb.txt") == "a\\tb.txt"


def test_variation_selectors_are_dropped_from_display_only():
    assert visible("ok \u26a0\ufe0f done") == "ok \u26a0 done"
    assert not has_hidden("plain [text]") and has_hidden("a\ufe0f")


def test_the_terminal_form_dims_each_escape_and_keeps_layout():
    out = terminal("a\x1bb\n\tc\u202e")
    assert out == "a\x1b[2m\\x1b\x1b[22mb\n\tc\x1b[2m\\u202e\x1b[22m"
    assert terminal("clean\n\ttext") == "clean\n\ttext"


@given(text_st)
def test_nothing_a_terminal_obeys_survives(s):
    shown = visible(s)
    assert not holds_any(shown) and "\ufe0f" not in shown and "\ufe0e" not in shown
    assert "\t" not in shown
    t = to_text(s)
    assert t.plain == shown  # the Text is the same characters: no markup was read
    dim = [shown[sp.start:sp.end] for sp in t.spans]
    assert all(d.startswith("\\") for d in dim)
    # every hidden character of the data (Unicode's, tests/invisible_oracle.py) is there, as
    # its escape, in order; so is every character whose width no terminal table agrees on
    # (unassigned, surrogate, skin tone, tag, a combining mark that starts the text)
    escapes = [escape(c) for i, c in enumerate(s) if hidden_at(s, i) or _unsure_width(c)
               or ((i == 0 or s[i - 1] == "\n") and unicodedata.category(c)[0] == "M")]
    assert "".join(dim) == "".join(escapes)


def _unsure_width(c: str) -> bool:
    return (unicodedata.category(c) in ("Cn", "Cs") or 0x1F3FB <= ord(c) <= 0x1F3FF
            or 0xE0000 <= ord(c) <= 0xE007F or any(a <= ord(c) <= b for a, b in WIDTH_CHANGED))


# widths Unicode 16 changed from 1 cell to 2 (terminals built on older tables draw 1)
WIDTH_CHANGED = [(0x2630, 0x2637), (0x268A, 0x268F), (0x4DC0, 0x4DFF), (0x1D300, 0x1D356),
                 (0x1D360, 0x1D376)]


@given(text_st)
def test_the_terminal_form_holds_only_steers_own_sequences(s):
    out = terminal(s)
    rest = out.replace("\x1b[2m", "").replace("\x1b[22m", "")
    assert not holds_any(rest)  # (tab and newline are layout, not hidden)


def test_a_hunk_adding_hidden_characters_is_named():
    assert warning(["x = 1", "if admin:\u202e  # ok"]) == "invisible characters: U+202E"
    assert warning(["plain", "tab\there"]) is None
    assert found("a\u200bb\u200bc\x1b") == ["U+200B", "U+001B"]
