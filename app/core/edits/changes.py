"""What a pending diff tells its subscribers (PendingDiff.listeners), besides what it holds.

The change set (app/core/review/change_set.py) gives each pending diff it opens its own
long-lived list, so that who subscribed once hears every answer's diff; a pending diff made
on its own (tests, benchmarks) has a list of its own. The full set of a change set's events,
and their order, is app/core/review/events.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.core.disk.snapshot import Snapshot
    from app.core.edits.file_diff import FileDiff


@dataclass(frozen=True, slots=True)
class Due:
    """A live rebase of `path` was put off while an edit streamed into it; that edit has
    ended, so it may run now (app/core/git/sync.py takes it)."""

    path: str


@dataclass(frozen=True, slots=True)
class Rebasing:
    """A live rebase is about to move `path` onto the disk as read (`snapshot`, None when the
    file is gone, and why): the session's log keeps it, so that a resume replays it."""

    path: str
    snapshot: Snapshot | None
    reason: str


@dataclass(frozen=True, slots=True)
class RebaseDone:
    """A live rebase of `fd` is done: its hunks moved, changed state or became conflicts
    (app/core/variants relabels those a sibling variant's accept made as superseded)."""

    fd: FileDiff
