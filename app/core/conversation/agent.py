"""Serving an agent: a back-end with `capabilities.agent` (any ACP agent, e.g. Codex, Claude
Code, Gemini CLI) that proposes structured edits and asks steer to read and write files.

Every proposal becomes hunks of the session's pending diff, so an agent's edits are
reviewed exactly like a model's. The file the agent means (a whole-file write, or a tool
call's `oldText` -> `newText` applied to steer's view of the file) is diffed against what
steer expects on disk (the base plus the hunks already accepted), and each changed block is
placed at its base line (EditBegin.at): nothing is sought by content, and hunks the agent
states again keep their ids. A write waits for the user's decision on its hunks (`wait`, the
app) or is staged at once (`stage`, `steer run`, which decides at the end). A read returns
steer's view: the base, the accepted hunks, and the proposals still open. Nothing here
writes a file: only Review's accept does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from app.core.disk.workspace import PathRefused
from app.core.edits.diff import PendingDiff
from app.core.edits.file_diff import FileDiff
from app.core.edits.formats.base import StreamParser
from app.core.edits.formats.events import EditBegin, EditEnd, Line, OldEnd, ParseEvent, Prose
from app.core.edits.hunks import DECIDED, Hunk, HunkState
from app.core.events import (
    Event,
    FileEdit,
    FileRead,
    FileWrite,
    PermissionRequest,
    Plan,
    ToolCall,
)
from app.core.listeners import Listeners
from app.core.storage.records import AgentRec
from app.core.text.linediff import Change, apply_changes, line_diff
from app.core.text.textfile import NotText, TextFormat, decode

if TYPE_CHECKING:
    from app.core.conversation.turn import Turn
    from app.core.disk.workspace import Workspace


class Host(Protocol):
    """What the agent's side needs of its session (app/core/conversation/session.py): the
    workspace, the change set its proposals join, and a way to wake the screen."""

    ws: Workspace
    @property
    def pending(self) -> PendingDiff | None: ...

    def wake(self) -> None: ...

WritePolicy = Literal["wait", "stage"]
AGENT_EVENTS = frozenset({Plan, ToolCall, FileEdit, FileWrite, FileRead, PermissionRequest})


class AgentRefused(ValueError):
    """A proposal, read or write steer will not take, and the reason the agent is told."""


class ProseOnly(StreamParser):
    """An agent's text is its explanation, never edit syntax: its edits arrive structured."""

    name = "prose"

    def _line(self, line: str, out: list[ParseEvent]) -> None:
        out.append(Prose(line))

    def _end(self, out: list[ParseEvent], complete: bool) -> None:
        pass


@dataclass(eq=False)
class _Write:
    event: FileWrite
    path: str
    hunks: list[Hunk]  # what the user decides on before the agent hears back


class AgentHost:
    """The session's side of an agent: proposals, reads, waiting writes, permissions."""

    def __init__(self, session: Host) -> None:
        self.session = session
        self.write_policy: WritePolicy = "wait"
        self.permissions: list[PermissionRequest] = []  # open, oldest first: the UI answers
        self.writes: list[_Write] = []  # waiting for the user's decision
        # told of each new permission request (`steer run` answers at once by a flag)
        self.asked: Listeners[PermissionRequest] = Listeners()

    # -- events ----------------------------------------------------------------------------
    @property
    def waiting_for_user(self) -> bool:
        """The agent waits for the user (a permission, a write to decide): its silence is
        not a stall."""
        return bool(self.permissions or self.writes)

    def handle(self, turn: Turn, ev: Event) -> None:
        if turn.state == "connecting":
            turn.state = "streaming"
        if type(ev) is Plan:
            turn.plan = ev.entries
        elif type(ev) is ToolCall:
            turn.tools[ev.id] = ev
        elif type(ev) is FileEdit:
            self.edit(ev)
        elif type(ev) is FileWrite:
            self.write(ev)
        elif type(ev) is FileRead:
            self.read(ev)
        elif type(ev) is PermissionRequest:
            self.permissions.append(ev)
            self.asked.publish(ev)
        self.session.wake()

    def replay(self, rec: AgentRec) -> None:
        """An edit or write of the agent read back from the session's log: proposed as it
        was, answered to no one (the agent that asked is gone)."""
        pending = self.session.pending
        if pending is None:
            return
        if rec.kind == "edit":
            self.edit(FileEdit(rec.path, rec.old, rec.new))
            return
        try:
            fd = pending.file(self.resolve(rec.path))
            self.propose(fd, split(rec.new, fd.path))
        except (AgentRefused, PathRefused, NotText, OSError) as exc:
            pending.error(rec.path, str(exc))

    def edit(self, ev: FileEdit) -> None:
        """A tool call's diff: `old` -> `new` in steer's view of the file, as hunks."""
        pending = self.session.pending
        assert pending is not None
        try:
            fd = pending.file(self.resolve(ev.path))
            text = view_text(self.view(fd), fd.base.fmt)
            if not ev.old or ev.old == text:
                target = ev.new  # a new file, or the whole file on both sides
            elif text.count(ev.old) == 1:
                target = text.replace(ev.old, ev.new, 1)
            elif ev.new and ev.new in text and ev.old not in text:
                return  # stated again after it was applied (a tool call's later update)
            elif ev.old in text:
                raise AgentRefused(f"{fd.path}: the text to replace occurs {text.count(ev.old)} "
                                   "times; the edit does not say which")
            else:
                raise AgentRefused(f"{fd.path}: the text to replace is not in the file")
            self.propose(fd, split(target, fd.path))
        except (AgentRefused, PathRefused, NotText, OSError) as exc:
            pending.error(ev.path, str(exc))
        self.settle()  # a proposal may have replaced what a waiting write holds

    def write(self, ev: FileWrite) -> None:
        """fs/write_text_file: the whole file, as hunks; answered when the user decides."""
        pending = self.session.pending
        assert pending is not None
        try:
            fd = pending.file(self.resolve(ev.path))
            held = self.propose(fd, split(ev.content, fd.path))
        except (AgentRefused, PathRefused, NotText, OSError) as exc:
            pending.error(ev.path, str(exc))
            _reply(ev.reply, f"{exc}; nothing was written")
            return
        self.settle()  # this write may replace what an earlier one holds
        if self.write_policy == "stage" or not held:
            _reply(ev.reply, None)
            return
        self.writes.append(_Write(ev, fd.path, held))

    def read(self, ev: FileRead) -> None:
        """fs/read_text_file: steer's view of the file, proposals still open included."""
        pending = self.session.pending
        assert pending is not None
        try:
            rel = self.resolve(ev.path)
            fd = pending.files.get(rel)
            if fd is not None:
                lines, fmt = self.view(fd), fd.base.fmt
                if not fd.base.exists and not lines:
                    raise AgentRefused(f"{rel}: no such file")
            else:
                snap = pending.resolver.snapshot(rel)  # a saved session logs this base
                if not snap.exists:
                    raise AgentRefused(f"{rel}: no such file")
                # a later write of this file is diffed against what the agent read
                pending.bases.setdefault(rel, snap)
                lines, fmt = snap.lines, snap.fmt
        except (AgentRefused, PathRefused, NotText, OSError) as exc:
            if not ev.reply.done():
                ev.reply.set_exception(AgentRefused(str(exc)))
            return
        first = max((ev.line or 1) - 1, 0)
        last = len(lines) if ev.limit is None else min(len(lines), first + ev.limit)
        part = lines[first:last]
        tail = "\n" if part and (last < len(lines) or fmt.final_newline) else ""
        _reply(ev.reply, "\n".join(part) + tail)

    # -- decisions -------------------------------------------------------------------------
    def answer(self, request: PermissionRequest, option_id: str | None) -> None:
        """The user's (or `steer run`'s) answer to a permission request; None cancels it."""
        if request in self.permissions:
            self.permissions.remove(request)
        _reply(request.reply, option_id)
        self.session.wake()

    def settle(self) -> None:
        """After a decision: answer every write whose hunks are all decided."""
        for w in list(self.writes):
            fd = self.session.pending.files.get(w.path) if self.session.pending else None
            alive = [h for h in w.hunks if fd is not None and h in fd.hunks]
            if any(h.state not in DECIDED for h in alive):
                continue
            self.writes.remove(w)
            taken = [h for h in alive if h.state == HunkState.ACCEPTED]
            if len(taken) == len(w.hunks) and all(h.applied == h.new for h in taken):
                _reply(w.event.reply, None)
            elif not taken:
                why = "rejected" if alive else "replaced by a later proposal"
                _reply(w.event.reply, f"the user {why} this change to {w.path}; it was not written")
            else:
                _reply(w.event.reply, f"the user accepted only part of this change to {w.path} "
                       f"({len(taken)} of {len(w.hunks)} hunks); read the file again to see what "
                       "it holds now")

    def end_turn(self) -> None:
        """The turn is over (done, interrupted, failed): nothing may keep the agent waiting.
        Hunks of unanswered writes stay reviewable."""
        for req in list(self.permissions):
            self.answer(req, None)
        for w in self.writes:
            _reply(w.event.reply, f"the turn ended before the user decided; the change to {w.path} "
                   "is still pending in steer and was not written")
        self.writes.clear()

    # -- files -----------------------------------------------------------------------------
    def resolve(self, raw: str) -> str:
        """The workspace-relative path for a path the agent sent (absolute, per ACP)."""
        ws = self.session.ws
        if not os.path.isabs(raw):
            return ws.check_path(raw)
        for candidate in (raw, os.path.realpath(raw)):
            rel = os.path.relpath(candidate, ws.root)
            if rel != ".." and not rel.startswith("../"):
                return ws.check_path(rel)
        raise PathRefused(f"refused {raw}: outside the workspace {ws.root}")

    @staticmethod
    def view(fd: FileDiff) -> list[str]:
        """The file as steer has it: base, accepted hunks as written, open proposals."""
        return apply_changes(fd.base.lines, [
            Change(h.base_start, h.base_end, tuple(h.applied if h.state == HunkState.ACCEPTED
                                                   and h.applied is not None else h.new))
            for h in fd.hunks if h.state != HunkState.REJECTED])

    def propose(self, fd: FileDiff, lines: list[str]) -> list[Hunk]:
        """Make `lines` the file's proposal; returns its open hunks (what the user decides)."""
        base = fd.base.lines
        specs = self._specs(fd, lines)
        open_hunks = [h for h in fd.hunks if h.state not in DECIDED]
        kept = {h.id for h in open_hunks if (h.base_start, h.base_end, h.new) in specs}
        for edit in list(fd.edits):  # open proposals this one no longer makes go
            if not edit.decided and any(h.id not in kept for h in edit.hunks):
                kept.difference_update(h.id for h in edit.hunks)
                fd.remove_edit(edit)
        known = [(h.base_start, h.base_end, h.new) for h in fd.hunks if h.id in kept]
        pending = self.session.pending
        assert pending is not None
        errors = len(pending.errors)
        for b1, b2, new in specs:
            if (b1, b2, new) in known:
                continue
            pending.feed([EditBegin(fd.path, "update", at=b1), *(Line("-", t) for t in base[b1:b2]),
                          OldEnd(), *(Line("+", t) for t in new), EditEnd()])
        if len(pending.errors) > errors:
            raise AgentRefused(pending.errors.pop().message)
        return [h for h in fd.hunks if h.state not in DECIDED]

    @staticmethod
    def _specs(fd: FileDiff, lines: list[str]) -> list[tuple[int, int, list[str]]]:
        """`lines` against what steer expects on disk, as base ranges and their new lines.
        Refuses a proposal that rewrites lines the user already decided on."""
        accepted = [h for h in fd.hunks if h.state == HunkState.ACCEPTED]
        expected = apply_changes(fd.base.lines, [Change(h.base_start, h.base_end, tuple(h.applied or []))
                                                 for h in accepted])
        spans = []  # (start, end in `expected`, line shift it causes)
        shift = 0
        for h in accepted:
            start = h.base_start + shift
            grow = len(h.applied or []) - (h.base_end - h.base_start)
            spans.append((start, start + len(h.applied or []), grow))
            shift += grow
        rejected = [(h.base_start, h.base_end) for h in fd.hunks if h.state == HunkState.REJECTED]
        specs = []
        for e1, e2, n1, n2 in line_diff(expected, lines):
            if any(_touch(e1, e2, s, e) for s, e, _ in spans):
                raise AgentRefused(f"{fd.path}: the change rewrites lines you already accepted "
                                   f"(line {e1 + 1}); it was not proposed")
            d = sum(g for _, e, g in spans if e <= e1)
            b1, b2 = e1 - d, e2 - d
            if any(_touch(b1, b2, s, e) for s, e in rejected):
                raise AgentRefused(f"{fd.path}: the change rewrites lines the user rejected "
                                   f"(line {b1 + 1}); it was not proposed")
            specs.append((b1, b2, list(lines[n1:n2])))
        return specs


def _touch(a1: int, a2: int, s: int, e: int) -> bool:
    """Does the change [a1, a2) touch the decided region [s, e)? An insertion at a decided
    hunk's first line does: the pending diff could not tell which of the two comes first."""
    if a1 == a2:
        return s <= a1 < e
    if s == e:
        return a1 < s < a2
    return a1 < e and s < a2


def split(text: str, name: str) -> list[str]:
    lines, _ = decode(text.encode("utf-8"), name)
    return lines


def view_text(lines: list[str], fmt: TextFormat) -> str:
    return "\n".join(lines) + ("\n" if lines and fmt.final_newline else "")


def _reply(fut, value) -> None:
    if not fut.done():
        fut.set_result(value)
