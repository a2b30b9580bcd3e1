"""What changed in the map since a version a conversation already holds, as a new item to
append (the conversation only grows: an earlier map is never edited, rule 10).

The builder records, per version, which files were added, changed or deleted; `net` folds a
run of versions into one change per file, and `render_delta` writes the files' entries as
they are now, in path order, so the same versions give the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from app.core.knowledge.index import Index
from app.core.knowledge.render import MAX_DEFS, estimate_tokens, file_block
from app.core.text.names import carried

ADDED, CHANGED, DELETED = "added", "changed", "deleted"
HEADER = "Repository map update: files added, changed or deleted since the map above.\n"


@dataclass(frozen=True)
class MapDelta:
    text: str
    tokens: int
    since: int
    version: int
    files: tuple[str, ...]


def net(steps: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """One change per path for a sequence of per-version changes (oldest first)."""
    out: dict[str, str] = {}
    for step in steps:
        for path, kind in step.items():
            before = out.get(path)
            if before is None:
                out[path] = kind
            elif before == ADDED:
                if kind == DELETED:
                    del out[path]
            elif before == DELETED:
                out[path] = CHANGED if kind != DELETED else DELETED
            else:
                out[path] = DELETED if kind == DELETED else CHANGED
    return out


def render_delta(index: Index, changes: Mapping[str, str], *, since: int, version: int,
                 budget: int, hidden: Sequence[str] = ()) -> MapDelta | None:
    """The entries of the changed files now, or None when they do not fit `budget` (send a
    fresh map instead)."""
    lines = [HEADER]
    for path in sorted(changes):
        kind = changes[path]
        if kind == DELETED:
            lines.append(f"deleted {carried(path)}\n")
        else:
            lines.append(f"{kind} " + file_block(index, path, MAX_DEFS[0], (), hidden))
    text = "".join(lines) if len(lines) > 1 else ""
    tokens = estimate_tokens(text)
    if tokens > budget:
        return None
    return MapDelta(text, tokens, since, version, tuple(sorted(changes)))
