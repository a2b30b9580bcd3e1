"""A hunk and its states, the errors and cards an answer's blocks become, and what the
pending diff reads the disk through."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from app.core.disk.snapshot import Snapshot
from app.core.text import invisible
from app.core.text.linediff import Change, line_diff


class HunkState(StrEnum):
    STREAMING = "streaming"
    PENDING = "pending"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    CONFLICT = "conflict"  # the region changed on disk too: old is yours, new is the proposal
    STALE = "stale"  # the file was deleted or renamed outside steer (the note says which)
    # another variant's accepted hunk took this region (app/core/variants): shown, not
    # acceptable until that accept is undone; `old` is that variant's text now on disk
    SUPERSEDED = "superseded"


DECIDED = frozenset({HunkState.ACCEPTED, HunkState.REJECTED, HunkState.SUPERSEDED})
OPEN = frozenset({HunkState.PENDING, HunkState.CONFLICT, HunkState.STALE})
REDIRECTED = "before your redirect"  # a hunk's flag (Hunk.redirected)


@dataclass(eq=False, slots=True)
class Hunk:
    id: int
    path: str
    base_start: int  # the base lines [base_start, base_end) are replaced by `new`
    base_end: int
    old: list[str]
    new: list[str]
    state: HunkState = HunkState.STREAMING
    incomplete: bool = False  # the answer stopped inside this hunk
    applied: list[str] | None = None  # what an accept wrote in place of `old` (line mode: a part)
    note: str = ""
    rev: int = 0  # PendingDiff.revision when last changed: the UI redraws only newer hunks
    # a conflict found by a live rebase: the lines both sides started from (`old` holds what
    # is on disk now, "mine"; `new` the proposal, "theirs"); None for other hunks
    ancestor: list[str] | None = None
    reason: str = ""  # why the user rejected it (one line, optional): the model is told
    # why a bulk accept must leave this hunk; a deliberate accept of the hunk still takes it:
    # a whole-file answer's large or unasked-for deletion (app/core/edits/formats/fragments.py),
    # and invisible characters it adds, in any format (app/core/text/invisible.py)
    deletion: str = ""
    hidden: str = ""
    syntax: str = ""  # taken, it leaves its file unparsable (FileDiff.check_syntax)
    # proposed by an answer the user then redirected: what they told the model to do instead
    # may not want it (PendingDiff.begin_turn); an answer that proposes it again replaces it
    redirected: str = ""
    marked: bool = False  # marked by the user for `!`'s check (proposal_check.would_hold)
    inferred: str = ""  # its block named no file: "file inferred: net.py (...)" (inferred.py)

    @property
    def warning(self) -> str:
        """Every flag of the hunk in one line ("" when a bulk accept may take it)."""
        return "; ".join(f for f in (self.inferred, self.redirected, self.deletion, self.hidden,
                                     self.syntax) if f)

    def check_hidden(self) -> None:
        """Flag the invisible characters the hunk adds (its lines are final, or cut short)."""
        self.hidden = invisible.added(self.old, self.new) or ""

    @property
    def change(self) -> Change:
        return Change(self.base_start, self.base_end, self.new)

    @property
    def added(self) -> int:
        return len(self.new)

    @property
    def removed(self) -> int:
        return len(self.old)


def line_rows(h: Hunk) -> list[tuple[str, str]]:
    """A hunk's lines in display order: removed lines, then added lines."""
    return [("-", t) for t in h.old] + [("+", t) for t in h.new]


def written_note(h: Hunk, applied: list[str], how: str) -> str:
    """What an accept wrote, when it is not the hunk as proposed: counts a reader can check
    against the rows on screen."""
    regions = line_diff(h.old, applied)
    added = sum(b2 - b1 for _, _, b1, b2 in regions)
    removed = sum(a2 - a1 for a1, a2, _, _ in regions)
    if how == "lines":
        return f"partly accepted: +{added} −{removed} of +{len(h.new)} −{len(h.old)}"
    return f"edited before accepting: +{added} −{removed} written (shown as written)"


def pick_lines(h: Hunk, rows: Iterable[int]) -> list[str]:
    """What a partial accept writes, as `git add -p` does: chosen '-' rows are removed, the
    others stay; chosen '+' rows are added, the others are not."""
    chosen = set(rows)
    n = len(h.old)
    kept = [t for i, t in enumerate(h.old) if i not in chosen]
    added = [t for j, t in enumerate(h.new) if n + j in chosen]
    return kept + added


def note_conflict(h: Hunk, b1: int, b2: int) -> None:
    """A conflict's note: which of the user's lines it is about, and the three ways out."""
    lo, hi = b1 + 1, max(b1 + 1, b2)
    where = f"line {lo}" if lo == hi else f"lines {lo}-{hi}"
    h.note = f"you changed {where} on disk too: keep yours, take the proposal, or edit"


@dataclass(slots=True)
class EditError:
    path: str | None
    message: str
    turn: int = 0  # the answer it came from


@dataclass(eq=False)
class Card:
    """One edit block of an answer, in the order the answer wrote it: what the conversation
    view shows in place of the block's text (file, hunks, where they stand)."""

    turn: int
    path: str | None
    kind: str = "update"  # update | add | delete | whole
    ids: list[int] = field(default_factory=list)  # the hunks it produced (ids survive refining)
    error: str = ""  # why it could not be applied
    done: bool = False  # the block ended (complete or not)
    lines: int = 0  # lines of the block so far
    # while its block streams: the pending diff's cursor on it (an opaque token, compared by
    # identity) and how to ask that cursor for the hunks its edit has now
    _cursor: object | None = field(default=None, repr=False)
    _live: Callable[[], list[int] | None] | None = field(default=None, repr=False)

    def follows(self, cursor: object) -> bool:
        return self._cursor is cursor

    def follow(self, cursor: object, live: Callable[[], list[int] | None]) -> None:
        self._cursor, self._live = cursor, live

    def close(self) -> None:
        self.done, self._cursor, self._live = True, None, None

    def hunk_ids(self) -> list[int]:
        """While it streams: the hunks its edit has now; then: the ones it produced."""
        if self._live is not None and not self.done:
            ids = self._live()
            if ids is not None:
                return ids
        return self.ids


class Resolver(Protocol):
    def check_path(self, raw: str) -> str: ...
    def check_edit(self, raw: str, *, delete: bool = False) -> str: ...
    def snapshot(self, rel: str) -> Snapshot: ...
