"""`steer run --variants N`: one instruction answered N times at once; `--check CMD` runs CMD
on each finished variant in a throwaway git worktree and writes the first that passes,
`--pick K` writes variant K, and without either nothing is written: each variant's diff is
printed under a header of its own. Whatever is written goes through the normal accept path
(journal, undo, compare-and-swap)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

from app.cli.common import EXIT_EDITS, EXIT_OK, EXIT_PROVIDER, EXIT_USAGE, ConfigError
from app.core.text.plural import plural


def say(line: str) -> None:
    """A line on stderr; on a terminal, what a model, a server or a check printed passes the
    boundary for outside text (its escapes shown, never obeyed)."""
    from app.view.outside_text import terminal

    print(terminal(line, dim=False) if sys.stderr.isatty() else line, file=sys.stderr)


def usage_error(args: argparse.Namespace, n: int, root) -> str | None:
    """Why these flags cannot run here, said before any request is sent."""
    from app.core.variants.check import command_error, refusal

    if args.pick is not None and not 1 <= args.pick <= n:
        return f"--pick {args.pick}: there are variants 1 to {n}"
    if args.pick is not None and args.check:
        return "--pick and --check both choose the variant to write: give one"
    if n > 1 and args.accept == "all" and args.pick is None and not args.check:
        return "--accept all with --variants: say which variant to write (--pick K or --check CMD)"
    if args.stage:
        return "--stage with --variants is not supported: stage after the run (git add -p)"
    if args.check:
        why = command_error(args.check)
        if why:
            return why
        why = refusal(root)
        if why:
            return f"--check: {why}"
    if args.check_timeout <= 0:
        return "--check-timeout takes a number of seconds above 0"
    return None


async def run_variants(args: argparse.Namespace, ws, settings, held: list, state: dict) -> int:
    from app.config import project_rules, variant_count
    from app.core.conversation.session import ContextError, Session
    from app.core.variants.group import Variants, VariantsRefused
    from app.providers.factory import build_variant_providers

    try:
        n = variant_count(settings)
        why = usage_error(args, n, ws.root)
        if why:
            raise ConfigError(why)
        providers = build_variant_providers(settings, cwd=ws.root)
    except ConfigError as exc:
        say(f"steer: {exc}")
        return EXIT_USAGE
    main = Session(ws, providers[0], fmt=settings.format, max_tokens=settings.max_tokens,
                   temperature=settings.temperature)
    main.rules = project_rules(settings, ws)
    variants = Variants(main)
    try:
        main.knowledge = held[0] if held else None
        cwd = Path(args.directory).resolve()
        for f in args.files:
            main.files.add(os.path.relpath((cwd / f).resolve(strict=False), ws.root))
        for f in args.outlines:
            main.files.add(os.path.relpath((cwd / f).resolve(strict=False), ws.root),
                             outline=True)
        variants.ask(args.instruction, providers[1:])
    except (ContextError, VariantsRefused) as exc:
        say(f"steer: {exc}")
        for p in providers[1:]:
            await p.aclose()
        await main.aclose()
        return EXIT_USAGE
    say(f"steer: asked {n} variants: " + ", ".join(f"{v.index} {v.label}" for v in variants.items))
    try:
        return await _race(args, ws, variants, state)
    finally:
        await variants.aclose()


async def _race(args: argparse.Namespace, ws, variants, state: dict) -> int:
    """Every variant to its end (or until a check passes), then the chosen one written."""
    from app.core.variants.check import Checks
    from app.core.variants.group import final_files

    checks = Checks(ws.root, args.check, timeout=args.check_timeout,
                    sandbox=args.check_sandbox) if args.check else None
    ended: list[int] = []

    async def one(v) -> None:
        await v.session.wait()
        turn = v.session.turn
        ended.append(v.index)
        say(f"steer: variant {v.index} {_ended_line(v)}")
        if checks is not None and turn is not None and turn.complete:
            checks.start(v.index, final_files(v.session.pending))

    picked = None
    try:
        runs = [asyncio.create_task(one(v)) for v in variants.items]
        if checks is None:
            await asyncio.gather(*runs)
        else:
            async def all_started() -> None:
                await asyncio.gather(*runs)
                checks.close_starts()

            closer = asyncio.create_task(all_started())
            result = await checks.first_pass()
            if result is not None:  # the others are not needed any more
                picked = result.variant
                variants.interrupt()
            await closer
        if args.pick is not None:
            picked = args.pick
        return _finish(args, ws, variants, checks, picked, state)
    finally:
        if checks is not None:
            await checks.aclose()


def _ended_line(v) -> str:
    turn = v.session.turn
    if turn is None:
        return "did not start"
    p = v.session.pending
    hunks = len(p.hunks) if p is not None else 0
    how = "done" if turn.complete else (turn.error.message if turn.error else turn.finish_reason)
    return f"{how}: {turn.tokens} tokens, {plural(hunks, 'hunk')}, {turn.elapsed:.2f} s"


def _finish(args: argparse.Namespace, ws, variants, checks, picked: int | None,
            state: dict) -> int:
    from app.cli.accepting import accept_all, left_open, report_accept
    from app.core.text.masking import mask_tree
    from app.core.variants.group import summary
    from app.view.render import unified

    code, outcome, chosen = EXIT_OK, None, None
    if checks is not None:
        for r in sorted(checks.results.values(), key=lambda r: r.variant):
            how = "passed" if r.passed else r.error or f"exited {r.exit_code}"
            say(f"steer: check on variant {r.variant}: {how} ({r.seconds:.2f} s)")
            if not r.passed and r.output.strip():
                tail = r.output.strip().splitlines()[-3:]
                say("\n".join(f"  {line}" for line in tail))
    if picked is not None:
        chosen = next(v for v in variants.items if v.index == picked)
        turn = chosen.session.turn
        if turn is None or not turn.complete:
            say(f"steer: variant {picked} did not complete; nothing was written")
            code = EXIT_PROVIDER
        else:
            state["outcome"] = outcome = accept_all(chosen.session.review, ws)
            report_accept(outcome)
            left = left_open(chosen.session.pending)
            for line in left:
                say(f"steer: not written: {line}")
            if not outcome.ok or left or chosen.session.pending.errors:
                code = EXIT_EDITS
            say(f"steer: wrote variant {picked} ({chosen.label})")
    elif checks is not None:
        say("steer: no variant passed the check; nothing was written")
        code = EXIT_EDITS
    else:
        if not any(v.session.turn is not None and v.session.turn.complete for v in variants.items):
            code = EXIT_PROVIDER
        say("steer: nothing written: --pick K writes variant K, --check CMD the first that "
            "passes")
    if args.json:
        rows = []
        for v in variants.items:
            row = summary(v)
            r = checks.results.get(v.index) if checks is not None else None
            row["check"] = None if r is None else {
                "exit_code": r.exit_code, "seconds": round(r.seconds, 4), "error": r.error or None}
            row["picked"] = v.index == picked
            rows.append(row)
        data = {"exit_code": code, "instruction": args.instruction, "picked": picked,
                "written": outcome.written if outcome is not None else [], "variants": rows}
        print(json.dumps(mask_tree(data), indent=2).replace("\x7f", "\\u007f"))
    elif chosen is not None:
        sys.stdout.write(unified(chosen.session.pending))
    else:
        for v in variants.items:
            if v.session.pending is not None and v.session.pending.hunks:
                sys.stdout.write(f"# steer variant {v.index}: {v.label}\n")
                sys.stdout.write(unified(v.session.pending))
    return code
