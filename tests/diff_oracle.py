"""Line diffs for the tests, from difflib: an oracle that is not the app's own diff
(app/core/text/linediff.py), so a bug there cannot hide in the expectation too."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence


def regions(base: Sequence[str], target: Sequence[str]) -> list[tuple[int, int, int, int]]:
    """(a1, a2, b1, b2) for each place where base[a1:a2] becomes target[b1:b2]."""
    sm = difflib.SequenceMatcher(None, list(base), list(target), autojunk=False)
    return [(a1, a2, b1, b2) for op, a1, a2, b1, b2 in sm.get_opcodes() if op != "equal"]


def splice(lines: Sequence[str], changes: Iterable[tuple[int, int, Sequence[str]]]) -> list[str]:
    """`lines` with each (start, end, new) put in place of lines[start:end]; the changes may
    come in any order but must not overlap."""
    out, at = [], 0
    for start, end, new in sorted(changes, key=lambda c: (c[0], c[1])):
        assert at <= start <= end, "overlapping changes"
        out += lines[at:start]
        out += new
        at = end
    return out + list(lines[at:])
