"""`steer undo`: revert the last accepted change from the journal (no git needed)."""

from __future__ import annotations

import sys
from pathlib import Path

from app.cli.common import (
    EXIT_EDITS,
    EXIT_OK,
    Parser,
    finish_interrupted,
    report_step,
)
from app.core.disk.git_dirs import find_root


# -- steer undo --------------------------------------------------------------------------------
def cmd_undo(argv: list[str]) -> int:
    p = Parser(prog="steer undo", description="Revert the last accepted change (no git needed).",
                epilog="exit codes: 0 done, 4 refused (a file changed since, or cannot be "
                       "written; the report says which files were reverted)")
    p.add_argument("-C", dest="directory", default=".")
    p.add_argument("--list", action="store_true", help="show the journal instead")
    p.add_argument("--allow-read-only", action="store_true",
                   help="let undo write files that are read-only")
    args = p.parse_args(argv)
    from app.core.disk.journal import Journal, UndoRefused
    from app.core.disk.workspace import Workspace

    ws = Workspace(find_root(Path(args.directory).resolve()), allow_read_only=args.allow_read_only)
    journal = Journal.for_workspace(ws)
    if args.list:
        entries = journal.entries()
        for e in entries:
            left = journal.remaining(e, entries) if e.op == "accept" else []
            mark = (" (interrupted)" if not e.done else
                    "" if e.op != "accept" or len(left) == len(e.written) else
                    " (undone)" if not left else " (partly undone)")
            print(f"{e.id}  {e.op:6}  {e.label}{mark}")
        return EXIT_OK
    try:
        completed = journal.recover(ws)
        for e in completed:
            report_step(e, "completed an interrupted step: ")
        if any(e.op == "undo" for e in completed):
            return EXIT_EDITS if any(e.notes for e in completed) else EXIT_OK
        entry = journal.undo(ws)
    except UndoRefused as exc:
        print(f"steer: {exc}", file=sys.stderr)
        return EXIT_EDITS
    except Exception as exc:  # a lock held too long, a full disk, a lost blob: no traceback
        print(f"steer: undo stopped: {type(exc).__name__}: {exc}", file=sys.stderr)
        finish_interrupted(ws)
        return EXIT_EDITS
    report_step(entry)
    return EXIT_EDITS if entry.notes else EXIT_OK
