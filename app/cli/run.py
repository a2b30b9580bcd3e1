"""`steer run`: one instruction from the shell, its diff on stdout, the answer on stderr,
and an exit code a script can trust."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

from app import launch_gc
from app.cli.accepting import accept_all, left_open, report_accept
from app.cli.common import (
    EXIT_EDITS,
    EXIT_OK,
    EXIT_PROVIDER,
    EXIT_USAGE,
    ConfigError,
    Parser,
    finish_interrupted,
    lenient_stdout,
    provider_flags,
    settings_from,
)
from app.core.disk.git_dirs import find_root
from app.core.faults import stop_point
from app.core.text.plural import plural

# seconds `steer run` gives a map that needs no long parse: launch -> request stays under 2 s
# (the start-up before it takes ~0.4 s here), and a cached 20,000-file tree's map makes it
MAP_SETTLE = 1.4
MAP_FINISH = 120.0  # seconds a first build may go on after the answer, to be cached


# -- steer run ---------------------------------------------------------------------------------
def _run_parser() -> argparse.ArgumentParser:
    p = Parser(prog="steer run", description="Run one instruction and print the resulting diff.",
                epilog="exit codes: 0 done (with --accept all: every proposed hunk written), 2 "
                       "usage or configuration, 3 the answer failed or was cut short (nothing "
                       "written), 4 a block was refused, a hunk conflicted or was left for a "
                       "deliberate accept, or a file could not be written (the others were; "
                       "one line per file says why)")
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
    p.add_argument("--check", metavar="CMD",
                   help="run CMD (a shell command line) on the finished proposal in a throwaway "
                        "git worktree: --accept all writes it only if CMD exits 0 (exit 4 and "
                        "nothing written otherwise); with --variants, on each variant, and the "
                        "first it passes is written. CMD runs the proposal's code")
    p.add_argument("--check-sandbox", action="store_true",
                   help="run the check in bubblewrap: the system read-only, no network, writes "
                        "only in its worktree (config: check_sandbox = true)")
    p.add_argument("--fix", type=int, default=0, metavar="N",
                   help="with --check: send a failing check's output back, up to N times, and "
                        "take the first proposal that passes")
    p.add_argument("--check-timeout", type=float, default=120.0, metavar="S",
                   help="seconds a check may run before it is killed with its children "
                        "(default 120)")
    p.add_argument("--pick", type=int, metavar="K", help="write variant K (with --variants)")
    p.add_argument("--no-tools", action="store_true",
                   help="do not let the model read, grep or list files itself (the repository "
                        "map still goes with the request); config: tools = false")
    p.add_argument("--no-rules", action="store_true",
                   help="do not send the project's AGENTS.md (or CLAUDE.md...) and your own "
                        "~/.config/steer/AGENTS.md with the request; config: rules = false")
    provider_flags(p)
    return p


def cmd_run(argv: list[str]) -> int:
    parser = _run_parser()
    args = parser.parse_args(argv)
    if args.stage and args.accept != "all":
        parser.error("--stage stages what --accept all wrote: give both")
    lenient_stdout()
    from app.core.disk.workspace import Workspace

    ws = Workspace(find_root(Path(args.directory).resolve()), allow_read_only=args.allow_read_only)
    state: dict = {}
    try:
        return asyncio.run(_run(args, ws, state))
    except KeyboardInterrupt:
        if "outcome" in state:
            print("\nsteer: interrupted after the accept; see above for what was written",
                  file=sys.stderr)
        elif not finish_interrupted(ws):
            print("\nsteer: interrupted; nothing was written", file=sys.stderr)
        return 130


async def _run(args: argparse.Namespace, ws, state: dict) -> int:
    """The run, with the repository map building beside it from launch (never waited for:
    the request takes what is ready), closed at the end (its cache then serves the next)."""
    held: list = []
    try:
        return await _run_with(args, ws, state, held)
    finally:
        for know in held:
            if not know.builder.status().complete and know.builder.status().state != "failed":
                # the answer is out; the first build goes on to its end, so the next run
                # starts from a complete cache instead of parsing again
                print("steer: caching the repository map for the next run…", file=sys.stderr)
                await asyncio.to_thread(know.builder.wait_built, MAP_FINISH)
            await asyncio.to_thread(know.close)


async def _run_with(args: argparse.Namespace, ws, state: dict, held: list) -> int:
    from app.cli.common import knowledge_for
    from app.core.conversation.session import ContextError, Session
    from app.core.storage.records import SessionError
    from app.providers.factory import build_provider
    from app.view.live import LiveStatus
    from app.view.outside_text import underneath

    cwd = Path(args.directory).resolve()
    try:
        settings = settings_from(args)
        if args.no_tools:
            settings = settings.model_copy(update={"tools": False})
        if args.no_rules:
            settings = settings.model_copy(update={"rules": False})
        args.check_sandbox = args.check_sandbox or settings.check_sandbox
        provider = build_provider(settings, cwd=ws.root)
    except ConfigError as exc:
        print(f"steer: {exc}", file=sys.stderr)
        return EXIT_USAGE
    repo, refused = _open_for_staging(args, ws)
    if refused is not None:
        await provider.aclose()
        return refused
    held.append(knowledge_for(settings, ws.root, one_shot=True).start())
    from app.config import project_rules, variant_count

    if variant_count(settings) > 1 or args.pick is not None:
        from app.cli.run_variants import run_variants

        await provider.aclose()
        await asyncio.to_thread(held[0].builder.settle, MAP_SETTLE, args.instruction)
        launch_gc.launched()
        return await run_variants(args, ws, settings, held, state)
    if args.check or args.fix:
        from app.cli.run_check import check_error

        why = check_error(args, ws.root)
        if why:
            print(f"steer: {why}", file=sys.stderr)
            await provider.aclose()
            return EXIT_USAGE
    session = None
    try:
        context = [os.path.relpath((cwd / f).resolve(strict=False), ws.root) for f in args.files]
        session = Session(ws, provider, fmt=settings.format, context=context,
                          max_tokens=settings.max_tokens, temperature=settings.temperature)
        session.rules = project_rules(settings, ws)
        session.knowledge = held[0]
        # the map from the cache, or a small tree's parse, is worth its moment; a large
        # cold tree is not waited for (its paths go now, the next run has the cache)
        await asyncio.to_thread(held[0].builder.settle, MAP_SETTLE, args.instruction)
        for f in args.outlines:
            session.files.add(os.path.relpath((cwd / f).resolve(strict=False), ws.root), outline=True)
        budget = session.budget(args.instruction)
        if budget.over:  # never cut silently: say what does not fit, send nothing
            big = max(budget.files, key=lambda f: budget.files[f], default="")
            print(f"steer: the request is {budget.text()}; {big} alone is ≈{budget.files.get(big, 0):,} "
                  f"tokens. Send its outline instead (--outline {big}), or fewer files; nothing "
                  "was sent", file=sys.stderr)
            await provider.aclose()
            return EXIT_USAGE
        if provider.capabilities.agent:
            # the agent's writes are staged as hunks at once; --accept decides at the end
            session.agent.write_policy = "stage"
            session.agent.asked.subscribe(_permission_answerer(session, args.agent_permissions))
        # the live status writes its own sequences, and passes the answer through the boundary
        live = LiveStatus(underneath(sys.stderr), session, enabled=not args.quiet)
        if not args.no_save:
            _open_session(session, args.resume)
            live.sync.take()  # what a resumed session said before is not this run's output
        launch_gc.launched()  # everything the request needs is built (app/launch_gc.py)
        session.start(args.instruction)
        _say_rules(session.rules_now)
        if session.attached_now:  # what a model without look-ups sees besides -f's files
            print(f"steer: attached {', '.join(session.attached_now)} (the model cannot look "
                  "files up; -f picks files)", file=sys.stderr)
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
        await session.saving.close()


def _say_rules(rules) -> None:
    """Which rules files went with the request, and which were left out and why."""
    if rules is None:
        return
    if rules.sources:
        print(f"steer: with the rules of {', '.join(rules.sources)}", file=sys.stderr)
    for why in rules.skipped:
        print(f"steer: rules left out: {why}", file=sys.stderr)


def _open_session(session, sid: str | None) -> None:
    """Save this run (a new session, or the one it continues); say which on stderr. A state
    dir that cannot hold sessions is said in one line, and the run goes on unsaved."""
    from app.core.conversation.resume import open_saved
    from app.core.disk.state_home import StateUnusable

    try:
        resumed = open_saved(session, resume_it=sid is not None, sid=sid)
    except StateUnusable as exc:
        print(f"steer: {exc}; this run is not saved", file=sys.stderr)
        return
    for msg in resumed.recovered if resumed else []:
        print(f"steer: {msg}", file=sys.stderr)
    print(f"steer: session {session.log.id}", file=sys.stderr)


async def _run_turn(args, ws, state: dict, session, live, repo) -> int:
    from app.core.text.masking import mask_tree
    from app.view.live import report
    from app.view.render import unified

    provider = session.provider
    ticker = asyncio.create_task(live.follow())
    rounds = []
    try:
        await session.wait()
        if args.check:  # every proposal checked in a worktree; a failure sent back (--fix)
            from app.cli.run_check import check_rounds

            rounds = await check_rounds(session, ws.root, args.check, args.check_timeout,
                                        args.fix, sandbox=args.check_sandbox)
    finally:
        ticker.cancel()
        await provider.aclose()
    turn = session.turn
    passed = not rounds or (rounds[-1].check is not None and rounds[-1].check.passed)
    assert turn is not None and session.pending is not None and session.review is not None
    live.close()
    pending = session.pending
    outcome = None
    code = EXIT_OK
    if not turn.complete:
        code = EXIT_PROVIDER
        why = turn.error.message if turn.error else f"the answer ended early ({turn.finish_reason})"
        print(f"steer: {why}; nothing was written", file=sys.stderr)
    elif not passed:  # the check decides: a proposal it fails is never written
        code = EXIT_EDITS
        print("steer: no proposal passed the check; nothing was written", file=sys.stderr)
    else:
        if pending.errors:
            code = EXIT_EDITS
        if args.accept == "all":
            stop_point("run:accepting")
            outcome = accept_all(session.review, ws)
            state["outcome"] = outcome
            if not outcome.ok:
                code = EXIT_EDITS
    for err in pending.errors:
        print(f"steer: edit refused: {err.message}", file=sys.stderr)
    if outcome is not None:
        report_accept(outcome)
        left = left_open(pending)
        for line in left:  # not everything proposed was written (rule 9): one line per file
            print(f"steer: not written: {line}", file=sys.stderr)
        if left:
            code = code or EXIT_EDITS
    elif turn.complete and pending.hunks and passed:  # the user's choice: said, no failure
        for line in left_open(pending, flagged=True):  # what an accept would leave: said now
            print(f"steer: needs a look: {line}", file=sys.stderr)
        files = {h.path for h in pending.hunks}
        print(f"steer: nothing written (--accept none): {plural(len(pending.hunks), 'hunk')} in "
              f"{plural(len(files), 'file')} proposed; --accept all writes them", file=sys.stderr)
    staged = _stage(repo, pending, outcome) if repo is not None else None
    if staged is not None and not staged.ok:
        code = EXIT_EDITS
    if args.json:
        data = report(session, turn, outcome, code)
        if session.log is not None:
            data["session"] = session.log.id
        if rounds:
            data["rounds"] = [r.row() for r in rounds]
        if repo is not None:
            data["staged"] = staged.staged if staged else []
            data["stage_messages"] = staged.messages if staged else []
        # json.dumps escapes every control character but DEL: escaped too, so the report
        # holds none raw wherever it is printed
        print(json.dumps(mask_tree(data), indent=2).replace("\x7f", "\\u007f"))
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


def _open_for_staging(args: argparse.Namespace, ws):
    """(GitRepo, None) when --stage can work here, (None, exit code) when it cannot (said
    before anything is asked or written), (None, None) without --stage."""
    if not args.stage:
        return None, None
    from app.core.git.repository import NOT_A_REPO, GitRepo

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
    from app.core.git.repository import StageResult

    try:
        result = repo.stage_accepted(pending) if outcome and outcome.accepted else StageResult()
    finally:
        repo.close()
    for msg in result.messages:
        print(f"steer: {msg}", file=sys.stderr)
    if result.staged:
        print(f"steer: staged the accepted hunks of {', '.join(result.staged)}", file=sys.stderr)
    return result
