"""The main screen's session intents: reject with a reason, rewind to before a turn, redo.
A mixin of MainScreen (app/ui/main_screen.py), apart so that the router stays small: the
modals choose (app/ui/reject_reason.py, rewind_screen.py), core does the work."""

from __future__ import annotations

import asyncio

from app.core.conversation import rewind
from app.core.conversation.records import SessionError
from app.core.conversation.resume import rebase_onto_disk, rewind_conversation
from app.core.disk.journal import UndoRefused
from app.core.disk.repo_lock import Busy
from app.core.edits.hunks import OPEN
from app.ui.diff_view import DiffView
from app.ui.file_tree import FileTree
from app.ui.reject_reason import RejectReason
from app.ui.rewind_screen import RewindChoice, RewindScreen
from app.ui.stream_view import StreamView
from app.view.frames import FrameSync


class SessionActions:
    """Needs the MainScreen's session, frame(), _advance(), _check_undo()."""

    def action_reject_with_reason(self) -> None:
        diff = self.query_one(DiffView)
        h, review = diff.hunk, self.session.review
        if h is None or review is None or h.state not in OPEN:
            return

        def done(reason: str | None) -> None:
            if reason is None or review is not self.session.review:
                return
            if review.reject([h.id], reason).rejected:
                diff.line_mode = False
                self.frame()
                self._advance()

        self.app.push_screen(RejectReason(f"hunk #{h.id}"), callback=done)

    async def action_rewind(self) -> None:
        session = self.session
        if session.log is None:
            self.notify("this session is not saved (--no-save): there is nothing to rewind to",
                        severity="warning")
            return
        if session.streaming:
            self.notify("stop the answer first (Esc)", severity="warning")
            return
        if not session.turns:
            self.notify("no turn yet: nothing to rewind", timeout=3)
            return
        points = await asyncio.to_thread(rewind.checkpoints, session)
        redone = {s for f in session.file_steps if f.op == "redo" for s in f.redone}
        can_redo = any(f.op == "rewind" and not redone.intersection(f.steps)
                       for f in session.file_steps)
        self.app.push_screen(RewindScreen(points, can_redo), callback=self._rewind_chosen)

    async def _rewind_chosen(self, choice: RewindChoice | None) -> None:
        if choice is None:
            return
        session = self.session
        done = None
        try:
            if choice.what == "redo":
                done = await asyncio.to_thread(rewind.redo_files, session)
            elif choice.what in ("files", "both"):
                done = await asyncio.to_thread(rewind.rewind_files, session, choice.turn)
            if choice.what in ("conversation", "both"):
                left = rewind_conversation(session, choice.turn)
                self.restart_view()
                self.notify(f"the conversation is back to before turn {choice.turn + 1} "
                            f"({left} turn(s) left)", timeout=4)
            elif done is not None and done.written:
                rebase_onto_disk(session)  # the hunks follow the files back
        except (UndoRefused, SessionError, Busy, OSError) as exc:
            self.notify(str(exc), severity="error", timeout=8)
        if done is not None:
            if done.written:
                verb = "put back" if choice.what == "redo" else "rewound"
                self.notify(f"{verb}: {', '.join(done.written)}", timeout=4)
            for path, why in done.refused.items():
                self.notify(f"{path} refused: {why}", severity="warning", timeout=10)
            if not done.written and not done.refused:
                self.notify("no file to rewind: steer wrote nothing in or after that turn",
                            timeout=4)
        self.frame(force_status=True)
        await self._check_undo()

    def restart_view(self) -> None:
        """The session was rebuilt (a rewind): read it from the start, as a resumed one."""
        hint = self.sync.retry_hint
        self.sync = FrameSync(self.session, mode=self.sync.mode)
        self.sync.retry_hint = hint
        self.query_one("#stream", StreamView).clear()
        self.selected = None
        self.follow = True
        self._created = set()
        self._badges = {}
        self.query_one(FileTree).set_badges(pending={}, created=set())
        self.query_one(DiffView).show(None, "Rewound.")
        self.frame(force_status=True)
