"""The review's line mode: picking single lines of the hunk under the cursor (✓), what y
then writes (nothing while nothing is picked), and the first y that says why a pick would
leave the file unparsable instead of writing it. A base of the review pane
(panes/review.py), kept here by its job."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widget import Widget

from app.core.edits.hunks import OPEN, Hunk, pick_lines

if TYPE_CHECKING:
    from app.core.conversation.session import Session
    from app.core.review.review import AcceptPlan, Outcome
    from app.ui.widgets.diff_view import DiffView
    from app.ui.widgets.line_preview import LinePreview


class LineKeys(Widget):
    """A base of ReviewPane, which sets these up."""

    diff: DiffView
    preview: LinePreview
    # the picks a first y warned would leave the file unparsable (a second y takes them)
    _warned: tuple[int, frozenset[int]] | None = None

    @property
    def session(self) -> Session:
        raise NotImplementedError  # ReviewPane's

    async def _carry_out(self, plan: AcceptPlan) -> Outcome | None:
        raise NotImplementedError  # ReviewPane's

    def _advance(self) -> None:
        raise NotImplementedError  # ReviewPane's

    def line_result(self) -> tuple[Hunk, list[str] | None, str] | None:
        """Line mode: the hunk, the lines y would write in its place (None: nothing is
        picked, so y writes nothing), and why the file would no longer parse ("" when it
        would, or steer cannot tell). Only lines marked ✓ count: a - line unmarked stays on
        disk, a + line unmarked is not added, as in `git add -p`."""
        diff, h = self.diff, self.diff.hunk
        if not diff.line_mode or h is None or diff.fd is None:
            return None
        if not diff.picked:
            return h, None, ""
        lines = pick_lines(h, diff.picked)
        return h, lines, self.breaks(h, lines)

    def breaks(self, h: Hunk, lines: list[str]) -> str:
        """Why the hunk's file would no longer parse with `lines` in its place ("" if not)."""
        fd = self.session.pending.files.get(h.path) if self.session.pending else None
        return fd.breaks(h, lines) if fd is not None else ""

    def _render_preview(self) -> str:
        """Under the diff in line mode: what y writes, and a flag when it breaks the file."""
        result = self.line_result()
        self.preview.set_class(result is not None, "-shown")
        if result is None:
            return ""
        h, lines, broken = result
        self.preview.show(h, lines, broken, self.app.current_theme.warning or "yellow")
        return broken

    def leave_line_mode(self) -> bool:
        """Esc: out of line mode, if it is on."""
        if not self.diff.line_mode:
            return False
        self.diff.line_mode = False
        self.diff.refresh()
        return True

    def action_line_mode(self) -> None:
        self.diff.toggle_line_mode()

    def action_pick_line(self) -> None:
        self.diff.pick_line()

    def action_leave_lines(self) -> None:
        self.leave_line_mode()

    async def action_accept_lines(self) -> None:
        """y in line mode: only the lines marked ✓ (nothing marked: nothing written)."""
        diff, h, review = self.diff, self.diff.hunk, self.session.review
        if h is None or review is None or not diff.line_mode:
            return
        if h.state not in OPEN:
            self.notify(f"hunk #{h.id} is {h.state.value}", timeout=2)
            return
        result = self.line_result()
        if result is None or result[1] is None:
            self.notify("Nothing picked: pick lines with Space (y then takes the picked "
                        "lines); nothing was written", timeout=4)
            return
        broken = result[2]
        picks = (h.id, frozenset(diff.picked))
        if broken and self._warned != picks:  # the first y says why; a second takes it
            self._warned = picks
            self.notify(f"⚠ the picked lines leave {h.path} unparsable ({broken}); nothing "
                        "was written: y again takes them anyway", severity="warning", timeout=10)
            return
        plan = review.plan_lines(h.id, diff.picked)
        diff.line_mode = False
        self._warned = None
        out = await self._carry_out(plan)
        if out is not None and out.accepted and broken:
            self.notify(f"⚠ {h.path} no longer parses ({broken}): u undoes",
                        severity="warning", timeout=10)
        if out is not None and out.accepted:
            self._advance()  # on to the next one; a refused accept stays where the user looks

