"""The full-screen app. Thin: it renders core state once per frame and turns keys into
intents on core objects (Session, Review); file, git and network I/O happen in core, in
threads or in the provider's own tasks, never in a widget."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import shlex
import subprocess
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Header, Input, ListItem, ListView, Static

from app.config import Settings
from app.core import repo, watch
from app.core.diff import OPEN, HunkState, PendingDiff
from app.core.journal import Journal, UndoRefused
from app.core.prompts import fence_lang
from app.core.provider import Provider
from app.core.review import AcceptPlan, Outcome, Review
from app.core.session import ContextError, Session, Turn
from app.core.workspace import Busy, Workspace
from app.run_output import status_text
from app.ui.diff_view import DiffView, warm_lexer
from app.ui.file_tree import FileTree
from app.ui.prompt import PromptInput, at_paths
from app.ui.screens import HelpScreen, HunkEditor
from app.ui.stream_view import StreamView
from app.ui.themes import DEFAULT, load_themes, remember_theme, remembered_theme, stylesheet

IDLE_TICK = 1 / 10  # the clock in the status line, when nothing else wakes the screen
DIFF_EVERY = 0.05  # while streaming, the diff pane updates at most 20 times a second
STATUS_EVERY = 0.1  # the status line's clock and rate need not move faster than this


class Line(Widget):
    """One line of text that changes often (the status line): a repaint, never a layout
    pass, which a Static's update() would cost the whole screen."""

    DEFAULT_CSS = "Line { height: 1; width: 1fr; }"

    def __init__(self, text: str = "", *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.text = text

    def set(self, text: str) -> None:
        if text != self.text:
            self.text = text
            self.refresh()

    def render(self) -> str:
        return self.text


class MainScreen(Screen):
    """The app's screen. Textual repaints from a timer that it resumes whenever a widget is
    dirty; taking our frame at that same tick (instead of from a second timer of our own)
    saves a token up to a whole frame of waiting between arriving and being drawn."""

    def _on_timer_update(self) -> None:
        self.app._frame()  # type: ignore[attr-defined]
        super()._on_timer_update()


class QueueView(ListView):
    """Queued follow-ups: Enter puts one back in the prompt to edit, Delete drops it."""

    BINDINGS = [Binding("enter,e", "edit_item", "Edit", id="edit_queued"),
                Binding("delete,d,backspace", "drop_item", "Drop", id="drop_queued")]

    def action_edit_item(self) -> None:
        if self.index is not None:
            self.app.edit_queued(self.index)  # type: ignore[attr-defined]

    def action_drop_item(self) -> None:
        if self.index is not None:
            self.app.drop_queued(self.index)  # type: ignore[attr-defined]


class SteerApp(App):
    CSS_PATH = str(stylesheet())
    TITLE = "steer"
    BINDINGS = [
        Binding("escape", "interrupt", "Stop", id="interrupt"),
        Binding("escape", "back", "Back", id="back"),
        Binding("f1,question_mark", "help", "Help", id="help"),
        Binding("t", "next_theme", "Theme", id="theme", show=False),
        Binding("ctrl+q", "quit", "Quit", id="quit"),
        Binding("i,slash", "focus_prompt", "Prompt", id="focus_prompt", show=False),
        Binding("ctrl+f", "focus_files", "Files", id="focus_files", show=False),
        Binding("ctrl+d", "focus_diff", "Diff", id="focus_diff", show=False),
    ]

    def __init__(self, root: Path, provider: Provider, settings: Settings | None = None, *,
                 context: Iterable[str] = (), watch_files: bool = True, blink: bool = True) -> None:
        super().__init__()
        self.settings = settings or Settings()
        self.ws = Workspace(root)
        self.session = Session(self.ws, provider, fmt=self.settings.format,
                               max_tokens=self.settings.max_tokens, temperature=self.settings.temperature)
        self._initial_context = list(context)
        self.watch_files = watch_files
        self.blink = blink  # snapshot tests turn the cursor blink off
        self.files: list[str] = []
        self.selected: str | None = None
        self.follow = True  # the diff follows the file being streamed until you navigate
        self._turn: Turn | None = None
        self._chunk_i = 0
        self._pending: PendingDiff | None = None
        self._prose_i = 0
        self._last_prose: str | None = None
        self._errors_i = 0
        self._status_at = 0.0
        self._bottom_at = 0.0
        self._diff_at = 0.0
        self._status = ""
        self._was_live = False
        self._write_lock = asyncio.Lock()
        self._stop_watch = asyncio.Event()
        self._keys: dict[str, str] = {}
        self.frames = 0  # frames that changed something (the TUI benchmark reads it)
        self.on_frame = None  # optional hook, called after each frame that changed something
        self._ui_ready = False
        themes, self._theme_problems = load_themes()
        self._theme_names = [t.name for t in themes]
        for t in themes:
            self.register_theme(t)
        wanted = self.settings.theme if self.settings.theme != DEFAULT else (remembered_theme() or DEFAULT)
        self.theme = wanted if wanted in self._theme_names else DEFAULT

    def get_default_screen(self) -> Screen:
        return MainScreen(id="_default")

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return {"diff-added-bg": "#1f3a26", "diff-removed-bg": "#45222a", "syntax": "monokai"}

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
                yield Line("Answer", id="stream-title", classes="pane-title")
                yield StreamView(id="stream")
                yield Line("Explanation", id="explanation-title", classes="pane-title")
                yield StreamView(id="explanation")
                yield Line("Queued follow-ups (Enter edits, Del drops)", id="queue-title", classes="pane-title")
                yield QueueView(id="queue")
        yield Line(id="status")
        yield Line(id="context")
        yield PromptInput(id="prompt", blink=self.blink)
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = f"{self.ws.root.name} · {self._provider_label()}"
        self._keys = self._key_names()
        if self.settings.keys:
            self.set_keymap(self.settings.keys)
            self._keys = self._key_names()
        for raw in self._initial_context:
            self._add_context(raw, quiet=False)
        self._apply_syntax()
        self._render_context()
        self._render_status(force=True)
        for problem in self._theme_problems:
            self.notify(problem, severity="warning")
        self.query_one(PromptInput).focus()
        self._ui_ready = True
        self.session.on_data = self._wake
        self.set_interval(IDLE_TICK, self._frame)
        gc.freeze()  # what start-up built stays: keep it out of every later collection
        self.run_worker(self._load_files(), group="files")
        if self.session.provider.capabilities.warm_up:  # the model loads while you type
            self.run_worker(self.session.provider.warm(), group="warm")
        if self.watch_files:
            self.run_worker(self._watch(), group="watch")
        self.run_worker(self._recover(), group="recover")

    async def _recover(self) -> None:
        """An accept or undo a crash left half-done (journal) is completed before anything."""
        try:
            done = await asyncio.to_thread(Journal.for_workspace(self.ws).recover, self.ws)
        except (Busy, OSError) as exc:
            self.notify(f"an interrupted accept or undo is not complete: {exc}", severity="error")
            return
        for e in done:
            notes = "".join(f"; {n}" for n in e.notes)
            self.notify(f"completed an interrupted {e.op}: {e.label}{notes}", severity="warning",
                        timeout=10)

    def on_resize(self, event) -> None:
        # narrow terminals: a slimmer tree and side pane, then no tree (c and @path still work)
        width = event.size.width
        self.set_class(width < 100, "-narrow")
        self.set_class(100 <= width < 140, "-medium")

    def _provider_label(self) -> str:
        p = self.session.provider
        return f"{p.name}:{p.model}" if p.model else p.name

    # -- the frame -------------------------------------------------------------------------
    def _wake(self) -> None:
        """New text arrived: make sure a screen update is coming (one per frame at most:
        the session calls this again only after the frame took what it had)."""
        if self._ui_ready:
            self.query_one("#stream-title", Line).refresh()  # in the pane that changes anyway

    def _frame(self) -> None:
        """Everything that arrived since the last frame, rendered once."""
        if not self._ui_ready or self._exit_renderables or not self.screen_stack:
            return  # shutting down
        try:
            self._render_frame()
        except NoMatches:  # the screen is being torn down between two ticks
            if self.is_running and not self._closing:
                raise

    def _render_frame(self) -> None:
        session = self.session
        session.take_data()
        changed = False
        stream = self.query_one("#stream", StreamView)
        turn = session.turn
        # the last chunks of the turn on screen first (a redirect ends it between frames)
        if self._turn is not None and self._chunk_i < len(self._turn.chunks):
            stream.write("".join(self._turn.chunks[self._chunk_i :]))
            self._chunk_i = len(self._turn.chunks)
            changed = True
        pending = session.pending
        if pending is not None:
            changed |= self._sync_pending(pending)
        if turn is not self._turn and turn is not None:
            if self._turn is not None and not self._turn.live and self._was_live:
                self._turn_ended(self._turn, superseded=True)
            self._begin_turn_view(turn, stream)
            changed = True
            if self._chunk_i < len(turn.chunks):
                stream.write("".join(turn.chunks[self._chunk_i :]))
                self._chunk_i = len(turn.chunks)
        live = turn is not None and turn.live
        if self._was_live and not live and turn is not None:
            self._turn_ended(turn)
            changed = True
        self._was_live = live
        self._render_status(force=changed and not live)
        if changed:
            self.frames += 1
            if self.on_frame is not None:
                self.on_frame()

    def _sync_pending(self, pending: PendingDiff) -> bool:
        changed = False
        if pending is not self._pending:
            self._pending, self._prose_i, self._errors_i, self._last_prose = pending, 0, 0, None
            self.query_one("#explanation", StreamView).clear()
            self.follow = True
        expl = self.query_one("#explanation", StreamView)
        if self._prose_i < len(pending.prose):
            for line in pending.prose[self._prose_i :]:
                if line.strip() or (self._last_prose and self._last_prose.strip()):
                    expl.write_line(line)  # runs of blank lines collapse to one
                self._last_prose = line
            self._prose_i = len(pending.prose)
            changed = True
        if self._errors_i < len(pending.errors):
            for err in pending.errors[self._errors_i :]:
                expl.write_line(f"⚠ {err.message}", "error")
            self._errors_i = len(pending.errors)
            changed = True
        turn = self.session.turn
        now = time.perf_counter()
        if turn is not None and turn.live and now - self._diff_at < DIFF_EVERY:
            # Textual repaints the bounding box of all that changed in a frame: the diff pane
            # and the answer pane together are most of the screen. The answer pane goes every
            # frame; the diff pane's changes wait a frame or two and go together.
            return changed
        dirty = pending.take_dirty()
        if dirty:
            self._diff_at = now
            self._sync_diff(pending, dirty)
            changed = True
        return changed

    def _begin_turn_view(self, turn: Turn, stream: StreamView) -> None:
        if self._turn is not None:
            stream.write_line("")
            self._was_live = False
        label = {"redirect": "↪ redirect", "follow-up": "› follow-up", "ask": "›"}[turn.kind]
        stream.write_line(f"{label} {turn.instruction}", "user")
        expl = self.query_one("#explanation", StreamView)
        if turn.kind != "ask" and expl.text.strip():
            expl.write_line(f"── {label}: {turn.instruction}", "dim")
        self._turn, self._chunk_i = turn, 0
        self._was_live = True
        self.refresh_bindings()
        self._render_queue()

    def _turn_ended(self, turn: Turn, superseded: bool = False) -> None:
        stream = self.query_one("#stream", StreamView)
        if turn.state == "interrupted":
            stream.write_line("■ interrupted", "dim")
        elif turn.error is not None:
            stream.write_line(f"✗ {turn.error.message}", "error")
            self.notify(turn.error.message, title="The answer stopped", severity="error", timeout=8)
        elif turn.finish_reason == "length":
            stream.write_line("✗ the answer hit the token limit; its last edit is incomplete", "error")
        self.refresh_bindings()
        self._render_queue()
        prompt = self.query_one(PromptInput)
        if superseded:  # a redirect or a queued follow-up took over: keep the user where they are
            return
        if turn.state == "done" or (turn.state == "interrupted" and not prompt.value):
            diff = self.query_one(DiffView)
            diff.focus()
            h = self._first_open_hunk()
            if h is not None and (self.follow or diff.hunk is None or diff.hunk.state not in OPEN):
                self._select(h.path, h.id)  # review starts at the top

    def _sync_diff(self, pending: PendingDiff, dirty: set[str]) -> None:
        tree = self.query_one(FileTree)
        counts = dict(tree.pending)
        for p in dirty & set(pending.files):
            fd = pending.files[p]
            n = sum(1 for h in fd.hunks if h.state in OPEN or h.state == HunkState.STREAMING)
            if n:
                counts[p] = n
            else:
                counts.pop(p, None)
        created = {p for p in dirty if p in pending.files and pending.files[p].created and pending.files[p].hunks}
        tree.set_badges(pending=counts, created=(tree.created - dirty) | created)
        missing = [p for p in dirty if p in pending.files and p not in tree._by_path]
        if missing:
            self.files = sorted(set(self.files) | set(missing))
            tree.load(self.files)
        diff = self.query_one(DiffView)
        if self.follow and self.session.streaming:
            live = pending.live_hunk
            if live is not None:
                if live.path != self.selected:
                    self._select(live.path, None, manual=False)
                diff.refresh_rows()
                diff.follow(live)
                return
        else:
            diff.follow(None)
        if self.selected is None and pending.files:
            self._select(next(iter(pending.files)), None, manual=False)
        elif self.selected in dirty or (self.selected in pending.files and diff.fd is None):
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
        diff.show(fd, "" if fd else f"No pending changes for {path}.")
        self.query_one("#diff-title", Line).set(f"Pending diff · {path}")
        if hunk_id is not None:
            diff.select(hunk_id)
        self.refresh_bindings()

    def _first_open_hunk(self):
        pending = self.session.pending
        if pending is None:
            return None
        return next((h for h in pending.hunks if h.state in OPEN), None)

    def _render_status(self, force: bool = False) -> None:
        """Live figures go in the Answer pane's title; the bottom line says where the review
        stands. Textual repaints the bounding box of everything that changed in a frame, so a
        full-width line changing together with the panes would repaint the whole screen: the
        bottom line changes at most once a second while the answer streams."""
        now = time.perf_counter()
        turn = self.session.turn
        live = turn is not None and turn.live
        if not force and now - self._status_at < STATUS_EVERY:
            return
        self._status_at = now
        if turn is None:
            title = "Answer"
        else:
            # the provider is in the header and the bottom line; the title keeps the figures
            title = f"Answer · {status_text(self.session.provider, turn, with_provider=False)}"
        self.query_one("#stream-title", Line).set(title)
        if live and not force and now - self._bottom_at < 1.0:
            return
        self._bottom_at = now
        text = f"{self._provider_label()} · format {self.session.fmt if turn else self.session.fmt_choice}"
        pending = self.session.pending
        if turn is None or pending is None:
            text += " · idle: type an instruction below"
        else:
            hs = pending.hunks
            n_open = sum(1 for h in hs if h.state in OPEN)
            n_acc = sum(1 for h in hs if h.state == HunkState.ACCEPTED)
            n_rej = sum(1 for h in hs if h.state == HunkState.REJECTED)
            text += (f" · {turn.state} · {len(hs)} hunks: {n_open} open, {n_acc} accepted, "
                     f"{n_rej} rejected")
            refused = sum(1 for e in pending.errors if e.turn == pending.turn)
            if refused:
                text += f" · {refused} edit(s) refused"
        if text != self._status:
            self._status = text
            self.query_one("#status", Line).set(text)

    def _render_context(self) -> None:
        ctx = self.session.context
        prompt = self.query_one(PromptInput)
        hint = f"   @{prompt.completion}? Tab completes" if prompt.completion else ""
        shown = "  ".join(f"◆ {p}" for p in ctx) if ctx else "none yet: type @path or press c on a file"
        self.query_one("#context", Line).set(f"Context: {shown}{hint}")
        self.query_one(FileTree).set_badges(context=set(ctx))

    def _render_queue(self) -> None:
        view = self.query_one(QueueView)
        index = view.index
        view.clear()
        for msg in self.session.queue:
            view.append(ListItem(Static(f"⏳ {msg}")))
        view.display = bool(self.session.queue)
        self.query_one("#queue-title").display = bool(self.session.queue)
        if self.session.queue and index is not None:
            view.index = min(index, len(self.session.queue) - 1)

    # -- files, git, watching --------------------------------------------------------------
    async def _load_files(self) -> None:
        files, status = await asyncio.gather(asyncio.to_thread(repo.list_files, self.ws.root),
                                             asyncio.to_thread(repo.status, self.ws.root))
        self.files = files
        self.query_one(PromptInput).files = files
        tree = self.query_one(FileTree)
        tree.load(files)
        tree.set_badges(git=status, context=set(self.session.context))

    async def _watch(self) -> None:
        async for paths in watch.changes(self.ws.root, self._stop_watch):
            await self._on_disk_change(paths)

    async def _on_disk_change(self, paths: set[str]) -> None:
        status = await asyncio.to_thread(repo.status, self.ws.root)
        tree = self.query_one(FileTree)
        if any(p not in tree._by_path for p in paths) or any(
                not (self.ws.root / p).exists() for p in paths if p in tree._by_path):
            self.files = await asyncio.to_thread(repo.list_files, self.ws.root)
            self.query_one(PromptInput).files = self.files
            pending = self.session.pending
            tree.load(self.files + (list(pending.files) if pending else []))
        tree.set_badges(git=status)
        review, pending = self.session.review, self.session.pending
        if review is None or pending is None:
            return
        for p in paths & set(pending.files):
            fd = pending.files[p]
            expected, shift = review.expected(fd)
            touched = await asyncio.to_thread(Review.touched, self.ws, fd, expected)
            if review.apply_recheck(fd, touched, shift):
                self.notify(f"{p} changed on disk: hunks there are stale", severity="warning")

    # -- prompt ----------------------------------------------------------------------------
    def on_input_changed(self, event: Input.Changed) -> None:
        if isinstance(event.input, PromptInput):
            self._render_context()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            return
        event.input.value = ""
        self.send(text)

    def on_prompt_input_queue(self, event: PromptInput.Queue) -> None:
        text = event.text.strip()
        self.query_one(PromptInput).value = ""
        if self.session.streaming:
            self.session.enqueue(text)
            self._render_queue()
            self.notify(f"queued: {text}", timeout=2)
        else:
            self.send(text)

    def send(self, text: str) -> None:
        for raw in at_paths(text):
            self._add_context(raw, quiet=False)
        if not self.session.context and not self.session.streaming and self.session.pending is None:
            self.notify("No files in the context: the model sees only your message. "
                        "Add files with @path, or c in the tree.", severity="warning", timeout=6)
        try:
            self.session.start(text)
        except ContextError as exc:
            self.notify(str(exc), severity="error")
            return
        for path in self.session.context:
            self.run_worker(asyncio.to_thread(warm_lexer, path), group="warm")
        self._frame()

    def _add_context(self, raw: str, quiet: bool = True) -> None:
        try:
            self.session.add_context(raw)
        except ContextError as exc:
            if not quiet:
                self.notify(str(exc), severity="error")
        self._render_context()

    def on_file_tree_toggle_context(self, event: FileTree.ToggleContext) -> None:
        if event.path in self.session.context:
            self.session.remove_context(event.path)
            self._render_context()
        else:
            self._add_context(event.path, quiet=False)

    def on_tree_node_selected(self, event: FileTree.NodeSelected) -> None:
        path = event.node.data
        if path and not path.endswith("/"):
            self._select(path, None)

    def edit_queued(self, index: int) -> None:
        if 0 <= index < len(self.session.queue):
            text = self.session.queue.pop(index)
            prompt = self.query_one(PromptInput)
            prompt.value = text
            prompt.focus()
            self._render_queue()

    def drop_queued(self, index: int) -> None:
        if 0 <= index < len(self.session.queue):
            self.session.queue.pop(index)
            self._render_queue()

    # -- diff navigation -------------------------------------------------------------------
    def on_diff_view_leave_file(self, event: DiffView.LeaveFile) -> None:
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
            diff = self.query_one(DiffView)
            diff.select(None, edge="first" if event.step > 0 else "last")
            self.query_one(FileTree).reveal(paths[j])

    def on_diff_view_cursor_moved(self, event: DiffView.CursorMoved) -> None:
        self.follow = False
        if self._ui_ready and self.screen_stack:
            self.refresh_bindings()

    # -- review intents --------------------------------------------------------------------
    def _current(self):
        diff = self.query_one(DiffView)
        return diff, diff.hunk

    async def action_accept(self) -> None:
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
        await self._carry_out(plan)
        self._advance()

    def action_reject(self) -> None:
        diff, h = self._current()
        review = self.session.review
        if h is not None and review is not None and review.reject([h.id]).rejected:
            diff.line_mode = False
            self._frame()
            self._advance()

    async def action_accept_file(self) -> None:
        review = self.session.review
        if review is not None and self.selected in (self.session.pending.files if self.session.pending else {}):
            await self._carry_out(review.plan_file(self.selected))
            self._advance()

    def action_reject_file(self) -> None:
        review = self.session.review
        if review is not None and self.session.pending and self.selected in self.session.pending.files:
            review.reject_file(self.selected)
            self._frame()
            self._advance()

    async def action_accept_all(self) -> None:
        if self.session.review is not None:
            await self._carry_out(self.session.review.plan_all())

    def action_reject_all(self) -> None:
        if self.session.review is not None:
            self.session.review.reject_all()
            self._frame()

    async def _carry_out(self, plan: AcceptPlan) -> Outcome:
        review = self.session.review
        assert review is not None
        async with self._write_lock:  # one write at a time; the disk part runs in a thread
            out = await review.apply_async(plan)
        for msg in out.messages:
            self.notify(msg, severity="warning", timeout=6)
        if out.accepted:
            self.notify(f"accepted {len(out.accepted)} hunk(s) → {', '.join(out.written)}", timeout=2)
        self._frame()
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
        review = self.session.review
        if review is None:
            self.notify("nothing to undo in this session", timeout=3)
            return
        try:
            async with self._write_lock:
                label = await review.undo_async()
        except (UndoRefused, Busy, OSError) as exc:
            self.notify(str(exc), severity="error", timeout=8)
            return
        self.notify(f"undone: {label}", timeout=3)
        self._frame()

    async def action_edit_hunk(self) -> None:
        diff, h = self._current()
        if h is None or h.state not in OPEN or self.session.review is None:
            return
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
        if editor and not self.is_headless:
            lines = self._edit_externally(editor, h)
            if lines is not None:
                await self._carry_out(self.session.review.plan_edited(h.id, lines))
                self._advance()
            return
        self.push_screen(HunkEditor(h, _language(h.path)), callback=self._edited(h.id))

    def _edit_externally(self, editor: str, h) -> list[str] | None:
        suffix = Path(h.path).suffix
        with tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False) as tmp:
            tmp.write("\n".join(h.new) + "\n")
        try:
            with self.suspend():
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
            if lines is not None and self.session.review is not None:
                await self._carry_out(self.session.review.plan_edited(hunk_id, lines))
                self._advance()
        return done

    # -- steering --------------------------------------------------------------------------
    def action_interrupt(self) -> None:
        if self.session.streaming:
            self.session.interrupt()
            self._frame()  # settle now, not on the next tick
        else:
            self.action_back()

    def action_back(self) -> None:
        diff = self.query_one(DiffView)
        if diff.line_mode:
            diff.line_mode = False
            diff.refresh()
            return
        prompt = self.query_one(PromptInput)
        if self.focused is prompt and not prompt.value:
            diff.focus()
        elif self.focused is not prompt:
            prompt.focus()

    # -- app -------------------------------------------------------------------------------
    def action_help(self) -> None:
        self.push_screen(HelpScreen(self._keys))

    def action_focus_prompt(self) -> None:
        self.query_one(PromptInput).focus()

    def action_focus_files(self) -> None:
        self.query_one(FileTree).focus()

    def action_focus_diff(self) -> None:
        self.query_one(DiffView).focus()

    def action_next_theme(self) -> None:
        names = self._theme_names
        self.theme = names[(names.index(self.theme) + 1) % len(names)] if self.theme in names else DEFAULT
        self.notify(f"theme: {self.theme}", timeout=2)

    def watch_theme(self, name: str) -> None:
        if self._ui_ready:
            remember_theme(name)
            self._apply_syntax()
            self.query_one(FileTree).relabel_all()

    def _apply_syntax(self) -> None:
        self.query_one(DiffView).set_syntax(self.theme_variables.get("syntax", "monokai"))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide review keys that would do nothing now, so the footer shows what matters."""
        if action in ("accept", "reject", "edit_hunk"):
            h = self.query_one(DiffView).hunk if self._ui_ready else None
            return h is not None and h.state in OPEN
        if action in ("accept_file", "reject_file", "accept_all"):
            pending = self.session.pending
            return pending is not None and any(h.state in OPEN for h in pending.hunks)
        if action == "interrupt":
            return self.session.streaming
        if action == "back":
            return not self.session.streaming
        if action == "undo":
            review = self.session.review
            return review is not None and review.can_undo
        return True

    def get_system_commands(self, screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        commands = [
            ("Accept hunk", "Write the hunk under the cursor", self.action_accept),
            ("Reject hunk", "Drop the hunk under the cursor", self.action_reject),
            ("Accept file", "Accept every open hunk of this file", self.action_accept_file),
            ("Reject file", "Reject every open hunk of this file", self.action_reject_file),
            ("Accept all", "Accept every open hunk", self.action_accept_all),
            ("Reject all", "Reject every open hunk", self.action_reject_all),
            ("Undo last accept", "Revert the last accept from the journal", self.action_undo),
            ("Interrupt", "Stop the model now", self.action_interrupt),
            ("Edit hunk", "Change the hunk before accepting it", self.action_edit_hunk),
            ("Line mode", "Pick single lines of the hunk", lambda: self.query_one(DiffView).action_line_mode()),
            ("Side-by-side", "Toggle unified / side-by-side", lambda: self.query_one(DiffView).action_side_by_side()),
            ("Keys", "Show every key", self.action_help),
            ("Focus prompt", "Go to the prompt", self.action_focus_prompt),
            ("Focus files", "Go to the file tree", self.action_focus_files),
            ("Focus diff", "Go to the diff", self.action_focus_diff),
            ("Clear queue", "Drop every queued follow-up", self._clear_queue),
        ]
        for title, help_text, cb in commands:
            yield SystemCommand(title, help_text, cb)
        for name in self._theme_names:
            yield SystemCommand(f"Theme: {name}", "Switch theme (remembered)",
                                lambda n=name: setattr(self, "theme", n))

    def _clear_queue(self) -> None:
        self.session.queue.clear()
        self._render_queue()

    def _key_names(self) -> dict[str, str]:
        """action id -> the key(s) bound now, for the help screen."""
        names: dict[str, str] = {"send": "enter", "command_palette": "ctrl+p"}
        for cls in (type(self), DiffView, FileTree, PromptInput, QueueView):
            for b in cls.BINDINGS:
                if isinstance(b, Binding) and b.id:
                    names[b.id] = b.key
        for action_id, key in (self.settings.keys or {}).items():
            names[action_id] = key
        return names

    async def on_unmount(self) -> None:
        self._ui_ready = False
        self._stop_watch.set()
        await self.session.aclose()


def _language(path: str) -> str | None:
    lang = fence_lang(path)
    return lang if lang in ("python", "javascript", "rust", "markdown", "json", "toml", "yaml", "bash",
                            "css", "html", "go", "java", "sql") else None
