"""`steer run --check CMD [--fix N]`: one answer, checked before anything is written.

Each finished proposal is written, whole, into a throwaway git worktree (the variants'
runner: app/core/variants/check.py) and CMD runs there; the user's tree, index and refs are
never touched. A failing check is sent back as a follow-up (`--fix N`: up to N of them), so
the model fixes its proposal in the same change set; the first proposal that passes is what
`--accept all` writes. None passing: nothing is written, exit 4.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Round:
    """One proposal and its check."""

    n: int  # 1-based
    tokens: int
    seconds: float  # the answer's, request to last token
    check: Any = None  # CheckResult, None when the answer did not complete
    failed: list[str] = field(default_factory=list)  # the failing tests it names

    def row(self) -> dict:
        r = self.check
        return {"round": self.n, "tokens": self.tokens, "seconds": round(self.seconds, 4),
                "check": None if r is None else {
                    "passed": r.passed, "exit_code": r.exit_code,
                    "seconds": round(r.seconds, 4), "error": r.error or None,
                    "failed_tests": self.failed}}


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def check_error(args, root: Path) -> str | None:
    """Why --check / --fix cannot run here, said before any request."""
    from app.core.variants.check import command_error, refusal, sandbox_problem

    if args.fix and not args.check:
        return "--fix N sends a failing check back: give the check (--check CMD)"
    if args.fix < 0:
        return "--fix takes a number of follow-ups, 0 or more"
    if args.check_timeout <= 0:
        return "--check-timeout takes a number of seconds above 0"
    why = command_error(args.check, root)
    if why:
        return why
    why = refusal(root)
    if why:
        return f"--check: {why}"
    why = sandbox_problem() if args.check_sandbox else None
    return f"--check-sandbox: {why}" if why else None


async def check_rounds(session, root: Path, cmd: str, timeout: float, fix: int,
                       follow=None, sandbox: bool = False) -> list[Round]:
    """Check the session's answer (it has ended); while it fails and `fix` allows, send the
    failure back and check the answer to that. `follow`: an awaitable factory that shows an
    answer while it streams (the live status)."""
    from app.core.conversation import prompts
    from app.core.variants.check import Checks, failed_tests, gist, verdict
    from app.core.variants.group import final_files

    rounds: list[Round] = []
    while True:
        turn = session.turn
        rnd = Round(len(rounds) + 1, turn.tokens, turn.elapsed or 0.0)
        rounds.append(rnd)
        if not turn.complete:
            return rounds
        checks = Checks(root, cmd, timeout=timeout, sandbox=sandbox)
        try:
            checks.start(rnd.n, final_files(session.pending))
            checks.close_starts()
            await checks.first_pass()
            result = checks.results[rnd.n]
        finally:
            await checks.aclose()  # the worktree goes on every path
        rnd.check, rnd.failed = result, failed_tests(result.output)
        say(f"steer: round {rnd.n}: {verdict(result)}")
        if result.passed or rnd.n > fix:
            if not result.passed and result.output.strip():
                say("\n".join(f"  {line}" for line in gist(result.output)))
            return rounds
        say(f"steer: sending the failure back (fix {rnd.n} of {fix})")
        session.start(prompts.check_failed(cmd, verdict(result), result.output))
        if follow is not None:
            await follow(session)
        else:
            await session.wait()
