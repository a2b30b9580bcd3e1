"""Checkpoints: every turn is one. Rewinding the files to before turn N takes out of the
working tree exactly what steer wrote in and after turn N, from the journal (no git needed,
untracked files included), and redo puts it back.

Per file, never per step: a file's changes are taken out newest first, 3-way, so edits the
user made elsewhere in the file stay; if the user changed lines steer wrote (or the file is
gone, or is now a link), that file is refused whole and nothing is written to it, while the
other files are rewound. Each accept taken out is one journal undo step aimed at it, so
`steer undo --list` shows the rewind and `steer undo` never reverts it twice; a redo is an
accept (what `u` and `steer undo` revert next).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from app.core.conversation import replay
from app.core.disk.journal import Entry, FileChange, Journal, StepFailed, UndoRefused, Write
from app.core.disk.repo_lock import Busy
from app.core.disk.workspace import Content, PathRefused, Workspace
from app.core.storage.records import Files

if TYPE_CHECKING:
    from app.core.conversation.session import Session


@dataclass
class Rewound:
    written: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # path -> why nothing was written
    steps: list[str] = field(default_factory=list)  # journal steps performed
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.refused and not self.notes


def checkpoints(session: Session) -> list[tuple[int, str, list[str]]]:
    """Each turn: its index, instruction, and the files steer wrote in and after it (the
    ones a rewind to before it would touch, as the journal has them now)."""
    entries = session.changes.journal.entries()
    by_id = {e.id: e for e in entries}
    out = []
    for n, turn in enumerate(session.turns):
        paths: set[str] = set()
        for t, eid in session.accepts:
            e = by_id.get(eid)
            if t >= n and e is not None:
                paths.update(f.path for f in Journal.remaining(e, entries))
        out.append((n, turn.instruction, sorted(paths)))
    return out


def rewind_files(session: Session, turn: int) -> Rewound:
    """Take out of the files what this session's accepts wrote in turn `turn` and after."""
    targets = [eid for t, eid in session.accepts if t >= turn]
    done = take_out(session.ws, session.changes.journal, targets, "undo",
                    f"rewind to before turn {turn + 1}")
    if done.steps:
        replay.apply(session, Files(op="rewind", turn=turn, steps=done.steps))
    return done


def _last_undone_rewind(session: Session) -> Files | None:
    redone = {s for f in session.file_steps if f.op == "redo" for s in f.redone}
    return next((f for f in reversed(session.file_steps)
                 if f.op == "rewind" and not redone.intersection(f.steps)), None)


def can_redo(session: Session) -> bool:
    """A rewind of files is there to redo."""
    return _last_undone_rewind(session) is not None


def redo_files(session: Session) -> Rewound:
    """Put back what the last rewind of files (not redone yet) took out."""
    last = _last_undone_rewind(session)
    if last is None:
        raise UndoRefused("no rewind of files to redo")
    done = take_out(session.ws, session.changes.journal, list(reversed(last.steps)), "accept",
                    f"redo: files of turn {last.turn + 1} and after")
    if done.steps:  # (an accept of those turns again: a later rewind takes it out too)
        replay.apply(session, Files(op="redo", turn=last.turn, steps=done.steps, redone=last.steps))
    return done


def take_out(ws: Workspace, journal: Journal, step_ids: list[str], op: Literal["accept", "undo"],
             label: str) -> Rewound:
    """Take the changes of journal steps out of the files (newest step first), per file:
    a file where any of them cannot be taken out cleanly is refused whole."""
    out = Rewound()
    with ws.lock():
        for e in journal.recover(ws):
            out.notes += e.notes
        entries = journal.entries()
        order = {e.id: i for i, e in enumerate(entries)}
        steps = sorted((e for e in entries if e.id in set(step_ids)),
                       key=lambda e: order[e.id], reverse=True)
        plans = _plan(ws, journal, entries, steps, op, out)
        for e, files in plans:
            if not files:
                continue
            writes = [Write(fc.path, before, after) for fc, before, after in files]
            target = e.id if op == "undo" else None
            try:
                done = journal.perform(ws, op, f"{label}: {e.label}", writes, target=target)
            except (StepFailed, Busy, OSError) as exc:  # the journal completes it; say so
                out.notes.append(f"stopped half-way: {exc}")
                break
            out.steps.append(done.id)
            for w in writes:
                if w.written and w.path not in out.written:
                    out.written.append(w.path)
                elif not w.written:
                    out.refused.setdefault(w.path, w.why or f"{w.path} changed while steer wrote it")
    out.written = [p for p in out.written if p not in out.refused]
    return out


def _plan(ws: Workspace, journal: Journal, entries: list[Entry], steps: list[Entry],
          op: str, out: Rewound) -> list[tuple[Entry, list[tuple[FileChange, Content, Content]]]]:
    """Per step, each file's (change, content expected on disk, content to write), chained
    through the steps; files that cannot be taken out are in `out.refused` and in no step."""
    now: dict[str, Content] = {}
    plans: list[tuple[Entry, list[tuple[FileChange, Content, Content]]]] = []
    for e in steps:
        files = []
        changes = journal.remaining(e, entries) if op == "undo" else [
            f for f in e.files if f.written]
        for fc in changes:
            if fc.path in out.refused:
                continue
            try:
                cur = now[fc.path] if fc.path in now else ws.read(fc.path)
                new = journal.take_out(fc, cur)
            except (UndoRefused, PathRefused, OSError) as exc:
                out.refused[fc.path] = str(exc).replace("cannot undo", "cannot rewind")
                continue
            now[fc.path] = new
            files.append((fc, cur, new))
        plans.append((e, files))
    return [(e, [f for f in files if f[0].path not in out.refused]) for e, files in plans]
