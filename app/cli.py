"""`steer` and its sub-commands: (the TUI), run, serve, undo, sessions, rewind, web, bench,
doctor."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path

from app.config import PROVIDERS, ConfigError, load_settings
from app.core.faults import stop_point

EXIT_OK, EXIT_USAGE, EXIT_PROVIDER, EXIT_EDITS = 0, 2, 3, 4
FORMATS = ("auto", "apply_patch", "search_replace", "whole")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 too; keep the message short
        self.print_usage(sys.stderr)
        print(f"steer: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _provider_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model")
    g.add_argument("--provider", choices=PROVIDERS, help="back-end (default: local, or your config)")
    g.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1")
    g.add_argument("--model", help="model name sent to the back-end")
    g.add_argument("--model-path", help="GGUF file for the local provider")
    g.add_argument("--format", choices=FORMATS, help="edit format the model is asked for (default auto)")
    g.add_argument("--max-tokens", type=int, help="cap on the answer's length")
    g.add_argument("--temperature", type=float)
    g.add_argument("--stall-timeout", type=float, help="seconds without data before giving up")
    g.add_argument("--agent", metavar="COMMAND",
                   help='run an ACP coding agent instead of a model, e.g. "codex-acp" or "gemini --acp"')


def find_root(start: Path) -> Path:
    """The repository's top level when `start` is inside one, else `start` itself."""
    from app.core.git import find_root as git_root

    return git_root(start)


def settings_from(args: argparse.Namespace):
    return load_settings(provider=args.provider, base_url=args.base_url, model=args.model,
                         model_path=args.model_path, format=args.format, max_tokens=args.max_tokens,
                         temperature=args.temperature, stall_timeout=args.stall_timeout,
                         agent=args.agent)


# -- steer run ---------------------------------------------------------------------------------
def _run_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="steer run", description="Run one instruction and print the resulting diff.",
                epilog="exit codes: 0 done, 2 usage or configuration, 3 the answer failed or was "
                       "cut short (nothing written), 4 an edit was refused or conflicted, or a "
                       "file could not be written (the others were; see the report)")
    p.add_argument("instruction")
    p.add_argument("-f", "--file", dest="files", action="append", default=[], metavar="PATH",
                   help="add a file to the model's context (repeatable)")
    p.add_argument("--outline", dest="outlines", action="append", default=[], metavar="PATH",
                   help="add only a file's outline (its definitions with line numbers): for a "
                        "file the model's context window cannot take whole (repeatable)")
    p.add_argument("-C", dest="directory", default=".", help="work in this directory")
    p.add_argument("--accept", choices=("all", "none"), default="none",
                   help="write the proposal to disk (default: none, only print it)")
    p.add_argument("--allow-read-only", action="store_true",
                   help="let edits write files that are read-only (mode without write bits)")
    p.add_argument("--stage", action="store_true",
                   help="with --accept all: stage exactly the accepted hunks in git (like git add -p;"
                        " your other changes stay unstaged)")
    p.add_argument("--json", action="store_true", help="print a JSON report instead of the diff")
    p.add_argument("--quiet", "-q", action="store_true", help="do not stream the answer to stderr")
    p.add_argument("--agent-permissions", choices=("reject", "allow"), default="reject",
                   help="how an --agent's permission requests are answered (default: reject once)")
    p.add_argument("--resume", metavar="ID", help="continue this saved session (steer sessions)")
    p.add_argument("--no-save", action="store_true", help="do not save this run as a session")
    _provider_flags(p)
    return p


def _lenient_stdout() -> None:
    # an answer may hold text no encoding can write (a lone surrogate): show it escaped
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]


def cmd_run(argv: list[str]) -> int:
    parser = _run_parser()
    args = parser.parse_args(argv)
    if args.stage and args.accept != "all":
        parser.error("--stage stages what --accept all wrote: give both")
    _lenient_stdout()
    from app.core.workspace import Workspace

    ws = Workspace(find_root(Path(args.directory).resolve()), allow_read_only=args.allow_read_only)
    state: dict = {}
    try:
        return asyncio.run(_run(args, ws, state))
    except KeyboardInterrupt:
        if "outcome" in state:
            print("\nsteer: interrupted after the accept; see above for what was written",
                  file=sys.stderr)
        elif not _finish_interrupted(ws):
            print("\nsteer: interrupted; nothing was written", file=sys.stderr)
        return 130


def _finish_interrupted(ws) -> bool:
    """Complete a step this process left open (the journal's recovery); report it. True when
    there was one."""
    from app.core.journal import Journal

    try:
        done = Journal.for_workspace(ws).recover(ws)
    except Exception as exc:  # the next steer command completes it; say so
        print(f"steer: the interrupted write is not complete ({exc}); any steer command that "
              "writes, or `steer undo`, completes it", file=sys.stderr)
        return True
    for e in done:
        _report_step(e, "completed an interrupted step: ")
    return bool(done)


def _report_step(entry, prefix: str = "") -> None:
    verb = "reverted" if entry.op == "undo" else "wrote"
    print(f"steer: {prefix}{entry.label} ({verb} {', '.join(entry.written) or 'no file'})",
          file=sys.stderr)
    for note in entry.notes:
        print(f"steer: {note}", file=sys.stderr)


async def _run(args: argparse.Namespace, ws, state: dict) -> int:
    from app.core.session import ContextError, Session
    from app.core.sessions import SessionError
    from app.providers.factory import build_provider
    from app.view.live import LiveStatus
    from app.view.outside_text import underneath

    cwd = Path(args.directory).resolve()
    try:
        settings = settings_from(args)
        provider = build_provider(settings, cwd=ws.root)
    except ConfigError as exc:
        print(f"steer: {exc}", file=sys.stderr)
        return EXIT_USAGE
    repo, refused = _open_for_staging(args, ws)
    if refused is not None:
        await provider.aclose()
        return refused
    session = None
    try:
        context = [os.path.relpath((cwd / f).resolve(strict=False), ws.root) for f in args.files]
        session = Session(ws, provider, fmt=settings.format, context=context,
                          max_tokens=settings.max_tokens, temperature=settings.temperature)
        for f in args.outlines:
            session.add_context(os.path.relpath((cwd / f).resolve(strict=False), ws.root), outline=True)
        budget = session.budget(args.instruction)
        if budget.over:  # never cut silently: say what does not fit, send nothing
            big = max(budget.files, key=budget.files.get, default="")
            print(f"steer: the request is {budget.text()}; {big} alone is ≈{budget.files.get(big, 0):,} "
                  f"tokens. Send its outline instead (--outline {big}), or fewer files; nothing "
                  "was sent", file=sys.stderr)
            await provider.aclose()
            return EXIT_USAGE
        if provider.capabilities.agent:
            # the agent's writes are staged as hunks at once; --accept decides at the end
            session.agent.write_policy = "stage"
            session.agent.on_permission = _permission_answerer(session, args.agent_permissions)
        # the live status writes its own sequences, and passes the answer through the boundary
        live = LiveStatus(underneath(sys.stderr), session, enabled=not args.quiet)
        if not args.no_save:
            _open_session(session, args.resume)
            live.sync.take()  # what a resumed session said before is not this run's output
        session.start(args.instruction)
    except (ContextError, SessionError) as exc:
        print(f"steer: {exc}", file=sys.stderr)
        await provider.aclose()
        if repo is not None:
            repo.close()
        if session is not None and session.log is not None:
            session.log.close()
        return EXIT_USAGE
    try:
        return await _run_turn(args, ws, state, session, live, repo)
    finally:
        if session.log is not None:
            session._log_lists()
            await asyncio.to_thread(session.log.close)


def _open_session(session, sid: str | None) -> None:
    """Save this run (a new session, or the one it continues); say which on stderr."""
    from app.core.resume import open_saved

    resumed = open_saved(session, resume_it=sid is not None, sid=sid)
    for msg in resumed.recovered if resumed else []:
        print(f"steer: {msg}", file=sys.stderr)
    print(f"steer: session {session.log.id}", file=sys.stderr)


async def _run_turn(args, ws, state: dict, session, live, repo) -> int:
    from app.view.live import report
    from app.view.render import unified

    provider = session.provider
    ticker = asyncio.create_task(live.follow())
    try:
        await session.wait()
    finally:
        ticker.cancel()
        await provider.aclose()
    turn = session.turn
    assert turn is not None and session.pending is not None and session.review is not None
    live.close()
    pending = session.pending
    outcome = None
    code = EXIT_OK
    if not turn.complete:
        code = EXIT_PROVIDER
        why = turn.error.message if turn.error else f"the answer ended early ({turn.finish_reason})"
        print(f"steer: {why}; nothing was written", file=sys.stderr)
    else:
        if pending.errors:
            code = EXIT_EDITS
        if args.accept == "all":
            stop_point("run:accepting")
            outcome = _accept_all(session.review, ws)
            state["outcome"] = outcome
            if not outcome.ok:
                code = EXIT_EDITS
    for err in pending.errors:
        print(f"steer: edit refused: {err.message}", file=sys.stderr)
    for h in pending.hunks:
        if h.warning and h.state.value == "pending":  # left out of --accept all
            print(f"steer: left for a deliberate accept: {h.path} hunk #{h.id} at line "
                  f"{h.base_start + 1}: {h.warning}", file=sys.stderr)
            if outcome is not None:  # not everything proposed was written (rule 9)
                code = code or EXIT_EDITS
    if outcome is not None:
        _report_accept(outcome)
    staged = _stage(repo, pending, outcome) if repo is not None else None
    if staged is not None and not staged.ok:
        code = EXIT_EDITS
    if args.json:
        data = report(session, turn, outcome, code)
        if session.log is not None:
            data["session"] = session.log.id
        if repo is not None:
            data["staged"] = staged.staged if staged else []
            data["stage_messages"] = staged.messages if staged else []
        # json.dumps escapes every control character but DEL: escaped too, so the report
        # holds none raw wherever it is printed
        print(json.dumps(data, indent=2).replace("\x7f", "\\u007f"))
    else:  # a byte-exact patch on a pipe; on a terminal (Shown) its escapes are shown
        sys.stdout.write(unified(pending))
    return code


def _permission_answerer(session, policy: str):
    allow = policy == "allow"
    kinds = ("allow_once", "allow_always") if allow else ("reject_once", "reject_always")

    def answer(req) -> None:
        choice = next((o for kind in kinds for o in req.options if o.kind == kind), None)
        session.agent.answer(req, choice.id if choice else None)
        how = "allowed" if allow and choice else "rejected"
        hint = "" if allow else " (--agent-permissions allow to allow)"
        print(f"\nsteer: {how} the agent's request: {req.title}{hint}", file=sys.stderr)

    return answer


def _accept_all(review, ws):
    """Accept everything; whatever goes wrong, say exactly which files were written."""
    from app.core.review import Outcome

    try:
        return review.accept_all()
    except Exception as exc:  # a full disk, a lock held too long, a bug: never a traceback
        out = Outcome(messages=[f"the accept stopped: {type(exc).__name__}: {exc}"])
        try:
            for e in review.journal.recover(ws):
                out.written += e.written
                out.not_written += e.notes
                out.recovered.append(f"completed the interrupted accept ({e.label})")
        except Exception as again:
            out.messages.append(f"it is not complete ({again}); any steer command that writes, "
                                "or `steer undo`, completes it")
        return out


def _report_accept(out) -> None:
    for msg in out.recovered:
        print(f"steer: {msg}", file=sys.stderr)
    for msg in out.messages:
        print(f"steer: {msg}", file=sys.stderr)
    if out.written:
        print(f"steer: accepted {len(out.accepted)} hunk(s), wrote {', '.join(out.written)}",
              file=sys.stderr)
    for why in out.not_written:
        print(f"steer: not written: {why}", file=sys.stderr)
    if out.written and not out.ok:
        print("steer: `steer undo` reverts the files that were written", file=sys.stderr)


def _open_for_staging(args: argparse.Namespace, ws):
    """(GitRepo, None) when --stage can work here, (None, exit code) when it cannot (said
    before anything is asked or written), (None, None) without --stage."""
    if not args.stage:
        return None, None
    from app.core.git import NOT_A_REPO, GitRepo

    repo = GitRepo.open(ws.root)
    if repo is None:
        print(f"steer: {NOT_A_REPO}; nothing was asked or written", file=sys.stderr)
        return None, EXIT_USAGE
    why = repo.refusal()
    if why:
        repo.close()
        print(f"steer: {why}", file=sys.stderr)
        return None, EXIT_EDITS
    return repo, None


def _stage(repo, pending, outcome):
    """Stage what the accept wrote (nothing when it wrote nothing), then let the repo go."""
    from app.core.git import StageResult

    try:
        result = repo.stage_accepted(pending) if outcome and outcome.accepted else StageResult()
    finally:
        repo.close()
    for msg in result.messages:
        print(f"steer: {msg}", file=sys.stderr)
    if result.staged:
        print(f"steer: staged the accepted hunks of {', '.join(result.staged)}", file=sys.stderr)
    return result


# -- steer undo --------------------------------------------------------------------------------
def cmd_undo(argv: list[str]) -> int:
    p = _Parser(prog="steer undo", description="Revert the last accepted change (no git needed).",
                epilog="exit codes: 0 done, 4 refused (a file changed since, or cannot be "
                       "written; the report says which files were reverted)")
    p.add_argument("-C", dest="directory", default=".")
    p.add_argument("--list", action="store_true", help="show the journal instead")
    p.add_argument("--allow-read-only", action="store_true",
                   help="let undo write files that are read-only")
    args = p.parse_args(argv)
    from app.core.journal import Journal, UndoRefused
    from app.core.workspace import Workspace

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
            _report_step(e, "completed an interrupted step: ")
        if any(e.op == "undo" for e in completed):
            return EXIT_EDITS if any(e.notes for e in completed) else EXIT_OK
        entry = journal.undo(ws)
    except UndoRefused as exc:
        print(f"steer: {exc}", file=sys.stderr)
        return EXIT_EDITS
    except Exception as exc:  # a lock held too long, a full disk, a lost blob: no traceback
        print(f"steer: undo stopped: {type(exc).__name__}: {exc}", file=sys.stderr)
        _finish_interrupted(ws)
        return EXIT_EDITS
    _report_step(entry)
    return EXIT_EDITS if entry.notes else EXIT_OK


# -- steer sessions / rewind -------------------------------------------------------------------
def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{max(seconds, 0):.0f}s"


def cmd_sessions(argv: list[str]) -> int:
    p = _Parser(prog="steer sessions", description="List the saved sessions of this repository, "
                "or fork one (steer --resume ID opens one).")
    p.add_argument("action", nargs="?", choices=("list", "fork"), default="list")
    p.add_argument("id", nargs="?", help="fork: the session to fork")
    p.add_argument("--at", type=int, metavar="TURN",
                   help="fork: keep the turns before this one (1-based); default all")
    p.add_argument("-C", dest="directory", default=".")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    import time

    from app.core.sessions import SessionError, SessionStore

    store = SessionStore(find_root(Path(args.directory).resolve()))
    try:
        if args.action == "fork":
            if args.id is None:
                p.error("fork needs the id of a session")
            new = store.fork(store.resolve(args.id), None if args.at is None else args.at - 1)
            print(new)
            return EXIT_OK
        infos = store.list()
    except SessionError as exc:
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
    p = _Parser(prog="steer rewind", description="Go back to before a turn of a saved session: "
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
    from app.core import rewind
    from app.core.journal import UndoRefused
    from app.core.provider import Provider
    from app.core.resume import resume, rewind_conversation
    from app.core.session import Session
    from app.core.sessions import SessionError, SessionStore
    from app.core.workspace import Busy, Workspace

    ws = Workspace(find_root(Path(args.directory).resolve()), allow_read_only=args.allow_read_only)
    session = Session(ws, Provider())  # no model is asked: a rewind only reads the log
    try:
        resume(session, SessionStore(ws.root), args.session)
    except (SessionError, Busy, OSError) as exc:
        print(f"steer: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return _rewind(args, session, rewind, rewind_conversation, UndoRefused, SessionError)
    finally:
        session.log.close()


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
                print(f"steer: the conversation is back to before turn {args.to} ({left} turn(s) "
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


# -- steer doctor -------------------------------------------------------------------------------
def cmd_doctor(argv: list[str]) -> int:
    p = _Parser(prog="steer doctor", description="Check whether steer can work on this machine: "
                "versions, the CPU, the embedded model (loaded and run in a child process), the "
                "config in effect, a remote endpoint, the running steer serve.",
                epilog="exit codes: 0 all is well, 1 a check failed (each is named at the end), "
                       "2 usage. No key is ever printed.")
    p.add_argument("--json", action="store_true", help="the same facts as JSON")
    p.add_argument("--skip-model", action="store_true",
                   help="do not load and run the embedded model (a quick run)")
    _provider_flags(p)
    args = p.parse_args(argv)
    from app.doctor import doctor

    try:
        settings, problem = settings_from(args), None
    except ConfigError as exc:  # the rest is still worth checking, with the defaults
        settings, problem = None, str(exc)
    _lenient_stdout()  # a model's token may be something the terminal cannot encode
    try:
        return doctor(settings, problem, as_json=args.json, skip_model=args.skip_model)
    except KeyboardInterrupt:  # the model check's child is stopped with it
        return 130


def cmd_web(argv: list[str]) -> int:
    from app.web import main as web_main

    return web_main(argv)


# -- steer serve / bench -----------------------------------------------------------------------
def cmd_serve(argv: list[str]) -> int:
    from app.server.chat_server import main as serve_main

    return serve_main(argv)


def cmd_bench(argv: list[str]) -> int:
    from app.bench import main as bench_main

    return bench_main(argv)


# -- steer [PATH]: the app ----------------------------------------------------------------------
def cmd_tui(argv: list[str]) -> int:
    p = _Parser(prog="steer", description="Pair-program with a language model, live.",
                epilog="sub-commands: run, serve, undo, sessions, rewind, web, bench, doctor "
                       "(steer run --help); steer doctor checks this machine")
    p.add_argument("path", nargs="?", default=".", help="the workspace (default: here)")
    p.add_argument("-f", "--file", dest="files", action="append", default=[], metavar="PATH")
    p.add_argument("--resume", nargs="?", const="", metavar="ID",
                   help="resume the last saved session, or this one (steer sessions lists them)")
    p.add_argument("--session", metavar="ID", help=argparse.SUPPRESS)  # steer web: resume or new
    p.add_argument("--no-save", action="store_true", help="do not save this session")
    _provider_flags(p)
    args = p.parse_args(argv)
    start = Path(args.path).resolve()
    if not start.is_dir():
        print(f"steer: {args.path} is not a directory", file=sys.stderr)
        return EXIT_USAGE
    root = find_root(start)
    try:
        settings = settings_from(args)
        from app.providers.factory import build_provider

        provider = build_provider(settings, cwd=root)
    except ConfigError as exc:
        print(f"steer: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from app.core.sessions import SessionError
    from app.ui.app import SteerApp

    context = [os.path.relpath((Path.cwd() / f).resolve(), root) for f in args.files]
    saving = None if args.no_save else {"resume_it": args.resume is not None,
                                        "sid": args.resume or args.session}
    try:
        app = SteerApp(root, provider, settings, context=context, saving=saving)
    except SessionError as exc:
        print(f"steer: {exc}", file=sys.stderr)
        return EXIT_USAGE
    app.run()
    return EXIT_OK


COMMANDS = {"run": cmd_run, "undo": cmd_undo, "serve": cmd_serve, "bench": cmd_bench,
            "sessions": cmd_sessions, "rewind": cmd_rewind, "web": cmd_web, "doctor": cmd_doctor}


# sub-commands whose output quotes outside text (answers, paths, instructions, servers'
# errors): on a terminal it is shown, never obeyed
SHOWN = frozenset({"run", "undo", "sessions", "rewind", "doctor"})


@contextlib.contextmanager
def _shown_on_terminals():
    """stdout and stderr pass the boundary for outside text while they are terminals; on a
    pipe or a file they carry the bytes as they are (a diff stays a byte-exact patch)."""
    from app.view.outside_text import Shown

    saved = sys.stdout, sys.stderr
    if sys.stdout.isatty():
        sys.stdout = Shown(sys.stdout)  # type: ignore[assignment]
    if sys.stderr.isatty():
        sys.stderr = Shown(sys.stderr)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in SHOWN:
        with _shown_on_terminals():
            return COMMANDS[argv[0]](argv[1:])
    if argv and argv[0] in COMMANDS:
        return COMMANDS[argv[0]](argv[1:])
    if argv and argv[0] in ("-V", "--version"):
        from app import __version__

        print(f"steer {__version__}")
        return EXIT_OK
    return cmd_tui(argv)
