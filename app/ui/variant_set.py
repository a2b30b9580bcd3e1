"""What the app does with a set of variants (app/core/variants), apart from where it shows
it: ask a set with the back-ends the CLI builds, run the check on every finished variant,
the compare dialog, and the tabs, cards and status part the panes draw. The main screen
routes the keys here and hands the pictures to the panes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Literal

from textual.screen import ModalScreen

from app.core.edits.hunks import Hunk
from app.core.provider import Provider
from app.core.variants.check import CheckCommand, CheckRefused, CheckResult, Checks
from app.core.variants.group import Variants, VariantsRefused, final_files
from app.ui.dialogs.compare import CompareScreen
from app.view import variants as shown
from app.view.status import Part, StatusLine

# the back-ends a set of N variants asks: variant 1's when it is not the session's own
# (--variant-models names it), and the others'; raises ValueError with a reason
VariantBackends = Callable[[int], tuple[Provider | None, list[Provider]]]
Said = tuple[str, Literal["information", "warning", "error"]]  # a message for the user


class VariantSet:
    def __init__(self, variants: Variants, ask: VariantBackends | None,
                 check: CheckCommand) -> None:
        self.variants = variants
        self.backends = ask
        self.command, self.timeout, self.sandbox = check.cmd, check.timeout, check.sandbox
        self.checks: dict[int, CheckResult] = {}  # this set's results, by variant

    def ask(self, text: str, n: int) -> Said | None:
        """Send `text` as `n` variants; what went wrong, if anything."""
        if self.backends is None:
            return ("variants are not available here: steer was started without the back-ends "
                    "to ask them", "error")
        try:
            first, siblings = self.backends(n)
            self.variants.ask(text, siblings, first)
        except (VariantsRefused, ValueError) as exc:
            return str(exc), "error"
        self.checks = {}
        return None

    # -- what the panes draw ------------------------------------------------------------
    def tabs(self) -> str:
        return shown.tabs(self.variants, self.checks) if self.variants.active else ""

    def cards(self) -> str:
        v = self.variants
        return "\n".join(shown.card(x, i == v.shown, self.checks.get(x.index))
                         for i, x in enumerate(v.items)) if v.active else ""

    def status(self, status: str) -> str:
        """The status line, naming the variant on screen first."""
        if not self.variants.active:
            return status
        parts = status.parts if isinstance(status, StatusLine) else (Part(status, 1),)
        return StatusLine([Part(shown.where(self.variants), 0), *parts])

    def compare(self, path: str | None, hunk: Hunk | None) -> ModalScreen | Said:
        if hunk is None or path is None:
            return "put the diff's cursor on a hunk to compare the variants there", "information"
        return CompareScreen(path, hunk.base_start, self.variants.region(path, hunk))

    # -- the check (!) --------------------------------------------------------------------
    async def check(self, say: Callable[[str], object]) -> Said:
        """The check on every variant that finished, each in a throwaway git worktree."""
        cmd = self.command
        if not cmd:
            return ("no check command: start steer with --check CMD, or set check = \"...\" in "
                    "the config", "warning")
        done = [v for v in self.variants.items if v.session.turn is not None
                and v.session.turn.complete and v.session.pending is not None]
        if not done:
            return "no variant has finished yet", "warning"
        try:  # it asks git and reads /proc first: off the event loop
            checks = await asyncio.to_thread(Checks, self.variants.main.ws.root, cmd,
                                             timeout=self.timeout, sandbox=self.sandbox)
        except CheckRefused as exc:
            return str(exc), "warning"
        say(f"checking {len(done)} variant(s): {cmd}")
        try:
            for v in done:
                assert v.session.pending is not None
                checks.start(v.index, final_files(v.session.pending))
            checks.close_starts()
            results = await checks.run_all()
        finally:
            await checks.aclose()
        self.checks.update({r.variant: r for r in results})
        passed = [str(r.variant) for r in results if r.passed]
        if passed:
            return f"check passed on variant {', '.join(passed)}", "information"
        return "the check failed on every variant", "warning"
