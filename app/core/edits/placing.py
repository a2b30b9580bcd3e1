"""Placing an edit written against the request's snapshot of a file (the *origin*) onto a
base that has moved on since (a live rebase put the user's changes in it).

The model's changes far from the user's shift to where those lines are now; those touching
them (adjacent counts, as in diff3 and git) become one conflict each, holding "your lines on
disk", "the proposal" for the same region, and the ancestor both started from. Where the
user already wrote what is proposed, nothing is left to review.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.core.text.linediff import line_diff


@dataclass(frozen=True, slots=True)
class Placed:
    """One region of the moved-on base: `old` there becomes `new`; `ancestor` is set for a
    conflict (old = the user's lines on disk, new = the proposal for the same region)."""

    start: int
    end: int
    old: list[str]
    new: list[str]
    ancestor: list[str] | None = None


def three_way(origin: Sequence[str], mine: Sequence[str], theirs: Sequence[str]) -> list[Placed]:
    """The changes `theirs` makes to `origin`, placed onto `mine` (origin plus the user's
    changes). Adjacent counts as touching, as in diff3 and git."""
    user = [(a1, a2, b2 - b1 - (a2 - a1)) for a1, a2, b1, b2 in line_diff(origin, mine)]
    model = [(a1, a2, b1, b2) for a1, a2, b1, b2 in line_diff(origin, theirs)]
    items = sorted([(a1, a2, 0, i) for i, (a1, a2, _) in enumerate(user)]
                   + [(a1, a2, 1, i) for i, (a1, a2, _, _) in enumerate(model)])
    out: list[Placed] = []
    shift = 0  # mine minus origin, from the user's changes passed
    k = 0
    while k < len(items):
        x1, x2 = items[k][0], items[k][1]
        cluster = [items[k]]
        k += 1
        while k < len(items) and items[k][0] <= x2:
            x2 = max(x2, items[k][1])
            cluster.append(items[k])
            k += 1
        grow = sum(user[i][2] for _, _, kind, i in cluster if kind == 0)
        ours = [model[i] for _, _, kind, i in cluster if kind == 1]
        y1, y2 = x1 + shift, x2 + shift + grow
        shift += grow
        if not ours:
            continue  # the user's own change: it is the base now
        proposal: list[str] = []
        pos = x1
        for a1, a2, p1, p2 in ours:
            proposal += [*origin[pos:a1], *theirs[p1:p2]]
            pos = a2
        proposal += origin[pos:x2]
        yours = list(mine[y1:y2])
        if len(cluster) == len(ours):  # untouched: it just moves
            out.append(Placed(y1, y2, yours, proposal))
        elif proposal != yours:  # (equal: the user already wrote what is proposed)
            out.append(Placed(y1, y2, yours, proposal, list(origin[x1:x2])))
    return out
