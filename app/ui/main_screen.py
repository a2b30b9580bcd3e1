"""The main screen: it composes the panes and routes their messages to core intents.

Attributes down, messages up: widgets get their data set by this screen and post messages
when the user does something; only this screen talks to the session and the review. Each
frame it takes a plain `Frame` from FrameSync (app/view) and hands its parts to the panes.
File, git and network I/O happen in core (threads, the provider's own tasks), never here.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import shlex
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.reactive import var
from textual.widgets import Header, Input

from app.core.conversation.prompts import fence_lang
from app.core.conversation.review import AcceptPlan, Outcome
from app.core.conversation.session import ContextError, Session
from app.core.disk.journal import UndoRefused
from app.core.disk.repo_lock import Busy
from app.core.edits.diff import PendingDiff
from app.core.edits.hunks import OPEN, HunkState
from app.core.git.repository import FileStatus
from app.core.git.sync import Sync, SyncUpdate
from app.core.text.invisible import found
from app.ui import actions
from app.ui.commit_screen import CommitScreen
from app.ui.compat import FrameTickScreen, shutting_down
from app.ui.diff_view import DiffView
from app.ui.file_tree import FileTree
from app.ui.gc_policy import AnswerGC
from app.ui.highlight import warm_lexer
from app.ui.key_bar import KeyBar
from app.ui.line import Line
from app.ui.permission_screen import PermissionScreen
from app.ui.prompt import PasteView, PromptInput
from app.ui.queue_view import QueueView
from app.ui.recovery import Recovery
from app.ui.screens import ChoiceScreen, HunkEditor
from app.ui.session_actions import SessionActions
from app.ui.stream_view import StreamView
from app.ui.tree_fold import TreeFold
from app.view import gitdiff
from app.view.frames import Frame, FrameSync, Piece
from app.view.outside_text import name
from app.view.status import Part, StatusLine
from app.view.welcome import Row as WelcomeRow

IDLE_TICK = 1 / 10  # the clock in the status line, when nothing else wakes the screen
BADGES_EVERY = 0.25  # while streaming, the tree's badges change at most this often
GC_AFTER = 0.5
TYPING_PAUSE = 1.5  # seconds since the last key in the prompt: still typing
GUARD = 0.8  # after the focus moved to the review on its own, letters stay text this long

WHERE = {  # the key bar's first word: where the next key goes
    "prompt": "✎ typing", "diff": "◆ reviewing", "tree": "▤ files", "queue": "⏳ queue",
    "conversation": "≡ conversation",  # (not ☰: Unicode 16 made it 2 cells, older terminals draw 1)
}
GUARDED = "◆ review opened · letters still type for a moment"


class MainScreen(SessionActions, Recovery, TreeFold, FrameTickScreen):  # mixins: session_actions, recovery, tree_fold
    BINDINGS = actions.bindings("screen")

    focus_area: var[str] = var("prompt")  # where keys go now: prompt | diff | tree | queue

    def __init__(self, session: Session, *, context: Iterable[str] = (), watch_files: bool = True,
                 blink: bool = True, welcome: list[WelcomeRow] | None = None) -> None:
        super().__init__(id="main-screen")
        self.session = session
        self.welcome = welcome or []  # the conversation pane's first screen (no message yet)
        self.ws = session.ws
        self.sync = FrameSync(session)
        self._initial_context = list(context)
        self.watch_files = watch_files
        self.blink = blink  # snapshot tests turn the cursor blink off
        self.files: list[str] = []
        self.selected: str | None = None
        self.follow = True  # the diff follows the file being streamed until you navigate
        self.frames = 0  # frames that changed something (the TUI benchmark reads it)
        self.on_frame = None  # optional hook, called after each frame that changed something
        self._editing: tuple[int, str] | None = None  # a queued message back in the prompt
        self._stop_watch = asyncio.Event()
        self._ready = False
        self.gc = AnswerGC()
        self._badges: dict[str, int] = {}  # open-hunk counts not yet shown in the tree
        self._created: set[str] = set()
        self._badges_at = 0.0
        self._elsewhere = ""  # where the answer writes, when the review is not following it
        self._can_undo = False  # the journal holds an accept to undo (checked in a thread)
        self.branch = ""
        self.view = "pending"  # what the diff pane shows: pending | head | index
        self.git_sync: Sync | None = None
        self.on_sync = None  # optional hook, called after each sync update (benchmarks)

    # -- layout ----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header(icon="◆")
        # Panes have a title line and no border: Textual draws a border on every repainted
        # line, which doubles the cost of the panes that repaint every frame.
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield Line("Files", id="tree-title", classes="pane-title")
                yield FileTree(self.ws.root.name, id="tree")
            with Vertical(id="center"):
                yield Line("Pending diff", id="diff-title", classes="pane-title")
                yield DiffView(id="diff")
            with Vertical(id="side"):
                yield Line("Conversation", id="stream-title", classes="pane-title")
                stream = StreamView(id="stream")
                stream.welcome = self.welcome
                yield stream
                yield Line("Queued follow-ups (Enter edits, Del drops)", id="queue-title",
                           classes="pane-title")
                yield QueueView(id="queue")
        yield Line(id="status")
        yield Line(id="context")
        yield PromptInput(id="prompt", blink=self.blink)
        yield KeyBar(id="keys")

    def on_mount(self) -> None:
        self._ready = True
        self._render_header()
        self._add_each(list(self._initial_context), self._render_context)
        self.query_one(PromptInput).focus()
        self.query_one(KeyBar).set_where(WHERE[self.focus_area])
        self._place_tree()
        self.session.on_data = self._wake
        self.sync.retry_hint = self.recovery_hint()
        self.set_interval(IDLE_TICK, self.frame)
        self.frame(force_status=True)
        gc.freeze()  # what start-up built stays: keep it out of every later collection
        self.run_worker(self._sync(), group="sync")
        if self.session.provider.capabilities.warm_up:  # the model loads while you type
            self.run_worker(self.session.provider.warm(), group="warm")
        self.run_worker(self._recover(), group="recover")
        if self.session.provider.context_window is None:
            self.run_worker(self._probe_window(), group="probe")

    async def _probe_window(self) -> None:
        """The server may say what the model's context window is (vLLM, llama-server...)."""
        window = await self.session.provider.probe_context_window()
        if window and self.alive:
            self.session.provider.context_window = window
            self._from_worker(self._render_context)

    async def _recover(self) -> None:
        """An accept or undo a crash left half-done is completed before anything else."""
        try:
            done = await self.session.recover()
            if not self.alive:
                return
        except (Busy, OSError) as exc:
            self.notify(f"an interrupted accept or undo is not complete: {exc}", severity="error")
            return
        for e in done:
            notes = "".join(f"; {n}" for n in e.notes)
            self.notify(f"completed an interrupted {e.op}: {e.label}{notes}", severity="warning",
                        timeout=10)
        await self._check_undo()

    async def _check_undo(self) -> None:
        self._can_undo = await self.session.journal_undoable()
        if self.alive:
            self._from_worker(self.refresh_bindings)

    @property
    def alive(self) -> bool:
        """Widgets can be used: mounted, and the app not tearing the screen down (a worker
        coming back from a thread checks this before it touches anything)."""
        return self._ready and self.is_attached and not shutting_down(self.app)

    def _from_worker(self, fn, *args) -> None:
        """Apply what a worker brought back, unless the screen is being taken down under
        it (the app closing between the worker's await and now)."""
        try:
            fn(*args)
        except NoMatches:
            if self.alive and self.query("#tree"):
                raise

    def on_unmount(self) -> None:
        self._ready = False
        self._stop_watch.set()

    # -- where keys go ---------------------------------------------------------------------
    def on_descendant_focus(self, event) -> None:
        widget = event.widget
        if isinstance(widget, DiffView) and self.session.streaming:
            self.follow = False  # the user reviews: the view stays where they are
        for area, cls in (("prompt", PromptInput), ("diff", DiffView), ("tree", FileTree),
                          ("queue", QueueView), ("conversation", StreamView)):
            if isinstance(widget, cls):
                self.focus_area = area

    def watch_focus_area(self, area: str) -> None:
        if self._ready:
            self._guard_over()

    def _guard_over(self) -> None:
        """The key bar says where keys go (and that letters still type, while they do)."""
        guarded = self.focus_area == "diff" and time.monotonic() < self.query_one(DiffView).guard_until
        self.query_one(KeyBar).set_where(GUARDED if guarded else WHERE[self.focus_area])

    def refresh_bindings(self) -> None:
        """Tell the key bar only when what is available changed (every call makes Textual
        walk the bindings; most would change nothing)."""
        diff = self.query_one(DiffView) if self._ready else None
        pasted = self.query_one(PromptInput).holds_paste if self._ready else False
        state = (self.focus_area, self.streaming, self.hunk_open, self.any_open, self.can_undo,
                 self.has_queue, diff.line_mode if diff else None, self.failed, pasted)
        if state != getattr(self, "_bindings_state", None):
            self._bindings_state = state
            super().refresh_bindings()

    # -- the frame -------------------------------------------------------------------------
    def _wake(self) -> None:
        """New text arrived: make sure a screen update is coming (once per frame at most:
        the session calls this again only after the frame took what it had)."""
        if self._ready:
            self.query_one("#stream-title", Line).refresh()  # in the pane that changes anyway

    def frame(self, force_status: bool = False) -> None:
        """Everything that arrived since the last frame, rendered once."""
        if not self._ready or shutting_down(self.app):
            return
        try:
            self._apply(self.sync.take(force_status))
        except NoMatches:  # the screen is being torn down between two ticks
            if self.is_running and self._ready:
                raise

    def _apply(self, f: Frame) -> None:
        _write(self.query_one("#stream", StreamView), f.answer)
        if f.new_change_set is not None:
            self.follow = True
            self._created = set()
        if f.dirty and self.session.pending is not None:
            self._sync_diff(self.session.pending, f)
        if f.started is not None:
            self.gc.streaming()
            if self.view != "pending":  # a new answer: its pending diff is what matters now
                self.view = "pending"
                if self.selected:
                    self._select(self.selected, None, manual=False)
            self.refresh_bindings()
            self._render_queue()
        for ended in f.ended:
            if ended.turn is self.session.failed:  # before a word of it: nothing lost
                self.request_failed(ended.turn)
                self._turn_ended(ended.superseded, None)
            else:
                self._turn_ended(ended.superseded, ended.failure)
        if f.ended and self._elsewhere and not self.session.streaming:
            self._elsewhere = ""
            self._render_diff_title()
        if f.ended and not self.session.streaming:
            self.set_timer(GC_AFTER, self._settle_gc)
        for req in f.permissions:
            self._ask_permission(req)
        if f.title is not None:
            self.query_one("#stream-title", Line).set(f.title)
        if f.status is not None:
            self.query_one("#status", Line).set(f.status)
        if f.changed:
            self.frames += 1
            if self.on_frame is not None:
                self.on_frame()

    def _ask_permission(self, req) -> None:
        """The agent waits for this answer: ask at once (several queue up as screens)."""

        def answered(option: str | None) -> None:
            self.session.agent.answer(req, option)

        self.app.push_screen(PermissionScreen(req), callback=answered)

    def _settle_gc(self) -> None:
        if not self.session.streaming:
            self.gc.settled()

    def _turn_ended(self, superseded: bool, failure: str | None) -> None:
        if failure:
            self.notify(failure, title="The answer stopped", severity="error", timeout=8)
        self.refresh_bindings()
        self._render_queue()
        if superseded:  # a redirect or a queued follow-up took over: keep the user where they are
            return
        turn = self.session.turn
        h = self._first_open_hunk()
        if turn is None or h is None or self.focus_area != "prompt":
            return
        prompt = self.query_one(PromptInput)
        if prompt.value or time.monotonic() - prompt.typed_at < TYPING_PAUSE:
            # the user is writing: the review waits for them (Tab), keys stay in the prompt
            n = sum(1 for x in self.session.pending.hunks if x.state in OPEN)
            self.notify(f"The answer is in: {n} hunk{'s' if n != 1 else ''} to review (Tab).",
                        timeout=4)
            return
        if turn.state not in ("done", "interrupted"):
            return
        diff = self.query_one(DiffView)
        diff.guard_until = time.monotonic() + GUARD
        diff.focus()
        self.set_timer(GUARD + 0.01, self._guard_over)
        if self.follow or diff.hunk is None or diff.hunk.state not in OPEN:
            self._select(h.path, h.id)  # review starts at the top

    def _sync_diff(self, pending: PendingDiff, f: Frame) -> None:
        tree = self.query_one(FileTree)
        self._badges.update(f.open_counts)
        self._created = (self._created - f.dirty) | f.created
        # a file the proposal creates joins the tree; a path an edit only named does not
        missing = [p for p in f.dirty if p in pending.files and not tree.has(p)
                   and pending.files[p].created and pending.files[p].hunks]
        now = time.perf_counter()
        # a tree line costs ~0.7 ms to draw: while streaming, its badges move 4 times a second
        if missing or not self.session.streaming or now - self._badges_at >= BADGES_EVERY:
            self._badges_at = now
            counts = dict(tree.pending)
            for p, n in self._badges.items():
                if n:
                    counts[p] = n
                else:
                    counts.pop(p, None)
            self._badges.clear()
            tree.set_badges(pending=counts, created=set(self._created))
        if missing:
            self.files = sorted(set(self.files) | set(missing))
            tree.load(self.files)
        if self.view != "pending":
            return  # a git view is up: the pending diff shows again when the user asks
        diff = self.query_one(DiffView)
        live = pending.live_hunk if self.session.streaming else None
        if self.follow and live is not None:
            if live.path != self.selected:
                self._select(live.path, None, manual=False)
            diff.refresh_rows()
            diff.follow(live)
            return
        if self.follow and self.session.streaming and diff.following:
            # between two hunks of the answer (a SEARCH being read): still following
            if self.selected in f.dirty:
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
            self._render_diff_title()
        if self.selected is None and pending.files:
            self._select(next(iter(pending.files)), None, manual=False)
        elif self.selected in f.dirty or (self.selected in pending.files and diff.fd is None):
            if diff.fd is None and self.selected in pending.files:
                diff.show(pending.files[self.selected])
            else:
                diff.refresh_rows()

    def _select(self, path: str, hunk_id: int | None, manual: bool = True) -> None:
        pending = self.session.pending
        diff = self.query_one(DiffView)
        self.selected = path
        if manual:
            self.follow = False
        fd = pending.files.get(path) if pending is not None else None
        if self.view != "pending" and self.in_git:
            self.run_worker(self._show_git_view(path), group="gitview", exclusive=True)
        else:
            diff.show(fd, "" if fd else f"No pending changes for {path}.")
        self._render_diff_title()
        if hunk_id is not None:
            diff.select(hunk_id)
        self.refresh_bindings()

    @on(DiffView.ModeChanged)
    def _render_diff_title(self) -> None:
        diff = self.query_one(DiffView)
        head = {"pending": "Pending diff", "head": "Working tree vs HEAD",
                "index": "Staged (index vs HEAD)"}[self.view]
        # a narrow pane drops whole parts: the view's name first, the file last
        parts = [Part(head, 2)] + ([Part(self.selected, 0)] if self.selected else [])
        if diff.line_mode:
            parts.append(Part("LINES: ↑↓ move, Space picks, y accepts the picked lines, Esc leaves", 1))
        elif diff.side_by_side:
            parts.append(Part("side by side", 3))
        if self._elsewhere:
            parts.append(Part(self._elsewhere, 1))
        title = StatusLine(parts)
        self.query_one("#diff-title", Line).set(title)

    def _first_open_hunk(self):
        pending = self.session.pending
        if pending is None:
            return None
        return next((h for h in pending.hunks if h.state in OPEN), None)

    def _render_context(self) -> None:
        if not self._ready:
            return
        ctx = self.session.context
        prompt = self.query_one(PromptInput)
        hint = f"   @{prompt.completion}? Tab completes" if prompt.completion else ""
        shown = "  ".join(f"◆ {p}" + (" (outline)" if p in self.session.outlined else "")
                          for p in ctx) if ctx else "none yet: type @path or press c on a file"
        budget = self.session.budget(prompt.message).text()
        self.query_one("#context", Line).set(f"Context: {shown} · {budget}{hint}")
        self.query_one(FileTree).set_badges(context=set(ctx))

    def _render_queue(self) -> None:
        queue = self.session.queue
        view, title = self.query_one(QueueView), self.query_one("#queue-title")
        view.show(queue)
        # display is a layout change: only when it really changes
        if view.display != bool(queue):
            view.display = bool(queue)
        if title.display != (bool(queue) or self._editing is not None):
            title.display = bool(queue) or self._editing is not None

    # -- files, git, watching --------------------------------------------------------------
    async def _sync(self) -> None:
        """The working tree and git, kept in step (app/core/git/sync.py): the first picture,
        then every coalesced burst of changes, whoever made them."""
        self.git_sync = await asyncio.to_thread(
            Sync.open, self.ws, lambda: self.session.pending, lock=self.session.write_lock)
        try:
            first = await self.git_sync.initial()
            if not self.alive:
                return
            self._from_worker(self._apply_sync, first)
            if self.watch_files:
                async for update in self.git_sync.updates(self._stop_watch):
                    if not self.alive:
                        return
                    self._from_worker(self._apply_sync, update)
                    if self.on_sync is not None:
                        self.on_sync(update)
        finally:
            await self.git_sync.aclose()

    def _apply_sync(self, u: SyncUpdate) -> None:
        tree = self.query_one(FileTree)
        if u.files is not None:
            pending = self.session.pending
            self.files = u.files
            self.query_one(PromptInput).files = u.files
            tree.load(u.files + [p for p in (pending.files if pending else ())
                                 if pending.files[p].created and pending.files[p].hunks])
        if u.status is not None:
            tree.set_badges(git={p: _git_badge(st) for p, st in u.status.items()})
        if u.branch is not None and u.branch != self.branch:
            self.branch = u.branch
            self._render_header()
        for r in u.rebased:
            if r.conflicts:
                n = len(r.conflicts)
                self.notify(f"{r.path} changed on disk: {n} hunk{'s' if n != 1 else ''} overlap your "
                            "edit (m keeps yours, T takes the proposal, e edits)", severity="warning",
                            timeout=8)
            if r.stale:
                self.notify(f"{r.path}: {r.stale}", severity="warning", timeout=8)
        if u.git_changed and self.view != "pending" and self.selected:
            self.run_worker(self._show_git_view(self.selected), group="gitview", exclusive=True)
        self.frame(force_status=True)  # the rebased hunks, now

    def _render_header(self) -> None:
        branch = f" · {self.branch}" if self.branch else ""
        # the folder's and the branch's names are outside text too
        self.sub_title = name(f"{self.ws.root.name}{branch} · {self.session.provider.label}")

    # -- prompt ----------------------------------------------------------------------------
    @on(Input.Changed, "#prompt")
    def _prompt_changed(self) -> None:
        self._render_context()

    @on(Input.Submitted, "#prompt")
    def _prompt_submitted(self, event: Input.Submitted) -> None:
        text = event.value  # trimmed by the prompt, pastes whole (their own spaces kept)
        if self._editing is not None:
            self._finish_editing(text)
            return
        if not text:
            return
        event.input.value = ""
        self.send(text)

    @on(PromptInput.Queue)
    def _queue(self, event: PromptInput.Queue) -> None:
        text = event.text
        if self._editing is not None:
            self._finish_editing(text)
            return
        self.query_one(PromptInput).value = ""
        if self.session.streaming:
            self.query_one(PromptInput).remember(text)
            self.session.enqueue(text)
            self._render_queue()
            self.notify(f"queued: {text}", timeout=2)
        else:
            self.send(text)

    @on(PromptInput.ShowPaste)
    def _show_paste(self, event: PromptInput.ShowPaste) -> None:
        self.app.push_screen(PasteView(event.paste))

    @on(PromptInput.Review)
    def _prompt_review(self) -> None:
        self.action_focus_diff()

    def send(self, text: str) -> None:
        """Send a message; its @paths join the context first (asking about any file the
        model's context window cannot take whole)."""
        prompt = self.query_one(PromptInput)
        prompt.remember(text)  # Up recalls it
        new = [raw for raw in prompt.mentions(text) if self._known(raw) not in self.session.context]
        self._add_each(new, lambda: self._send(text))

    def _send(self, text: str) -> None:
        session = self.session
        if not session.context and not session.streaming and session.pending is None:
            self.notify("No files in the context: the model sees only your message. "
                        "Add files with @path, or c in the tree.", severity="warning", timeout=6)
        try:
            session.start(text)
        except ContextError as exc:
            self.notify(str(exc), severity="error")
            return
        for path in session.context:
            self.run_worker(asyncio.to_thread(warm_lexer, path), group="warm")
        self.frame()

    def _known(self, raw: str) -> str | None:
        try:
            return self.ws.check_path(raw)
        except ValueError:
            return None

    def _add_each(self, raws: list[str], then) -> None:
        """Add files one by one (a question may come up for any of them), then go on."""
        if not raws:
            then()
            return
        self._add_context(raws[0], quiet=False, then=lambda: self._add_each(raws[1:], then))

    def _add_context(self, raw: str, quiet: bool = True, then=None) -> None:
        """Add a file to the context. One the model's window cannot take whole is not added
        silently nor cut: the user chooses its outline or nothing."""
        session = self.session
        rel = self._known(raw)
        budget = session.budget()
        size = session.file_tokens(rel, outline=False) if rel else 0
        if rel is None or rel in session.context or budget.fits(size):
            try:
                session.add_context(raw)
            except ContextError as exc:
                if not quiet:
                    self.notify(str(exc), severity="error")
            self._render_context()
            if then is not None:
                then()
            return
        room = max(0, (budget.room or 0) - budget.used)
        outline = session.file_tokens(rel, outline=True)

        def chosen(choice: str | None) -> None:
            if choice == "outline":
                session.add_context(rel, outline=True)
                self.notify(f"{rel}: its outline goes to the model (≈{outline:,} tokens)", timeout=4)
            else:
                self.notify(f"{rel} was not added to the context", timeout=4)
            self._render_context()
            if then is not None:
                then()

        self.app.push_screen(ChoiceScreen(
            f"{rel} is ≈{size:,} tokens: more than the ≈{room:,} the model's window has left.",
            "Nothing is cut silently. Send its outline (definitions with line numbers), "
            "or leave it out?",
            [("o", f"outline (≈{outline:,} tokens)", "outline"), ("n", "leave it out", "none")]),
            callback=chosen)

    @on(FileTree.ToggleContext)
    def _toggle_context(self, event: FileTree.ToggleContext) -> None:
        if event.path in self.session.context:
            self.session.remove_context(event.path)
            self._render_context()
        else:
            self._add_context(event.path, quiet=False)

    @on(FileTree.NodeSelected)
    def _file_chosen(self, event: FileTree.NodeSelected) -> None:
        path = event.node.data
        if path and not path.endswith("/"):
            self._select(path, None)

    # -- the queue -------------------------------------------------------------------------
    @on(QueueView.Edit)
    def _edit_queued(self, event: QueueView.Edit) -> None:
        """Back in the prompt to edit; saving puts it back in its place (Enter or Tab), Esc
        leaves it as it was. It is out of the queue meanwhile, so it is not sent half-edited."""
        queue = self.session.queue
        if not 0 <= event.index < len(queue) or self._editing is not None:
            return
        text = queue.pop(event.index)
        self._editing = (event.index, text)
        prompt = self.query_one(PromptInput)
        prompt.show(text)
        prompt.focus()
        self._render_queue()

    def _finish_editing(self, text: str | None) -> None:
        """Put the message back in its place: as edited (`text`; empty drops it), or as it
        was (None)."""
        assert self._editing is not None
        index, original = self._editing
        self._editing = None
        new = original if text is None else text
        if new:
            queue = self.session.queue
            queue.insert(min(index, len(queue)), new)
        self.query_one(PromptInput).value = ""
        self._render_queue()

    @on(QueueView.Drop)
    def _drop_queued(self, event: QueueView.Drop) -> None:
        if 0 <= event.index < len(self.session.queue):
            self.session.queue.pop(event.index)
            self._render_queue()

    def action_clear_queue(self) -> None:
        self.session.queue.clear()
        self._render_queue()

    # -- diff navigation -------------------------------------------------------------------
    @on(DiffView.LeaveFile)
    def _leave_file(self, event: DiffView.LeaveFile) -> None:
        pending = self.session.pending
        if pending is None:
            return
        paths = [p for p, fd in pending.files.items() if fd.hunks]
        if not paths:
            return
        i = paths.index(self.selected) if self.selected in paths else -1
        j = i + event.step
        if 0 <= j < len(paths):
            self._select(paths[j], None)
            self.query_one(DiffView).select(None, edge="first" if event.step > 0 else "last")
            self.query_one(FileTree).reveal(paths[j])

    @on(DiffView.CursorMoved)
    def _cursor_moved(self) -> None:
        self.follow = False
        if self._ready:
            self.refresh_bindings()

    @on(DiffView.StartMessage)
    def _start_message(self, event: DiffView.StartMessage) -> None:
        prompt = self.query_one(PromptInput)
        prompt.focus()
        prompt.insert_text_at_cursor(event.text)

    # -- review intents --------------------------------------------------------------------
    def _current(self):
        diff = self.query_one(DiffView)
        return diff, diff.hunk

    async def action_accept_hunk(self) -> None:
        diff, h = self._current()
        review = self.session.review
        if h is None or review is None:
            return
        if h.state not in OPEN:
            self.notify(f"hunk #{h.id} is {h.state.value}", timeout=2)
            return
        if diff.line_mode:
            rows = diff.picked or {diff.line_cursor}
            plan = review.plan_lines(h.id, rows)
            diff.line_mode = False
        else:
            plan = review.plan_hunks([h.id])
        out = await self._carry_out(plan)
        if out is not None and out.accepted:
            self._advance()  # on to the next one; a refused accept stays where the user looks

    def action_reject_hunk(self) -> None:
        diff, h = self._current()
        review = self.session.review
        if h is not None and review is not None and review.reject([h.id]).rejected:
            diff.line_mode = False
            self.frame(force_status=True)
            self._advance()

    async def action_accept_file(self) -> None:
        review, pending = self.session.review, self.session.pending
        if review is not None and pending is not None and self.selected in pending.files:
            await self._carry_out(review.plan_file(self.selected))
            self._advance()

    def action_reject_file(self) -> None:
        review, pending = self.session.review, self.session.pending
        if review is not None and pending is not None and self.selected in pending.files:
            review.reject_file(self.selected)
            self.frame(force_status=True)
            self._advance()

    async def action_accept_all(self) -> None:
        if self.session.review is not None:
            await self._carry_out(self.session.review.plan_all())

    def action_reject_all(self) -> None:
        if self.session.review is not None:
            self.session.review.reject_all()
            self.frame(force_status=True)

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
            self.notify(f"accepted {len(out.accepted)} hunk(s) → {', '.join(out.written)}", timeout=2)
            self._can_undo = True
        self.frame(force_status=True)
        return out

    def _advance(self) -> None:
        """After a decision, move to the next open hunk (in this file, then the next)."""
        diff = self.query_one(DiffView)
        hunks = diff.hunks
        cur = diff.hunk
        if cur is not None and cur in hunks:
            later = hunks[hunks.index(cur) + 1 :] + hunks[: hunks.index(cur)]
            nxt = next((h for h in later if h.state in OPEN or h.state == HunkState.STREAMING), None)
            if nxt is not None:
                diff.select(nxt.id)
                return
        h = self._first_open_hunk()
        if h is not None:
            self._select(h.path, h.id)
        diff.refresh()

    async def action_undo(self) -> None:
        """The last accept, this session's or an earlier one's: the same as `steer undo`."""
        try:
            label = await self.session.undo()
        except (UndoRefused, Busy, OSError) as exc:
            self.notify(str(exc), severity="error", timeout=8)
            return
        self.notify(f"undone: {label}", timeout=3)
        self.frame(force_status=True)
        await self._check_undo()

    async def action_edit_hunk(self) -> None:
        _, h = self._current()
        review = self.session.review
        if h is None or h.state not in OPEN or review is None:
            return
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
        if editor and not self.app.is_headless:
            lines = self._edit_externally(editor, h)
            if lines is not None:
                await self._carry_out(review.plan_edited(h.id, lines))
                self._advance()
            return
        hidden = found("\n".join(h.new))
        if hidden:  # the inline editor would send them to the terminal as they are
            self.notify(f"hunk #{h.id} holds invisible characters ({', '.join(hidden[:3])}): set "
                        "$EDITOR to edit it, or decide it as it is", severity="warning", timeout=8)
            return
        self.app.push_screen(HunkEditor(h, _language(h.path)), callback=self._edited(h.id))

    def _edit_externally(self, editor: str, h) -> list[str] | None:
        suffix = Path(h.path).suffix
        with tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False) as tmp:
            tmp.write("\n".join(h.new) + "\n")
        try:
            with self.app.suspend():
                subprocess.run([*shlex.split(editor), tmp.name], check=False)
            text = Path(tmp.name).read_text()
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp.name)
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return None if lines == h.new else lines

    def _edited(self, hunk_id: int):
        async def done(lines: list[str] | None) -> None:
            review = self.session.review
            if lines is not None and review is not None:
                await self._carry_out(review.plan_edited(hunk_id, lines))
                self._advance()
        return done

    def action_retry(self) -> None:
        if self.session.retry_refused() is not None:
            self.frame(force_status=True)

    # -- conflicts with the disk -----------------------------------------------------------
    def action_keep_mine(self) -> None:
        _, h = self._current()
        review = self.session.review
        if h is not None and review is not None and self.hunk_conflict:
            review.take_mine(h.id)
            self.frame()
            self._advance()

    async def action_take_theirs(self) -> None:
        _, h = self._current()
        review = self.session.review
        if h is not None and review is not None and self.hunk_conflict:
            await self._carry_out(review.plan_theirs(h.id))
            self._advance()

    # -- git -------------------------------------------------------------------------------
    def action_cycle_view(self) -> None:
        views = ["pending", "head", "index"] if self.in_git else ["pending"]
        self.view = views[(views.index(self.view) + 1) % len(views)] if self.view in views else "pending"
        if self.selected:
            self._select(self.selected, None)

    async def _show_git_view(self, path: str) -> None:
        sync = self.git_sync
        if sync is None or sync.git is None:
            return
        what = "working tree vs HEAD" if self.view == "head" else "index vs HEAD"
        fetch = sync.git.diff_head if self.view == "head" else sync.git.diff_index
        try:
            text = await asyncio.to_thread(fetch, path)
        except Exception as exc:  # noqa: BLE001 - git's own message, shown where the diff goes
            text, what = "", f"{what}: git failed: {exc}"
        if self.alive and self.selected == path and self.view != "pending":
            self.query_one(DiffView).show_rows(path, gitdiff.rows(path, text, what))

    async def action_stage(self) -> None:
        pending, sync = self.session.pending, self.git_sync
        if pending is None or sync is None:
            return
        async with self.session.write_lock:  # not while an accept writes
            result = await sync.stage(pending)
        for msg in result.messages:
            self.notify(msg, severity="warning", timeout=8)
        if result.staged:
            self.notify(f"staged the accepted hunks of {', '.join(result.staged)}", timeout=4)
        elif not result.messages:
            self.notify("the accepted hunks were staged already", timeout=3)

    def action_commit(self) -> None:
        sync = self.git_sync
        if sync is None or sync.git is None:
            self.notify("not a git repository: nothing to commit", severity="warning")
            return
        staged = sorted(p for p, b in self.query_one(FileTree).git.items() if b[0])

        def done(summary: str | None) -> None:
            if summary:
                self.notify(f"committed: {summary}", timeout=6)

        self.app.push_screen(CommitScreen(sync, self.session.provider, staged), callback=done)

    # -- steering and focus ----------------------------------------------------------------
    def action_interrupt(self) -> None:
        if self._editing is not None:  # Esc leaves the edit first; the next one stops the model
            self._finish_editing(None)
        elif self.focus_area == "queue":
            self.action_focus_prompt()
        elif self.session.interrupt():
            self.frame()  # settle now, not on the next tick

    def action_back(self) -> None:
        """Esc when nothing streams: step out of a mode, never between typing and reviewing
        (a review key must never land in the prompt by surprise, nor a letter in the diff)."""
        diff = self.query_one(DiffView)
        if self._editing is not None:
            self._finish_editing(None)
            return
        if diff.line_mode:
            diff.line_mode = False
            diff.refresh()
            self.refresh_bindings()
            return
        if self.focus_area in ("tree", "queue", "conversation"):
            self.action_focus_diff() if self.session.pending else self.action_focus_prompt()

    def action_focus_prompt(self) -> None:
        prompt = self.query_one(PromptInput)
        prompt.focus()

    def action_focus_conversation(self) -> None:
        self.query_one("#stream", StreamView).focus()

    def action_toggle_raw(self) -> None:
        """Raw answer text (what the model sent) or the conversation with edit cards."""
        self.sync.mode = "raw" if self.sync.mode == "conversation" else "conversation"
        self.sync.restart()
        self.query_one("#stream", StreamView).clear()
        self.frame(force_status=True)

    @on(StreamView.CardChosen)
    def _card_chosen(self, event: StreamView.CardChosen) -> None:
        ids = self.sync.card_hunks(event.key)
        pending = self.session.pending
        if not ids or pending is None:
            self.notify("that edit has no hunk to show (it was refused or is gone)", timeout=3)
            return
        h = pending.hunk(ids[0])
        self.view = "pending"
        self._select(h.path, h.id)
        diff = self.query_one(DiffView)
        diff.guard_until = 0.0
        diff.focus()

    def action_focus_diff(self) -> None:
        diff = self.query_one(DiffView)
        diff.guard_until = 0.0  # the user chose to review: their keys act at once
        diff.focus()

    def action_focus_queue(self) -> None:
        if self.session.queue:
            self.query_one(QueueView).focus()

    # -- availability (the action table's WHEN conditions) ---------------------------------
    @property
    def streaming(self) -> bool:
        return self.session.streaming

    @property
    def hunk_open(self) -> bool:
        if not self._ready:
            return False
        h = self.query_one(DiffView).hunk
        return h is not None and h.state in OPEN

    @property
    def any_open(self) -> bool:
        pending = self.session.pending
        return pending is not None and any(h.state in OPEN for h in pending.hunks)

    @property
    def can_undo(self) -> bool:
        review = self.session.review
        return self._can_undo or (review is not None and review.can_undo)

    @property
    def has_queue(self) -> bool:
        return bool(self.session.queue)

    @property
    def hunk_conflict(self) -> bool:
        if not self._ready:
            return False
        h = self.query_one(DiffView).hunk
        return h is not None and h.state == HunkState.CONFLICT and h.ancestor is not None

    @property
    def any_accepted(self) -> bool:
        pending = self.session.pending
        return self.in_git and pending is not None and any(
            h.state == HunkState.ACCEPTED for h in pending.hunks)

    @property
    def any_refused(self) -> bool:
        return bool(self.session.refused) and not self.session.streaming

    @property
    def in_git(self) -> bool:
        return self.git_sync is not None and self.git_sync.git is not None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide keys that would do nothing now, so the footer shows what matters."""
        return actions.available(action, self)

    def palette_actions(self) -> Iterable[tuple[actions.Action, Callable[[], object]]]:
        """The palette's actions available now, each with what runs it."""
        diff = self.query_one(DiffView)
        for a in actions.palette(self):
            target, _, name = a.run.rpartition(".")
            owner = {"screen": self, "app": self.app}.get(target, diff)
            yield a, lambda o=owner, n=name: o.run_action(n)


def _git_badge(st: FileStatus) -> tuple[str, str]:
    """(staged letter, unstaged letter), as `git status -s` shows them."""
    if st.conflicted:
        return "", "U"
    if st.untracked:
        return "", "?"
    return (st.index if st.staged else ""), (st.worktree if st.unstaged else "")


def _write(view: StreamView, pieces: list[Piece]) -> None:
    for p in pieces:
        if p.key is not None:
            view.set_card(p.key, p.text, p.style)
        elif p.line:
            view.write_line(p.text, p.style)
        elif p.style == "md":
            view.add_markdown(p.text)
        elif p.style == "tail":
            view.set_tail(p.text)
        else:
            view.write(p.text, p.style)


def _language(path: str) -> str | None:
    lang = fence_lang(path)
    return lang if lang in ("python", "javascript", "rust", "markdown", "json", "toml", "yaml", "bash",
                            "css", "html", "go", "java", "sql") else None
