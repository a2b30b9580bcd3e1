"""Characters that do something other than show themselves, by Unicode's own properties:
terminal controls (Cc: C0, DEL, C1), the format characters (Cf: bidirectional overrides and
isolates, the "Trojan Source" attack, CVE-2021-42574; zero-width characters; tags), the
line and paragraph separators (Zl, Zp), and every Default_Ignorable_Code_Point: what a
renderer draws as nothing, like the Hangul fillers (U+3164, U+115F, U+FFA0), the combining
grapheme joiner (U+034F) and the Khmer inherent vowels (U+17B4-17B5), which are letters or
marks to a parser, so an identifier can hold one unseen. A terminal obeys the first kind,
and the others make code read differently from what it does.

The set is taken from Unicode's data, never typed here: Python's unicodedata has no
Default_Ignorable_Code_Point, so the `regex` module (which carries the property tables)
scans the code points (`code_points`) and `python -m app.bench.unicode_table` writes them,
as ranges, to invisible_table.py, which steer reads at import (importing `regex` and
scanning costs a launch ~50 ms; the table, nothing). The hot path stays one `re` search on
one class (`CLASS`). Tests check the table against what `regex` derives now, and both
against a list typed from the standard's own files (tests/test_invisible_set.py), so a new
Unicode that brings a new invisible character says so.

Variation selectors are default-ignorable and flagged: they select nothing in code, they can
make two identifiers that look the same (`a` and `a` + U+FE00 are different names to Python),
and a run of them carries hidden bytes (U+FE00-FE0F and U+E0100-E01EF spell one byte each).
The exception is U+FE0E/FE0F, the text and emoji presentation selectors, right after a
character that is neither ASCII nor hidden: that is an emoji or a symbol ("⚠️" is U+26A0
U+FE0F), common and harmless in strings, comments and docs, and flagging it would stop
`--accept all` on every answer with a warning sign in it. The view drops such a selector
(terminals disagree on the width it asks for); one anywhere else (after a letter or a digit,
after another selector, at the start) is hidden like the rest, flagged and shown as an escape.

The engine needs to know them to flag a hunk that adds them (as it flags a large deletion);
the view (app/view/outside_text.py) draws each as a visible escape. Tab and newline are not
in the set: they are layout, and every view expands or breaks on them. Nor is a BOM that
starts a file: textfile.py takes it off as the encoding mark it is (anywhere else U+FEFF is
a zero-width no-break space, and hidden).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from app.core.text import invisible_table

# the properties, as the `regex` module names them: default-ignorable, format, the bidi
# controls (all Cf today; named so that one that is not would still count), controls, and
# the line and paragraph separators
PROPERTIES = ("Default_Ignorable_Code_Point", "Cf", "Bidi_Control", "Cc", "Zl", "Zp")
# every code point with one of them lies in the BMP, plane 1 or plane 14 (planes 2-3 hold
# CJK ideographs, 4-13 nothing yet, 15-16 private use); tests/test_invisible_set.py scans all
# seventeen to keep that true. Three planes cost a few milliseconds at import, seventeen 50.
PLANES = (0, 1, 14)
LAYOUT = "\t\n"
SELECTORS = "\ufe0e\ufe0f"  # text and emoji presentation

def _plane(n: int) -> str:
    """Every code point of plane `n`, in order, as one string (lone surrogates included),
    built as UTF-32 bytes: a join of 65,536 chr() calls costs ten times more."""
    low, high = bytes(range(256)) * 256, bytes(b for b in range(256) for _ in range(256))
    raw = bytearray(0x40000)
    raw[0::4], raw[1::4], raw[2::4] = low, high, bytes([n]) * 0x10000
    return raw.decode("utf-32-le", "surrogatepass")


def code_points(planes: Iterable[int] = PLANES) -> dict[str, set[int]]:
    """The code points of `planes` that have each of PROPERTIES (Unicode's data, through
    the `regex` module). One property a scan: a class of all six costs ten times as much."""
    import regex

    found: dict[str, set[int]] = {prop: set() for prop in PROPERTIES}
    for n in planes:
        text, base = _plane(n), n << 16
        for prop, points in found.items():
            for m in regex.finditer(rf"\p{{{prop}}}+", text):
                points.update(range(base + m.start(), base + m.end()))
    return found


def _as_class(points: Iterable[int]) -> str:
    """Code points as the inside of a regex class of ranges, escaped (\\U0000200b-...)."""
    out: list[str] = []
    run: list[int] = []
    for cp in sorted(points):
        if run and cp == run[1] + 1:
            run[1] = cp
            continue
        if run:
            out.append(_span(*run))
        run = [cp, cp]
    if run:
        out.append(_span(*run))
    return "".join(out)


def _span(a: int, b: int) -> str:
    return f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}"


def ranges(points: Iterable[int]) -> tuple[tuple[int, int], ...]:
    """Code points as sorted, inclusive (first, last) runs."""
    out: list[list[int]] = []
    for cp in sorted(points):
        if out and cp == out[-1][1] + 1:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return tuple((a, b) for a, b in out)


def _points(runs: Iterable[tuple[int, int]]) -> frozenset[int]:
    return frozenset(cp for a, b in runs for cp in range(a, b + 1))


POINTS = _points(invisible_table.HIDDEN) - {ord(c) for c in LAYOUT + SELECTORS}
# as a regex class: the hidden characters but the presentation selectors (the view handles
# those: outside_text.py); app/view/outside_text.py builds its escapes on it
CLASS = _as_class(POINTS)
# a hidden character, or a presentation selector that does not follow a visible non-ASCII
# character (the lookbehind runs only where the class matched: clean text costs one search)
HIDDEN = re.compile(f"[{CLASS}{SELECTORS}](?<![^\\x00-\\x7f{CLASS}{SELECTORS}][{SELECTORS}])")
BIDI = frozenset(chr(cp) for cp in _points(invisible_table.BIDI))


def code_point(ch: str) -> str:
    return f"U+{ord(ch):04X}"


def found(text: str) -> list[str]:
    """The distinct hidden characters in `text`, as "U+202E", in order of first appearance."""
    seen: dict[str, None] = {}
    for m in HIDDEN.finditer(text):
        seen.setdefault(code_point(m.group()), None)
    return list(seen)


def warning(added: list[str]) -> str | None:
    """The flag for a hunk whose added lines hold hidden characters, naming them; None when
    there are none."""
    points: dict[str, None] = {}
    for line in added:
        if HIDDEN.search(line):
            for p in found(line):
                points.setdefault(p, None)
    return _flag(list(points))


def added(old: list[str], new: list[str]) -> str | None:
    """The flag for a hunk that replaces `old` by `new`: the hidden characters `new` holds
    more of than `old` does, named; None when it adds none. Counting per character keeps a
    line that was edited around an invisible character it already had out of the flag, and
    still flags one more of it."""
    if not any(HIDDEN.search(t) for t in new):
        return None
    had = Counter(m.group() for t in old for m in HIDDEN.finditer(t))
    points: dict[str, None] = {}
    for t in new:
        for m in HIDDEN.finditer(t):
            ch = m.group()
            if had[ch] > 0:
                had[ch] -= 1
            else:
                points.setdefault(code_point(ch), None)
    return _flag(list(points))


def _flag(names: list[str]) -> str | None:
    if not names:
        return None
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    return f"invisible characters: {shown}"
