"""Characters that do something other than show themselves: terminal controls (C0, DEL, C1),
bidirectional overrides and isolates (the "Trojan Source" attack, CVE-2021-42574), and
zero-width or separator characters. A terminal obeys the first kind, and the others make
code read differently from what it does.

The engine needs to know them to flag a hunk that adds them (as it flags a large deletion);
the view (app/view/outside_text.py) draws each as a visible escape. Tab and newline are not
in the set: they are layout, and every view expands or breaks on them.
"""

from __future__ import annotations

import re
from collections import Counter

# as a regex class: C0 but tab and newline; DEL and C1; the bidi marks, embeddings,
# overrides and isolates; zero-width characters, line/paragraph separators, the BOM
# (anywhere but a file's first byte, which textfile.py strips), interlinear annotations, and
# the tag characters (U+E0000-E007F: invisible letters that can carry a hidden text)
CLASS = ("\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e"
         "\u2060-\u2064\u2066-\u2069\ufeff\ufff9-\ufffb\U000e0000-\U000e007f")
HIDDEN = re.compile(f"[{CLASS}]")
BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


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
