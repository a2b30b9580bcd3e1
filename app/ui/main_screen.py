"""The main screen: it composes the panes and routes their messages; nothing else.

Attributes down, messages up. Each pane owns its behaviour (app/ui/panes/); the screen names
them (typed getters), hands each frame's parts (a `Frame` from FrameSync, app/view/frames.py,
taken at Textual's refresh tick) and each message to the pane that acts on it, and holds the
core objects they share: the session and the LiveTree (git, the watcher, staging). Where keys
go is decided here only, and only by the user (DESIGN rule 8): a focus move is always the
answer to a key, a click or a palette entry, never to an answer starting or ending; when an
answer ends the key bar and the conversation say what waits and which key goes there.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable, Iterable
from functools import partial

from textual import getters, on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.events import DescendantFocus, Resize
from textual.reactive import var
from textual.widget import Widget
from textual.widgets import Header, Input

from app.core.conversation.session import Session
from app.core.git.live_tree import LiveTree
from app.core.provider import Provider
from app.core.variants.check import CheckResult, Checks, command_error, refusal
from app.core.variants.group import Variants, VariantsRefused, final_files
from app.ui import actions
from app.ui.availability import Availability
from app.ui.compat import FrameTickScreen, shutting_down
from app.ui.dialogs import rewind
from app.ui.dialogs.compare import CompareScreen
from app.ui.gc_policy import AnswerGC
from app.ui.messages import SessionChanged
from app.ui.panes.composer import Composer
from app.ui.panes.conversation import ConversationPane
from app.ui.panes.files import FilesPane
from app.ui.panes.review import ReviewPane
from app.ui.widgets.diff_view import DiffView
from app.ui.widgets.file_tree import FileTree
from app.ui.widgets.key_bar import KeyBar
from app.ui.widgets.line import Line
from app.ui.widgets.prompt import PromptInput
from app.ui.widgets.queue_view import QueueView
from app.ui.widgets.stream_view import StreamView
from app.view import variants as shown_variants
from app.view.frames import Frame, FrameSync
from app.view.outside_text import name
from app.view.status import Part, StatusLine, waiting_note
from app.view.welcome import Row as WelcomeRow

IDLE_TICK = 1 / 10  # the clock in the status line, when nothing else wakes the screen
GC_AFTER = 0.5
NARROW, MEDIUM = 100, 140  # columns: below NARROW the tree starts folded, panes slimmer below MEDIUM
# the back-ends a set of N variants asks: variant 1's when it is not the session's own
# (--variant-models names it), and the others'; raises ValueError with a reason
VariantBackends = Callable[[int], tuple[Provider | None, list[Provider]]]
AREAS = ((PromptInput, "prompt"), (DiffView, "diff"), (FileTree, "tree"), (QueueView, "queue"),
         (StreamView, "conversation"))  # where keys go, by the widget that has the focus


class MainScreen(FrameTickScreen):
    BINDINGS = actions.bindings("screen")

    focus_area: var[str] = var("prompt")  # where keys go now: prompt | diff | tree | queue
    narrow: var[bool] = var(False, toggle_class="-narrow")
    medium: var[bool] = var(False, toggle_class="-medium")

    files_pane = getters.query_one(FilesPane)
    review = getters.query_one(ReviewPane)
    conversation = getters.query_one(ConversationPane)
    composer = getters.query_one(Composer)
    status = getters.query_one("#status", Line)
    key_bar = getters.query_one(KeyBar)

    def __init__(self, variants: Variants, *, context: Iterable[str] = (), watch_files: bool = True,
                 blink: bool = True, welcome: list[WelcomeRow] | None = None,
                 keys: dict[str, str] | None = None, ask: VariantBackends | None = None,
                 check: tuple[str | None, float] = (None, 120.0)) -> None:
        super().__init__(id="main-screen")
        self.variants = variants
        session = variants.session
        self.ask = ask  # the back-ends a set of variants asks (the CLI builds them)
        self.check, self.check_timeout = check  # the command F3's sets are checked with (!)
        self.checks: dict[int, CheckResult] = {}  # this set's results, by variant
        self.default_variants = 1  # how many variants a new instruction is asked as
        self.welcome = welcome or []  # the conversation pane's first screen (no message yet)
        self.key_names = keys or actions.key_names()  # action id -> keys bound (the retry hint names one)
        self.sync = FrameSync(session)
        self.live = LiveTree(session.ws, lambda: variants.session.pending, session.write_lock)
        self.availability = Availability(variants, self.live)
        self._initial_context = list(context)
        self.watch_files = watch_files
        self.blink = blink  # snapshot tests turn the cursor blink off
        self.on_frame: Callable[[], object] | None = None  # called after each frame that changed something
        self._ready = False
        self.gc = AnswerGC()
        self.branch = ""
        self._tree_from: Widget | None = None  # what had the keys when Ctrl+T showed the tree
        self._bindings_state: tuple[object, ...] | None = None

    @property
    def session(self) -> Session:
        """The session on screen: the variant shown, or the only one."""
        return self.variants.session

    # -- layout ----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header(icon="◆")
        # Panes have a title line and no border: Textual draws a border on every repainted
        # line, which doubles the cost of the panes that repaint every frame.
        with Horizontal(id="main"):
            yield FilesPane(self.session.ws.root.name, self.live, follow_disk=self.watch_files,
                            id="left").data_bind(MainScreen.narrow)
            yield ReviewPane(self.variants, self.live, self.availability, id="center")
            yield ConversationPane(self.variants, self.welcome, id="side")
        yield Line(id="status")
        yield Composer(self.variants, self.key_names, blink=self.blink)
        yield KeyBar(id="keys")

    def on_mount(self) -> None:
        self._ready = True
        self.availability.review = self.review
        self.review.set_keys(self.key_names)
        self._render_header()
        self.composer.add_each(list(self._initial_context), self.composer.render_context)
        self.composer.focus()
        self.key_bar.set_where(self.focus_area)
        self._place_tree()
        self.session.on_data = self._wake
        self.variants.on_change = self._variants_changed
        self.composer.default_variants = self.default_variants
        self.composer.key_variants = self.default_variants if self.default_variants > 1 else 3
        self.sync.retry_hint = self.composer.retry_hint
        self.set_interval(IDLE_TICK, self.frame)
        self.frame(force_status=True)
        gc.freeze()  # what start-up built stays: keep it out of every later collection
        if self.session.provider.capabilities.warm_up:  # the model loads while you type
            self.run_worker(self.session.provider.warm(), group="warm")

    def on_unmount(self) -> None:
        self._ready = False
        self.availability.review = None

    def _render_header(self) -> None:
        branch = f" · {self.branch}" if self.branch else ""
        # the folder's and the branch's names are outside text too
        self.sub_title = name(f"{self.session.ws.root.name}{branch} · {self.session.provider.label}")

    # -- the frame -------------------------------------------------------------------------
    def _wake(self) -> None:
        """New text arrived: a screen update is coming (called once per frame at most)."""
        if self._ready:
            self.conversation.wake()

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
        session = self.session
        self.conversation.write(f.answer)
        if f.new_change_set is not None:
            self.review.new_change_set()
            self.files_pane.new_change_set()
        if f.dirty and session.pending is not None:
            self.files_pane.show_pending(session.pending, f, session.streaming)
            self.review.show_pending(session.pending, f.dirty)
        if f.started is not None:
            self.gc.streaming()
            self.review.answer_started()
            self.refresh_bindings()
            self._render_queue()
        for ended in f.ended:  # said, and nothing moves: the keys stay where the user put them
            if ended.turn is session.failed:  # before a word of it: nothing lost
                self.composer.request_failed(ended.turn)
            elif ended.failure:
                self.notify(ended.failure, title="The answer stopped", severity="error", timeout=8)
        if f.ended:
            self.refresh_bindings()
            self._render_queue()
        if f.ended and not session.streaming:
            self.review.answer_over()
            self.set_timer(GC_AFTER, partial(self.gc.settled, lambda: self.session.streaming))
        if f.permissions:  # said in the key bar; the user opens the question (rule 8)
            self._show_where()
        if f.title is not None:
            self.conversation.set_title(f.title)
        if f.status is not None:
            self.status.set(self._with_variant(f.status))
        if self.variants.active or f.status is not None:
            self._show_variants()
        if f.status is not None or f.started is not None or f.ended:
            self._show_where()  # what waits in the review changed, or whether it streams
        if f.changed and self.on_frame is not None:
            self.on_frame()

    @on(Composer.QueueChanged)
    def _render_queue(self) -> None:
        self.conversation.show_queue(self.session.queue, self.composer.editing is not None)

    # -- where keys go ---------------------------------------------------------------------
    def on_descendant_focus(self, event: DescendantFocus) -> None:
        area = next((a for cls, a in AREAS if isinstance(event.widget, cls)), None)
        if area is not None:
            self.focus_area = area

    def watch_focus_area(self) -> None:
        self._show_where()

    def _show_where(self) -> None:
        """The key bar says where keys go, what waits elsewhere with its key, and the keys
        that do something now."""
        if self._ready:
            self.refresh_bindings()
            key = partial(actions.key_of, self.key_names)
            self.key_bar.set_where(self.focus_area, waiting_note(
                self.session, self.focus_area == "prompt", bool(self.composer.prompt.value),
                key("answer_agent"), key("focus_diff")))

    def _to_review(self) -> None:
        self.review.enter()
        self.review.focus()

    def _back_to_work(self) -> None:
        self._to_review() if self.session.pending else self.composer.focus()

    def action_focus_prompt(self) -> None:
        self.composer.focus()

    @on(PromptInput.Review)  # Tab from an empty prompt
    def action_focus_diff(self) -> None:
        self._to_review()

    def action_focus_conversation(self) -> None:
        self.conversation.focus()

    def action_focus_queue(self) -> None:
        if self.session.queue:
            self.conversation.focus_queue()

    def action_focus_files(self) -> None:
        if not self.files_pane.shown:
            self.files_pane.wanted = True
            self._place_tree()
        self.files_pane.focus()

    def action_toggle_tree(self) -> None:
        """Show the tree and go to it, or hide it. Hiding it while it has the keys hands them
        back where they were when the toggle showed it (else where Esc from the tree would):
        the user's key moves them, never the app on its own."""
        if not self.files_pane.shown:
            self._tree_from = self.focused
            self.action_focus_files()
            return
        leaving, back, self._tree_from = self.focus_area == "tree", self._tree_from, None
        self.files_pane.wanted = False
        self._place_tree()
        if not leaving:
            return
        if back is not None and back.is_attached and not isinstance(back, FileTree):
            back.focus()
        else:
            self._back_to_work()

    def on_resize(self, event: Resize) -> None:
        width = event.size.width
        self.narrow, self.medium = width < NARROW, NARROW <= width < MEDIUM
        self._place_tree()

    @on(FilesPane.Folded)
    def _place_tree(self) -> None:
        """The tree folds away on a narrow terminal; the key bar lists its toggle meanwhile."""
        if self._ready:
            shown = self.files_pane.shown
            self.set_class(not shown, "-tree-hidden")
            self.key_bar.set_also(frozenset() if shown and not self.narrow else frozenset({"toggle_tree"}))

    # -- the panes' messages ---------------------------------------------------------------
    @on(SessionChanged)
    def _session_changed(self, event: SessionChanged) -> None:
        self.frame(force_status=event.force_status)
        self._show_where()

    @on(Input.Changed, "#prompt")
    def _prompt_changed(self) -> None:
        self._show_where()  # Tab goes to the review from an empty prompt only

    @on(DiffView.StartMessage)
    def _start_message(self, event: DiffView.StartMessage) -> None:
        self.composer.focus()
        self.composer.start_with(event.text)

    @on(StreamView.CardChosen)
    def _card_chosen(self, event: StreamView.CardChosen) -> None:
        if self.review.show_hunks(self.sync.card_hunks(event.key)):
            self._to_review()

    @on(QueueView.Edit)
    def _edit_queued(self, event: QueueView.Edit) -> None:
        if self.composer.edit_queued(event.index):
            self.composer.focus()

    @on(QueueView.Drop)
    def _drop_queued(self, event: QueueView.Drop) -> None:
        self.composer.drop_queued(event.index)

    @on(Composer.ContextChanged)
    def _context_changed(self, event: Composer.ContextChanged) -> None:
        self.files_pane.show_context(event.paths)

    @on(FileTree.ToggleContext)
    def _toggle_context(self, event: FileTree.ToggleContext) -> None:
        self.composer.toggle_context(event.path)

    @on(FilesPane.Chosen)
    def _file_chosen(self, event: FilesPane.Chosen) -> None:
        self.review.select(event.path, None)

    @on(ReviewPane.UndoChanged)
    def _undo_changed(self, event: ReviewPane.UndoChanged) -> None:
        self.key_bar.set_label("undo", f"Undo {name(event.label)}" if event.label else "")

    @on(ReviewPane.Reveal)
    def _reveal(self, event: ReviewPane.Reveal) -> None:
        self.files_pane.reveal(event.path)

    @on(FilesPane.Synced)
    def _synced(self, event: FilesPane.Synced) -> None:
        u = event.update
        self.files_pane.show_sync(u)
        if u.files is not None:
            self.composer.set_files(u.files)
        if u.branch is not None and u.branch != self.branch:
            self.branch = u.branch
            self._render_header()
        self.review.synced(u)
        self.frame(force_status=True)  # the rebased hunks, now

    # -- the screen's own keys -------------------------------------------------------------
    def action_interrupt(self) -> None:
        if self.composer.editing is not None:  # Esc leaves the edit first; the next one stops the model
            self.composer.finish_editing(None)
        elif self.focus_area == "queue":
            self.composer.focus()
        elif self.variants.interrupt():
            self.frame()  # settle now, not on the next tick

    def action_back(self) -> None:
        """Esc when nothing streams: step out of a mode, never between typing and reviewing
        (a review key must never land in the prompt by surprise, nor a letter in the diff)."""
        if self.composer.editing is not None:
            self.composer.finish_editing(None)
        elif not self.review.leave_line_mode() and self.focus_area in ("tree", "queue", "conversation"):
            self._back_to_work()

    def action_answer_agent(self) -> None:
        if self.conversation.answer_permission():
            self.refresh_bindings()

    def action_retry_request(self) -> None:
        self.composer.retry_failed()

    def action_clear_queue(self) -> None:
        self.composer.clear_queue()

    def action_toggle_raw(self) -> None:
        """Raw answer text (what the model sent) or the conversation with edit cards."""
        self.sync.mode = "raw" if self.sync.mode == "conversation" else "conversation"
        self.sync.restart()
        self.conversation.clear()
        self.frame(force_status=True)

    async def action_rewind(self) -> None:
        dialog = await rewind.offer(self.session, self.notify)
        if dialog is not None:
            self.app.push_screen(dialog, callback=self._rewind_chosen)

    async def _rewind_chosen(self, choice: rewind.RewindChoice | None) -> None:
        if choice is None:
            return
        if await rewind.carry_out(self.session, choice, self.notify):
            # the session was rebuilt: read it from the start, as a resumed one
            self.sync = FrameSync(self.session, mode=self.sync.mode)
            self.sync.retry_hint = self.composer.retry_hint
            self.conversation.clear()
            self.files_pane.reset()
            self.review.reset("Rewound.")
        self.frame(force_status=True)
        await self.review.check_undo()

    # -- variants (app/core/variants): asked at once, shown one at a time -----------------
    @on(Composer.AskVariants)
    def _ask_variants(self, event: Composer.AskVariants) -> None:
        if self.ask is None:
            self.notify("variants are not available here: steer was started without the "
                        "back-ends to ask them", severity="error")
            return
        try:
            first, siblings = self.ask(event.n)
            self.variants.ask(event.text, siblings, first)
        except (VariantsRefused, ValueError) as exc:
            self.notify(str(exc), title="No variants", severity="error", timeout=8)
            return
        self.checks = {}
        self.post_message(SessionChanged(force_status=False))

    def action_send_variants(self) -> None:
        if not self.composer.prompt.value.strip():
            self.notify("type the instruction first, then F3 sends it as variants", timeout=4)
            return
        self.composer.prompt.action_send_variants()

    def action_next_variant(self) -> None:
        self.variants.step(1)

    def action_prev_variant(self) -> None:
        self.variants.step(-1)

    def _variants_changed(self) -> None:
        """Another variant on screen, or the set began or ended: read it from its start."""
        if self.sync.session is not self.session:
            selected = self.review.selected
            self.sync = FrameSync(self.session, mode=self.sync.mode)
            self.sync.retry_hint = self.composer.retry_hint
            self.session.on_data = self._wake
            self.conversation.clear()
            self.files_pane.reset()
            self.review.reset("")
            pending = self.session.pending
            if selected and pending is not None and selected in pending.files:
                self.review.select(selected, None, manual=False)
        self.frame(force_status=True)
        self._show_where()

    def _with_variant(self, status: str) -> str:
        if not self.variants.active:
            return status
        parts = status.parts if isinstance(status, StatusLine) else (Part(status, 1),)
        return StatusLine([Part(shown_variants.where(self.variants), 0), *parts])

    def _show_variants(self) -> None:
        active = self.variants.active
        self.review.show_tabs(shown_variants.tabs(self.variants, self.checks) if active else "")
        self.conversation.show_variants("\n".join(
            shown_variants.card(v, i == self.variants.shown, self.checks.get(v.index))
            for i, v in enumerate(self.variants.items)) if active else "")

    def action_compare(self) -> None:
        hunk, path = self.review.diff.hunk, self.review.selected
        if hunk is None or path is None:
            self.notify("put the diff's cursor on a hunk to compare the variants there", timeout=4)
            return
        self.app.push_screen(CompareScreen(path, hunk.base_start, self.variants.region(path, hunk)))

    def action_check_variants(self) -> None:
        if not self.check:
            self.notify("no check command: start steer with --check CMD, or set check = \"...\" in "
                        "the config", severity="warning", timeout=8)
            return
        self.run_worker(self._run_checks(self.check), group="checks", exclusive=True)

    async def _run_checks(self, cmd: str) -> None:
        """The check on every variant that finished, each in a throwaway worktree."""
        done = [v for v in self.variants.items if v.session.turn is not None
                and v.session.turn.complete and v.session.pending is not None]
        root = self.session.ws.root
        why = command_error(cmd) or await asyncio.to_thread(refusal, root)
        if why or not done:
            self.notify(why or "no variant has finished yet", severity="warning", timeout=8)
            return
        self.notify(f"checking {len(done)} variant(s): {cmd}", timeout=3)
        checks = Checks(root, cmd, timeout=self.check_timeout)
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
        self.notify(f"check passed on variant {', '.join(passed)}" if passed else
                    "the check failed on every variant", timeout=6,
                    severity="information" if passed else "warning")
        self._show_variants()

    # -- availability (the action table's conditions: app/ui/availability.py) -------------
    def refresh_bindings(self) -> None:
        """Tell the key bar only when what is available changed (every call makes Textual
        walk the bindings; most would change nothing)."""
        ready = self._ready
        state = (self.focus_area, *self.availability.key(), ready and self.review.line_mode,
                 ready and self.composer.holds_paste)
        if state != self._bindings_state:
            self._bindings_state = state
            super().refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide keys that would do nothing now, so the key bar shows what matters."""
        return actions.available(action, self.availability)

    def palette_actions(self) -> Iterable[tuple[actions.Action, Callable[[], object]]]:
        """The palette's actions available now, each with what runs it."""
        runs: dict[str, Callable[[str], Awaitable[object]]] = {
            "screen": self.run_action, "app": self.app.run_action}
        for a in actions.palette(self.availability):
            target, _, action = a.run.rpartition(".")
            run = runs.get(target, self.review.run_action)  # the review's own keys
            yield a, partial(run, action)
