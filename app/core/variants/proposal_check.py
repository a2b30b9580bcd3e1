"""The check on every finished proposal, before any accept (config `check = "…"`, or
`steer --check CMD`): as soon as an answer ends, its whole proposal is written into a
throwaway git worktree and the command runs there (check.py: the user's uncommitted and
untracked files copied, a process group, a timeout, cleanup on every path). The user's
tree, index and refs are never touched, and the event loop never waits for it.

The result goes on the answer's Turn (`check`: "✓ check 2.1 s", "✗ check: 1 failed
(test_sub)"; `check_output`: the end of what it printed), and `Checked` is published so the
screen redraws the answer's title and card. A failure goes back to the model in one key
(`failure()` is the message), and `recheck()` checks what the disk would hold: what was
accepted already, plus the hunks the user marked (none marked: every open one).
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from app.core.conversation import prompts
from app.core.conversation.session import Session
from app.core.conversation.turn import Turn
from app.core.edits.diff import PendingDiff
from app.core.edits.hunks import OPEN, Hunk, HunkState
from app.core.review.events import Checked, Ended
from app.core.text.linediff import Change, apply_changes
from app.core.text.textfile import encode
from app.core.variants.check import CheckRefused, CheckResult, Checks, verdict
from app.core.variants.group import final_files

RUNNING = "… check running"


def marked(pending: PendingDiff) -> list[Hunk]:
    """The open hunks the user marked for the check (Review.mark)."""
    return [h for h in pending.hunks if h.marked and h.state in OPEN]


def would_hold(pending: PendingDiff) -> dict[str, bytes | None]:
    """Each file as the disk would hold it: what steer believes is there (the base and the
    accepted hunks) with the marked open hunks taken; none marked, every open one (what
    Accept all would leave)."""
    out: dict[str, bytes | None] = {}
    some = bool(marked(pending))
    for fd in pending.files.values():
        taken = sorted((h for h in fd.hunks if h.state in OPEN and h.state != HunkState.CONFLICT
                        and (h.marked or not some)), key=lambda h: h.base_start)
        if not taken:
            continue
        if fd.deleted:
            out[fd.path] = None
            continue
        before, shift = fd.expected()
        lines = apply_changes(before, [Change(h.base_start + shift(h.base_start),
                                              h.base_end + shift(h.base_start), h.new)
                                       for h in taken])
        out[fd.move_to or fd.path] = encode(lines, fd.base.fmt, fd.base.lines)
        if fd.move_to:
            out[fd.path] = None
    return out


class ProposalCheck:
    """Checks each finished proposal of `session` with `cmd`; one check at a time (a newer
    proposal stops the one running)."""

    def __init__(self, session: Session, cmd: str, *, timeout: float = 120.0,
                 sandbox: bool = False) -> None:
        self.session, self.cmd, self.timeout, self.sandbox = session, cmd, timeout, sandbox
        self.last: tuple[Turn, CheckResult] | None = None  # the last check that ended
        self._task: asyncio.Task[None] | None = None
        self._unsubscribe = session.changes.subscribe(self._heard)

    def _heard(self, event: Any) -> None:
        turn = self.session.turn
        if type(event) is Ended and turn is not None and event.turn is turn:
            pending = self.session.pending
            if turn.complete and pending is not None and any(h.state in OPEN for h in pending.hunks):
                self.start(turn, final_files(pending))

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self, turn: Turn, files: dict[str, bytes | None]) -> None:
        if self._task is not None:
            self._task.cancel()  # its worktree goes in its own finally
        turn.check, turn.check_output = RUNNING, ""
        self.session.changes.publish(Checked(turn))
        self._task = asyncio.get_running_loop().create_task(self._run(turn, files))

    def recheck(self) -> str:
        """`!`: check what the disk would hold with the marked hunks taken (none marked:
        after Accept all). What it started, said."""
        pending, turn = self.session.pending, self.session.turn
        if pending is None or turn is None:
            return "nothing to check yet"
        files = would_hold(pending)
        if not files:
            return "no open hunks: the files on disk are what a check would see"
        self.start(turn, files)
        n = len(marked(pending))
        what = (f"what you accepted plus the {n} marked hunk{'s' * (n != 1)}" if n else
                "what Accept all would write")
        return f"checking {what} ({len(files)} file(s)): {self.cmd}"

    def failure(self) -> str | None:
        """The follow-up that sends the last failing check back, or None (it passed, or none
        ended since the answer shown)."""
        if self.last is None:
            return None
        turn, result = self.last
        if result.passed or turn is not self.session.turn:
            return None
        return prompts.check_failed(self.cmd, verdict(result), result.output)

    async def _run(self, turn: Turn, files: dict[str, bytes | None]) -> None:
        checks = None
        try:
            checks = await asyncio.to_thread(Checks, Path(self.session.ws.root), self.cmd,
                                             timeout=self.timeout, sandbox=self.sandbox)
            checks.start(1, files)
            checks.close_starts()
            await checks.first_pass()
            result = checks.results[1]
        except CheckRefused as exc:
            result = CheckResult(1, None, 0.0, "", error=str(exc))
        except asyncio.CancelledError:  # a newer proposal's check took its place
            if turn.check == RUNNING:
                turn.check = ""
            raise
        finally:
            if checks is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(checks.aclose())
        self.last = (turn, result)
        turn.check = verdict(result)
        turn.check_output = "" if result.passed else result.output
        self.session.changes.publish(Checked(turn))

    async def aclose(self) -> None:
        self._unsubscribe()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
