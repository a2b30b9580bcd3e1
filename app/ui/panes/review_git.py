"""The review's git keys: which view the diff pane shows (the pending diff, the working tree
or the index against HEAD), staging exactly the accepted hunks, and the commit dialog. A
part of the review pane (panes/review.py), kept here by its job."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from textual.widget import Widget

from app.core.git.live_tree import LiveTree
from app.ui.compat import alive
from app.ui.dialogs.commit import CommitScreen
from app.view import gitdiff

if TYPE_CHECKING:
    from app.core.conversation.session import Session
    from app.ui.widgets.diff_view import DiffView

View = Literal["pending", "head", "index"]
HEADS = {"pending": "Pending diff", "head": "Working tree vs HEAD", "index": "Staged (index vs HEAD)"}


class GitKeys(Widget):
    """A base of ReviewPane, which sets these up."""

    live: LiveTree
    view: View
    selected: str | None
    diff: DiffView

    @property
    def session(self) -> Session:
        raise NotImplementedError  # ReviewPane's

    def select(self, path: str, hunk_id: int | None, manual: bool = True) -> None:
        raise NotImplementedError  # ReviewPane's

    def action_cycle_view(self) -> None:
        views: list[View] = ["pending", "head", "index"] if self.live.in_git else ["pending"]
        self.view = views[(views.index(self.view) + 1) % len(views)] if self.view in views else "pending"
        if self.selected:
            self.select(self.selected, None)

    async def action_stage(self) -> None:
        result = await self.live.stage()
        if result is None:
            return
        for msg in result.messages:
            self.notify(msg, severity="warning", timeout=8)
        if result.staged:
            self.notify(f"staged the accepted hunks of {', '.join(result.staged)}", timeout=4)
        elif not result.messages:
            self.notify("the accepted hunks were staged already", timeout=3)

    def action_commit(self) -> None:
        if not self.live.in_git:
            self.notify("not a git repository: nothing to commit", severity="warning")
            return

        def done(summary: str | None) -> None:
            if summary:
                self.notify(f"committed: {summary}", timeout=6)

        self.app.push_screen(CommitScreen(self.live, self.session.provider, self.live.staged()),
                             callback=done)

    async def _show_git_view(self, path: str) -> None:
        if not self.live.in_git:
            return
        which: Literal["head", "index"] = "head" if self.view == "head" else "index"
        what = "working tree vs HEAD" if which == "head" else "index vs HEAD"
        try:
            text = await self.live.diff(path, which)
        except Exception as exc:  # noqa: BLE001 - git's own message, shown where the diff goes
            text, what = "", f"{what}: git failed: {exc}"
        if alive(self) and self.selected == path and self.view != "pending":
            self.diff.show_rows(path, gitdiff.rows(path, text, what))
