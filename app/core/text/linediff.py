"""The one line diff everything agrees on, and the 3-way rebase built on it.

`line_diff` is the canonical diff: "a fresh full diff of base vs proposal" means this
function. It trims the common prefix and suffix first (cheap, and it keeps difflib's
heuristics away from the unchanged bulk of a large file), then lets difflib align the rest.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Change:
    """Replace a[a1:a2] by `lines` (a pure insertion when a1 == a2)."""

    a1: int
    a2: int
    lines: Sequence[str]  # a tuple where the change must hash (git's staged items)


def line_diff(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int, int, int]]:
    """Non-equal regions as (a1, a2, b1, b2), in order, separated by at least one equal line."""
    n, m = len(a), len(b)
    lo = 0
    while lo < n and lo < m and a[lo] == b[lo]:
        lo += 1
    hi = 0
    while hi < n - lo and hi < m - lo and a[n - 1 - hi] == b[m - 1 - hi]:
        hi += 1
    if lo == n - hi and lo == m - hi:
        return []
    matcher = difflib.SequenceMatcher(None, a[lo : n - hi], b[lo : m - hi])
    return [
        (lo + a1, lo + a2, lo + b1, lo + b2)
        for tag, a1, a2, b1, b2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def changes(a: Sequence[str], b: Sequence[str]) -> list[Change]:
    return [Change(a1, a2, tuple(b[b1:b2])) for a1, a2, b1, b2 in line_diff(a, b)]


def apply_changes(a: Sequence[str], edits: Sequence[Change]) -> list[str]:
    """Apply non-overlapping changes, given in order of position."""
    out: list[str] = []
    pos = 0
    for ch in edits:
        out.extend(a[pos : ch.a1])
        out.extend(ch.lines)
        pos = ch.a2
    out.extend(a[pos:])
    return out


def _touches(c: Change, u1: int, u2: int) -> bool:
    # Adjacent counts as touching, as in diff3 and git: an edit right next to the user's
    # own edit is not safe to place without a human look.
    return c.a1 <= u2 and u1 <= c.a2


def rebase(
    expected: Sequence[str], disk: Sequence[str], edits: Sequence[Change], *, same_ok: bool = False
) -> tuple[list[str], list[int]]:
    """Apply `edits` (made against `expected`) onto `disk`, a version someone else changed.

    Returns the merged lines and the indices of edits that were left out because the region
    they change was changed on disk too. Untouched regions rebase by line offset. With
    `same_ok`, an edit the disk already made exactly (same lines replaced by the same lines)
    is no conflict: it is simply already there.
    """
    if list(expected) == list(disk):
        return apply_changes(disk, edits), []
    theirs = line_diff(expected, disk)
    placed: list[Change] = []
    conflicts: list[int] = []
    k = 0  # first user change that may still matter
    delta = 0  # line shift from user changes entirely before the current edit
    for i, ch in enumerate(edits):
        while k < len(theirs) and theirs[k][1] < ch.a1:
            u1, u2, d1, d2 = theirs[k]
            delta += (d2 - d1) - (u2 - u1)
            k += 1
        if k < len(theirs) and _touches(ch, theirs[k][0], theirs[k][1]):
            u1, u2, d1, d2 = theirs[k]
            if not (same_ok and (u1, u2) == (ch.a1, ch.a2) and tuple(disk[d1:d2]) == tuple(ch.lines)):
                conflicts.append(i)
            continue
        placed.append(Change(ch.a1 + delta, ch.a2 + delta, ch.lines))
    return apply_changes(disk, placed), conflicts
