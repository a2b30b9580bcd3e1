"""`steer sessions` and `steer rewind`: the saved sessions of a repository, and going back
to before a turn."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from app.cli.common import (
    EXIT_EDITS,
    EXIT_OK,
    EXIT_USAGE,
    Parser,
)
from app.core.disk.git_dirs import find_root
from app.core.text.plural import plural


# -- steer sessions / rewind -------------------------------------------------------------------
def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{max(seconds, 0):.0f}s"


def cmd_sessions(argv: list[str]) -> int:
    p = Parser(prog="steer sessions", description="List the saved sessions of this repository, "
                "or fork one (steer --resume ID opens one).")
    p.add_argument("action", nargs="?", choices=("list", "fork"), default="list")
    p.add_argument("id", nargs="?", help="fork: the session to fork")
    p.add_argument("--at", type=int, metavar="TURN",
                   help="fork: keep the turns before this one (1-based); default all")
    p.add_argument("-C", dest="directory", default=".")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    import time

    from app.core.storage.records import SessionError
    from app.core.storage.store import SessionStore

    store = SessionStore(find_root(Path(args.directory).resolve()))
    try:
        if args.action == "fork":
            if args.id is None:
                p.error("fork needs the id of a session")
            new = store.fork(store.resolve(args.id), None if args.at is None else args.at - 1)
            print(new)
            return EXIT_OK
        infos = store.list()
    except (SessionError, OSError) as exc:  # OSError: the state dir cannot be used (it says why)
        print(f"steer: {exc}", file=sys.stderr)
        return EXIT_USAGE
    now = time.time()
    if args.json:
        print(json.dumps([{**i.model_dump(), "age": round(now - i.updated, 1)} for i in infos],
                         indent=2))
        return EXIT_OK
    if not infos:
        print(f"no saved session for {store.root}")
        return EXIT_OK
    print(f"sessions of {store.root} (steer --resume ID opens one)")
    print(f"{'ID':22} {'AGE':>5}  {'BRANCH':14} {'TURNS':>5} {'OPEN':>5}  FIRST INSTRUCTION")
    for i in reversed(infos):
        first = " ".join(i.first.split())
        first = first if len(first) <= 60 else first[:59] + "…"
        fork = f"  (fork of {i.forked_from})" if i.forked_from else ""
        print(f"{i.id:22} {_age(now - i.updated):>5}  {(i.branch or '-')[:14]:14} {i.turns:>5} "
              f"{i.open:>5}  {first}{fork}")
    return EXIT_OK


def cmd_rewind(argv: list[str]) -> int:
    p = Parser(prog="steer rewind", description="Go back to before a turn of a saved session: "
                "the conversation, the files steer wrote in and after it (from the journal, no "
                "git needed), or both.",
                epilog="exit codes: 0 done, 2 usage, 4 a file was refused (you changed the lines "
                       "steer wrote; nothing was written to it)")
    p.add_argument("--session", metavar="ID", help="the session (default: the last one)")
    p.add_argument("--to", type=int, metavar="TURN", help="rewind to before this turn (1-based)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--files", action="store_true", help="only the files")
    what.add_argument("--conversation", action="store_true", help="only the conversation")
    p.add_argument("--redo", action="store_true", help="put back the files of the last rewind")
    p.add_argument("--list", action="store_true", help="show the checkpoints (one per turn)")
    p.add_argument("-C", dest="directory", default=".")
    p.add_argument("--allow-read-only", action="store_true")
    args = p.parse_args(argv)
    if not (args.list or args.redo or args.to):
        p.error("give --to TURN, --redo or --list")
    from app.core.conversation import rewind
    from app.core.conversation.resume import resume, rewind_conversation
    from app.core.conversation.session import Session
    from app.core.disk.journal import UndoRefused
    from app.core.disk.repo_lock import Busy
    from app.core.disk.workspace import Workspace
    from app.core.provider import Provider
    from app.core.storage.records import SessionError
    from app.core.storage.store import SessionStore

    ws = Workspace(find_root(Path(args.directory).resolve()), allow_read_only=args.allow_read_only)
    session = Session(ws, Provider())  # no model is asked: a rewind only reads the log
    try:
        resume(session, SessionStore(ws.root), args.session)
    except (SessionError, Busy, OSError) as exc:
        print(f"steer: {exc}", file=sys.stderr)
        return EXIT_USAGE
    log = session.log
    assert log is not None  # resume() saves into it from now on
    try:
        return _rewind(args, session, rewind, rewind_conversation, UndoRefused, SessionError)
    finally:
        log.close()


def _rewind(args, session, rewind, rewind_conversation, UndoRefused, SessionError) -> int:
    if args.list:
        for n, instruction, files in rewind.checkpoints(session):
            print(f"{n + 1:>3}  {' '.join(instruction.split())[:60]:60}  "
                  f"{', '.join(files) or '(no file written since)'}")
        return EXIT_OK
    try:
        if args.redo:
            done = rewind.redo_files(session)
        else:
            turn = args.to - 1
            if not 0 <= turn < len(session.turns):
                print(f"steer: no turn {args.to} (the session has {len(session.turns)})",
                      file=sys.stderr)
                return EXIT_USAGE
            done = None
            if not args.conversation:
                done = rewind.rewind_files(session, turn)
            if not args.files:
                left = rewind_conversation(session, turn)
                print(f"steer: the conversation is back to before turn {args.to} ({plural(left, 'turn')} "
                      "left)", file=sys.stderr)
    except (UndoRefused, SessionError) as exc:
        print(f"steer: {exc}", file=sys.stderr)
        return EXIT_EDITS
    if done is None:
        return EXIT_OK
    if done.written:
        print(f"steer: rewound {', '.join(done.written)}", file=sys.stderr)
    elif not done.refused:
        print("steer: no file to rewind: steer wrote nothing in or after that turn",
              file=sys.stderr)
    for path, why in done.refused.items():
        print(f"steer: refused {path}: {why}", file=sys.stderr)
    for note in done.notes:
        print(f"steer: {note}", file=sys.stderr)
    return EXIT_OK if done.ok else EXIT_EDITS
