"""How an accept's chosen hunks go onto whatever the disk holds: the plan an accept makes
(`AcceptPlan`), each file's 3-way merge against what steer expects there (`FileMerge`), what
came of it (`Outcome`), and the labels the journal and the key bar give it. Plain data, so
that a merge can run again in the writer's thread when the file turns out to have changed
(app/core/review/review.py makes and carries out the plans)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from app.core.disk.journal import Entry, Write
from app.core.disk.workspace import ABSENT, Content
from app.core.edits.hunks import Hunk, HunkState
from app.core.text.linediff import Change, rebase
from app.core.text.textfile import NotText, TextFormat, decode, encode


@dataclass
class Outcome:
    accepted: list[int] = field(default_factory=list)
    rejected: list[int] = field(default_factory=list)
    conflicts: list[int] = field(default_factory=list)
    written: list[str] = field(default_factory=list)  # files changed on disk
    not_written: list[str] = field(default_factory=list)  # "path ...: why", one per file
    messages: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)  # interrupted steps completed first

    @property
    def ok(self) -> bool:
        return not self.conflicts and not self.messages and not self.not_written


@dataclass(eq=False)
class FileMerge:
    """How one file's chosen hunks go onto whatever the disk holds: 3-way against what steer
    expects there. Plain data taken at plan time, so that it can run again in the writer's
    thread when the file turns out to have changed."""

    path: str
    base_exists: bool
    base_fmt: TextFormat
    expected: list[str]
    hunks: list[tuple[Hunk, list[str]]]  # hunk, the lines it writes
    edits: list[Change]  # aligned with hunks, in `expected` coordinates
    others_accepted: bool  # every other hunk of the file is accepted already
    deleted: bool  # the proposal deletes the file
    carrier: Write | None = None  # the write that carries these hunks
    bad: dict[int, str] = field(default_factory=dict)  # hunk index -> why it cannot go

    def onto(self, found: Content) -> Content | None:
        """The content to write over `found`; None when no hunk can go. Sets `bad`."""
        self.bad = {}
        every = range(len(self.hunks))
        if found.link is not None or found.special is not None:
            return self._fail(every, f"{self.path} is now {found.describe()}")
        if self.base_exists and found.data is None:
            return self._fail(every, f"{self.path} was deleted on disk since the request")
        lines: list[str] = []
        fmt = self.base_fmt
        if found.data is not None:
            try:
                lines, fmt = decode(found.data, self.path)
            except NotText as exc:
                return self._fail(every, str(exc))
            if not self.base_exists and lines != self.expected:
                return self._fail(every, f"{self.path} was created on disk since the request")
        for i, e in enumerate(self.edits):
            try:
                "\n".join(e.lines).encode(fmt.encoding)
            except UnicodeEncodeError as exc:
                self.bad[i] = (f"the answer has text that cannot be written as {fmt.encoding} "
                               f"({exc.reason}: {exc.object[exc.start:exc.end]!r})")
        keep = [i for i in every if i not in self.bad]
        merged, clash = rebase(self.expected, lines, [self.edits[i] for i in keep])
        for k in clash:  # `merged` holds the others only
            self.bad[keep[k]] = "the lines changed on disk since the request"
        if len(self.bad) == len(self.hunks):
            return None
        if self.deleted and not merged and self.others_accepted and not self.bad:
            return ABSENT
        return Content(data=encode(merged, fmt, lines if found.data is not None else None),
                       mode=found.mode)

    def _fail(self, which: Iterable[int], why: str) -> Content | None:
        """No hunk of `which` can go, for the one reason `why`: nothing to write."""
        for i in which:
            self.bad[i] = why
        return None

    def drop_bad(self) -> list[tuple[Hunk, str]]:
        """Take the hunks that cannot go out of the merge; returns them with the reason."""
        gone = [(self.hunks[i][0], why) for i, why in sorted(self.bad.items())]
        if gone:
            self.hunks = [h for i, h in enumerate(self.hunks) if i not in self.bad]
            self.edits = [e for i, e in enumerate(self.edits) if i not in self.bad]
            self.others_accepted = False
            self.bad = {}
        return gone


@dataclass
class AcceptPlan:
    label: str
    writes: list[Write]
    merges: list[FileMerge]
    outcome: Outcome
    entry_id: str | None = None  # set once journaled and written
    recovered: list[Entry] = field(default_factory=list)  # steps a crash left, completed first
    how: str = ""  # "lines" (picked rows) or "edited": how the written lines were chosen
    edited: tuple[int, list[str]] | None = None  # a merge the user wrote: kept if not written

    @property
    def decided(self) -> list[tuple[Hunk, list[str]]]:
        return [hl for m in self.merges for hl in m.hunks]


@dataclass
class Tx:
    entry_id: str
    hunks: list[tuple[Hunk, HunkState, list[str] | None, str]]  # hunk, state, applied, note


def out_reason(reason: str) -> str:
    """A rejection's reason as kept: one line, not too long."""
    line = " ".join(reason.split())
    return line[:200]


def grouped(items: list[tuple[Hunk, str]]) -> list[tuple[str, list[Hunk]]]:
    groups: dict[str, list[Hunk]] = {}
    for h, why in items:
        groups.setdefault(why, []).append(h)
    return list(groups.items())


def accept_label(what: str, decided: list[tuple[Hunk, list[str]]]) -> str:
    """What the journal (and u's key label) calls an accept: "hunk #3 in calc.py", "lines
    of hunk #1 in calc.py", "accept all: hunks #1, #4 in a.py, b.py"."""
    if not decided:
        return f"accept {what}: nothing" if what else "nothing"
    files = ", ".join(sorted({h.path for h, _ in decided}))
    if what.endswith(f"hunk #{decided[0][0].id}") and len(decided) == 1:  # lines, edited
        return f"{what} in {files}"
    ids = ", ".join(f"#{h.id}" for h, _ in decided[:8])
    more = f" and {len(decided) - 8} more" if len(decided) > 8 else ""
    hunks = f"{'hunk' if len(decided) == 1 else 'hunks'} {ids}{more} in {files}"
    return f"accept {what}: {hunks}" if what else hunks
