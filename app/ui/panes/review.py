"""The review: the pending diff of one file, the hunk under the cursor, and every decision.

The pane owns which file is shown and whether it follows the answer while it streams
(`follow`, until the user navigates), what it shows (the pending diff, or git's picture of
the file: `view`), where the answer writes when the review is elsewhere, and the keys of the
action table's "review" scope: accept and reject a hunk, a file or everything, line mode,
edit a hunk ($EDITOR, run by app/core/disk/editor.py, or inline), undo, retry refused edits,
a conflict's keep mine / take theirs, the git view, stage and commit. A new key is a row in
app/ui/actions.py (scope "review") and its `action_` method here.

Every key is an intent on core (the session's Review, the LiveTree that stages and commits);
the pane shows the outcome and asks the screen for a frame (`SessionChanged`). Its DiffView
draws and keeps the cursor; the screen moves the focus.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Self

from textual import getters, on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import var

from app.core.conversation import retries
from app.core.conversation.session import Session
from app.core.disk.editor import edit_lines, editor_command
from app.core.disk.journal import UndoRefused
from app.core.disk.repo_lock import Busy
from app.core.edits.diff import PendingDiff
from app.core.edits.hunks import OPEN, Hunk, HunkState
from app.core.git.live_tree import LiveTree
from app.core.git.sync import SyncUpdate
from app.core.review.review import AcceptPlan, Outcome
from app.core.text.invisible import found
from app.core.text.plural import plural
from app.core.variants.group import Variants
from app.ui import actions
from app.ui.availability import Availability
from app.ui.compat import alive
from app.ui.dialogs.hunk_editor import HunkEditor
from app.ui.dialogs.reject_reason import RejectReason
from app.ui.messages import SessionChanged
from app.ui.panes.review_git import HEADS, GitKeys, View
from app.ui.panes.review_lines import LineKeys
from app.ui.widgets.diff_view import DiffView
from app.ui.widgets.file_tree import FileTree
from app.ui.widgets.line import Line
from app.ui.widgets.line_preview import LinePreview
from app.view.status import Part, StatusLine


class ReviewPane(LineKeys, GitKeys, Vertical):
    BINDINGS = actions.bindings("review")
    DEFAULT_CSS = """
    ReviewPane > #line-preview { height: auto; max-height: 9; background: $panel;
                                 padding: 0 1; display: none; }
    ReviewPane > #line-preview.-shown { display: block; }
    ReviewPane > #variant-tabs { display: none; }
    """

    view: var[View] = var("pending")  # what the diff shows: the pending diff, or git's picture
    # the action table's condition the pane owns (actions.Review): a change refreshes the bindings
    can_undo: var[bool] = var(False, bindings=True)

    diff = getters.query_one(DiffView)
    heading = getters.query_one("#diff-title", Line)
    preview = getters.query_one("#line-preview", LinePreview)

    @dataclass
    class UndoChanged(Message):
        """What u would undo now ("" nothing): the key bar names it."""

        label: str

    @dataclass
    class Reveal(Message):
        """The cursor went on to another file: the file tree shows it."""

        path: str

    def __init__(self, variants: Variants, live: LiveTree, core: actions.Core, *,
                 id: str | None = None) -> None:
        super().__init__(id=id)
        self.variants = variants
        self.live = live
        # what the keys read: the pane's own reactives, its diff's cursor and core's conditions
        self.conditions = Availability(core, review=self)
        self._journal_undo = False  # the journal holds an accept to undo (read in a thread)
        self.selected: str | None = None
        self.follow = True  # the diff follows the file being streamed until the user navigates
        self._elsewhere = ""  # where the answer writes, when the review is not following it

    @property
    def session(self) -> Session:
        """The session on screen: the variant shown, or the only one (app/core/variants)."""
        return self.variants.session

    def compose(self) -> ComposeResult:
        yield Line(HEADS["pending"], id="diff-title", classes="pane-title")
        yield Line(id="variant-tabs", classes="pane-title")
        diff = DiffView(id="diff")
        self.conditions.cursor = diff
        yield diff
        yield LinePreview(id="line-preview")

    def on_mount(self) -> None:
        self.run_worker(self._recover(), group="recover")

    def focus(self, scroll_visible: bool = True) -> Self:
        self.diff.focus(scroll_visible)
        return self

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The action table decides, reading the pane's conditions and core's."""
        return actions.available(action, self.conditions)

    def watch_view(self, view: View) -> None:
        self.diff.decides = view == "pending"  # (its hunk keys go at once, the key bar's too)

    # -- the conditions the keys read -------------------------------------------------------
    def reread(self) -> None:
        """Each frame: what core changed without telling (it is not reactive) and the keys
        read: the state of the hunk under the cursor, and an accept of the session to undo."""
        self.diff.read_cursor()
        self._read_undo()

    def _read_undo(self) -> None:
        review = self.session.review
        can_undo = self._journal_undo or (review is not None and review.can_undo)
        if can_undo != self.can_undo:  # (as in DiffView.read_cursor: a read is cheaper)
            self.can_undo = can_undo

    def first_open_hunk(self) -> Hunk | None:
        """The answer's first open hunk (where the review starts)."""
        pending = self.session.pending
        return None if pending is None else next((h for h in pending.hunks if h.state in OPEN), None)

    # -- what the screen hands down, frame by frame ----------------------------------------
    def new_change_set(self) -> None:
        self.follow = True

    def answer_started(self) -> None:
        if self.view != "pending":  # a new answer: its pending diff is what matters now
            self.view = "pending"
            if self.selected:
                self.select(self.selected, None, manual=False)

    def answer_over(self) -> None:
        if self._elsewhere:
            self._elsewhere = ""
            self.render_title()

    def show_pending(self, pending: PendingDiff, dirty: set[str]) -> None:
        """The hunks of `dirty` files changed: follow the answer, or stay where the user is."""
        if self.view != "pending":
            return  # a git view is up: the pending diff shows again when the user asks
        diff = self.diff
        streaming = self.session.streaming
        live = pending.live_hunk if streaming else None
        if self.follow and live is not None:
            if live.path != self.selected:
                self.select(live.path, None, manual=False)
            diff.refresh_rows()
            diff.follow(live)
            return
        if self.follow and streaming and diff.following:
            # between two hunks of the answer (a SEARCH being read): still following
            if self.selected in dirty:
                diff.refresh_rows()
            return
        diff.follow(None)
        # the user reviews: the view stays, the title says where the answer is writing
        where = ""
        if live is not None and live.path != self.selected:
            where = f"new hunks streaming in {live.path}"
        elif live is not None and diff.below_view(live):
            where = "new hunks streaming below ↓"
        if where != self._elsewhere:
            self._elsewhere = where
            self.render_title()
        if self.selected is None and pending.files:
            self.select(next(iter(pending.files)), None, manual=False)
        elif self.selected in dirty or (self.selected in pending.files and diff.fd is None):
            if diff.fd is None and self.selected in pending.files:
                diff.show(pending.files[self.selected])
            else:
                diff.refresh_rows()

    def enter(self) -> None:
        """The user came to review an answer that is over: at its first open hunk, unless
        they already chose one (while it streams the view stays where it is)."""
        h, cur = self.first_open_hunk(), self.diff.hunk
        if not self.session.streaming and h is not None and (self.follow or cur is None):
            self.select(h.path, h.id)

    def show_hunks(self, ids: list[int]) -> bool:
        """A card of the conversation was chosen: its first hunk, in the pending diff."""
        pending = self.session.pending
        if not ids or pending is None:
            self.notify("that edit has no hunk to show (it was refused or is gone)", timeout=3)
            return False
        h = pending.hunk(ids[0])
        self.view = "pending"
        self.select(h.path, h.id)
        return True

    def synced(self, update: SyncUpdate) -> None:
        """The disk or git changed: say what it did to the hunks; a git view is fetched again."""
        for r in update.rebased:
            if r.conflicts:
                n = len(r.conflicts)
                self.notify(f"{r.path} changed on disk: {n} hunk{'s' if n != 1 else ''} overlap your "
                            "edit (m keeps yours, T takes the proposal, e edits)", severity="warning",
                            timeout=8)
            if r.stale:
                self.notify(f"{r.path}: {r.stale}", severity="warning", timeout=8)
        if update.git_changed and self.view != "pending" and self.selected:
            self.run_worker(self._show_git_view(self.selected), group="gitview", exclusive=True)

    def set_keys(self, names: dict[str, str]) -> None:
        """The keys bound now (action id -> keys): none of the review's becomes text."""
        self.diff.own_keys = actions.review_keys(names)

    def show_tabs(self, tabs: str) -> None:
        """The variants over the diff ("" when there is no set)."""
        line = self.query_one("#variant-tabs", Line)
        line.set(tabs)
        if line.display != bool(tabs):
            line.display = bool(tabs)

    def reset(self, message: str) -> None:
        """The session was rebuilt (a rewind): nothing selected, following again."""
        self.selected = None
        self.follow = True
        self.diff.show(None, message)

    # -- the file shown --------------------------------------------------------------------
    def select(self, path: str, hunk_id: int | None, manual: bool = True) -> None:
        pending = self.session.pending
        self.selected = path
        if manual:
            self.follow = False
        fd = pending.files.get(path) if pending is not None else None
        if self.view != "pending" and self.live.in_git:
            self.run_worker(self._show_git_view(path), group="gitview", exclusive=True)
        else:
            self.diff.show(fd, "" if fd else f"No pending changes for {path}.")
        self.render_title()
        if hunk_id is not None:
            self.diff.select(hunk_id)

    @on(DiffView.ModeChanged)
    def render_title(self) -> None:
        diff = self.diff
        # a narrow pane drops whole parts: the view's name first, the file last
        parts = [Part(HEADS[self.view], 2)] + ([Part(self.selected, 0)] if self.selected else [])
        broken = self._render_preview()
        if diff.line_mode:
            if broken:
                parts.append(Part("⚠ the picked lines do not parse", 0))
            picked = len(diff.picked)
            parts.append(Part(f"LINES: {plural(picked, 'line')} picked" if picked else
                              "LINES: nothing picked: Space picks", 1))
        elif diff.side_by_side:
            parts.append(Part("side by side", 3))
        if self._elsewhere:
            parts.append(Part(self._elsewhere, 1))
        self.heading.set(StatusLine(parts))

    @on(DiffView.LeaveFile)
    def _leave_file(self, event: DiffView.LeaveFile) -> None:
        pending = self.session.pending
        if pending is None:
            return
        paths = sorted((p for p, fd in pending.files.items() if fd.hunks), key=FileTree.order)
        if not paths:
            return
        i = paths.index(self.selected) if self.selected in paths else -1
        j = i + event.step
        if 0 <= j < len(paths):
            self.select(paths[j], None)
            self.diff.select(None, edge="first" if event.step > 0 else "last")
            self.post_message(self.Reveal(paths[j]))

    @on(DiffView.CursorMoved)
    def _cursor_moved(self) -> None:
        self.follow = False

    def on_descendant_focus(self) -> None:
        if self.session.streaming:
            self.follow = False  # the user reviews: the view stays where they are

    # -- the review's keys -----------------------------------------------------------------
    def action_side_by_side(self) -> None:
        self.diff.toggle_side_by_side()

    async def action_accept_hunk(self) -> None:
        diff, h, review = self.diff, self.diff.hunk, self.session.review
        if h is None or review is None:
            return
        if h.state not in OPEN:
            self.notify(f"hunk #{h.id} is {h.state.value}", timeout=2)
            return
        if diff.line_mode:
            await self.action_accept_lines()
            return
        self._warned = None
        out = await self._carry_out(review.plan_hunks([h.id]))
        if out is not None and out.accepted:
            self._advance()  # on to the next one; a refused accept stays where the user looks

    def action_reject_hunk(self) -> None:
        h, review = self.diff.hunk, self.session.review
        if h is not None and review is not None and review.reject([h.id]).rejected:
            self.diff.line_mode = False
            self.post_message(SessionChanged())
            self._advance()

    def action_mark_hunk(self) -> None:
        """Space: mark the open hunk for `!`'s check, or unmark it (◆ in its header)."""
        h, review = self.diff.hunk, self.session.review
        if h is not None and review is not None and h.state in OPEN:
            review.mark(h.id)
            self.post_message(SessionChanged(force_status=False))

    def action_reject_with_reason(self) -> None:
        h, review = self.diff.hunk, self.session.review
        if h is None or review is None or h.state not in OPEN:
            return

        def done(reason: str | None) -> None:
            if reason is None or review is not self.session.review:
                return
            if review.reject([h.id], reason).rejected:
                self.diff.line_mode = False
                self.post_message(SessionChanged(force_status=False))
                self._advance()

        self.diff.hunk_to_top()  # in sight above the dialog
        self.app.push_screen(RejectReason(f"hunk #{h.id}"), callback=done)

    async def action_accept_file(self) -> None:
        review, pending = self.session.review, self.session.pending
        if review is not None and pending is not None and self.selected in pending.files:
            await self._carry_out(review.plan_file(self.selected))
            self._advance()

    def action_reject_file(self) -> None:
        review, pending = self.session.review, self.session.pending
        if review is not None and pending is not None and self.selected in pending.files:
            review.reject_file(self.selected)
            self.post_message(SessionChanged())
            self._advance()

    async def action_accept_all(self) -> None:
        if self.session.review is not None:
            await self._carry_out(self.session.review.plan_all())

    def action_reject_all(self) -> None:
        if self.session.review is not None:
            self.session.review.reject_all()
            self.post_message(SessionChanged())

    def action_keep_mine(self) -> None:
        h, review = self.diff.hunk, self.session.review
        self.diff.read_cursor()  # as it is now: core may have changed it since the last frame
        if h is not None and review is not None and self.diff.hunk_conflict:
            review.take_mine(h.id)
            self.post_message(SessionChanged(force_status=False))
            self._advance()

    async def action_take_theirs(self) -> None:
        h, review = self.diff.hunk, self.session.review
        self.diff.read_cursor()  # (as in keep_mine)
        if h is not None and review is not None and self.diff.hunk_conflict:
            await self._carry_out(review.plan_theirs(h.id))
            self._advance()

    def action_edit_hunk(self) -> None:
        h = self.diff.hunk
        if h is None or h.state not in OPEN or self.session.review is None:
            return
        command = editor_command()
        if command and not self.app.is_headless:
            self.run_worker(self._edit_outside(h, command), group="editor", exclusive=True)
            return
        hidden = found("\n".join(h.new))
        if hidden:  # the inline editor would send them to the terminal as they are
            self.notify(f"hunk #{h.id} holds invisible characters ({', '.join(hidden[:3])}): set "
                        "$EDITOR to edit it, or decide it as it is", severity="warning", timeout=8)
            return
        self.diff.hunk_to_top()  # in sight above the editor
        self.app.push_screen(HunkEditor(h, check=lambda lines: self.breaks(h, lines)),
                             callback=self._edited(h.id))

    async def _edit_outside(self, h: Hunk, command: str) -> None:
        """The user's editor has the terminal; nothing is drawn until it gives it back."""
        with self.app.batch_update(), self.app.suspend():
            lines = await edit_lines(h.new, command, path=h.path)
        if lines != h.new:
            await self._edited(h.id)(lines)

    def _edited(self, hunk_id: int) -> Callable[[list[str] | None], Coroutine[Any, Any, None]]:
        async def done(lines: list[str] | None) -> None:
            review = self.session.review
            if lines is not None and review is not None:
                await self._carry_out(review.plan_edited(hunk_id, lines))
                self._advance()
        return done

    async def action_undo(self) -> None:
        """The last accept, this session's or an earlier one's: the same as `steer undo`."""
        try:
            label = await self.variants.undo()
        except (UndoRefused, Busy, OSError) as exc:
            self.notify(str(exc), severity="error", timeout=8)
            return
        self.notify(f"undone: {label}", timeout=3)
        self.post_message(SessionChanged())
        await self.check_undo()

    def action_retry(self) -> None:
        if retries.retry_refused(self.session) is not None:
            self.post_message(SessionChanged())

    # -- carrying a decision out -----------------------------------------------------------
    async def _carry_out(self, plan: AcceptPlan) -> Outcome | None:
        review = self.session.review
        assert review is not None
        try:
            out = await review.apply_async(plan)
        except (Busy, OSError) as exc:  # another steer holds the repository, a full disk...
            self.notify(f"nothing was written: {exc}", severity="error", timeout=8)
            return None
        for msg in out.messages:
            self.notify(msg, severity="warning", timeout=6)
        if out.accepted:
            self.notify(f"accepted {plural(len(out.accepted), 'hunk')} → {', '.join(out.written)}", timeout=2)
            self._journal_undo = True
            self._read_undo()
            self.run_worker(self.check_undo(), group="undo", exclusive=True)
        self.post_message(SessionChanged())  # its frame tells the key bar (a conflict now: m / T)
        return out

    def _advance(self) -> None:
        """After a decision, on to the next open hunk: in this file (after the cursor, then
        before it), else the next file in the tree's order with one (wrapping around)."""
        diff, pending = self.diff, self.session.pending
        diff.refresh_rows()  # the decision as it looks now (its frame comes after)
        hunks, cur = diff.hunks, diff.hunk
        if cur is not None and cur in hunks:
            later = hunks[hunks.index(cur) + 1 :] + hunks[: hunks.index(cur)]
            nxt = next((h for h in later if h.state in OPEN or h.state == HunkState.STREAMING), None)
            if nxt is not None:
                diff.select(nxt.id)
                return
        if pending is not None:
            paths = sorted(pending.files, key=FileTree.order)
            at = paths.index(self.selected) + 1 if self.selected in paths else 0
            for path in paths[at:] + paths[:at]:
                h = next((h for h in pending.files[path].hunks if h.state in OPEN), None)
                if h is not None:
                    self.select(path, h.id)
                    self.post_message(self.Reveal(path))
                    return
        diff.refresh()

    async def check_undo(self) -> None:
        """Whether u can undo, and what it would undo (the key bar says it before the key)."""
        session = self.session

        def next_undo() -> str:  # the journal is read in a thread (core's own objects)
            review = session.review
            if review is not None and review.can_undo:
                return review.undo_entry().label
            entry = session.changes.journal.last_undoable()
            return entry.label if entry is not None else ""

        try:
            label = await asyncio.to_thread(next_undo)
        except (UndoRefused, OSError):
            label = ""
        if alive(self):
            self._journal_undo = bool(label)
            self._read_undo()
            self.post_message(self.UndoChanged(label))

    async def _recover(self) -> None:
        """An accept or undo a crash left half-done is completed before anything else."""
        try:
            done = await self.session.changes.recover()
            if not alive(self):
                return
        except (Busy, OSError) as exc:
            self.notify(f"an interrupted accept or undo is not complete: {exc}", severity="error")
            return
        for e in done:
            notes = "".join(f"; {n}" for n in e.notes)
            self.notify(f"completed an interrupted {e.op}: {e.label}{notes}", severity="warning",
                        timeout=10)
        await self.check_undo()
