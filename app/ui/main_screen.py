"""The main screen: it composes the panes and routes their messages; nothing else.

Attributes down, messages up. Each pane owns its behaviour (app/ui/panes/); the screen names
them (typed getters), hands each frame's parts (a `Frame` from FrameSync, app/view/frames.py,
taken at Textual's refresh tick) and each message to the pane that acts on it, and holds the
core objects they share: the session shown (one variant of a set: app/core/variants) and the
LiveTree (git, the watcher, staging). Where keys go is decided by its base class only
(app/ui/keys_screen.py), and only by the user (DESIGN rule 8).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable
from functools import partial

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Header, Input

from app import launch_gc
from app.core.conversation.session import Session
from app.core.git.live_tree import LiveTree
from app.core.listeners import Listeners
from app.core.review.events import Arrived, Checked, Due
from app.core.variants.check import CheckCommand
from app.core.variants.group import SetChanged, Variants
from app.core.variants.proposal_check import ProposalCheck
from app.ui import actions
from app.ui.availability import Availability, CoreState
from app.ui.compat import shutting_down
from app.ui.dialogs import rewind
from app.ui.gc_policy import AnswerGC
from app.ui.keys_screen import KeysScreen
from app.ui.messages import SessionChanged
from app.ui.panes.composer import Composer
from app.ui.panes.conversation import ConversationPane
from app.ui.panes.files import FilesPane
from app.ui.panes.review import ReviewPane
from app.ui.variant_set import Said, VariantBackends, VariantSet
from app.ui.widgets.diff_view import DiffView
from app.ui.widgets.file_tree import FileTree
from app.ui.widgets.key_bar import KeyBar
from app.ui.widgets.line import Line
from app.ui.widgets.queue_view import QueueView
from app.ui.widgets.stream_view import StreamView
from app.view.frames import Frame, FrameSync
from app.view.outside_text import name
from app.view.welcome import Row as WelcomeRow

IDLE_TICK = 1 / 10  # the clock in the status line, when nothing else wakes the screen
GC_AFTER = 0.5


class MainScreen(KeysScreen):
    BINDINGS = actions.bindings("screen")

    def __init__(self, variants: Variants, *, context: Iterable[str] = (), watch_files: bool = True,
                 blink: bool = True, welcome: list[WelcomeRow] | None = None,
                 keys: dict[str, str] | None = None, ask: VariantBackends | None = None,
                 check: CheckCommand | None = None) -> None:
        super().__init__(id="main-screen")
        self.variants = variants
        session = variants.session
        check = check or CheckCommand()
        self.set = VariantSet(variants, ask, check)  # asking, checking, comparing variants
        self.default_variants = 1  # how many variants a new instruction is asked as
        self.welcome = welcome or []  # the conversation pane's first screen (no message yet)
        self.key_names = keys or actions.key_names()  # action id -> keys bound (the retry hint names one)
        self.sync = FrameSync(session)
        self.live = LiveTree(session.ws, lambda: variants.session.pending,
                             session.changes.write_lock, variants)
        # every finished proposal checked before any accept, when a check command is set
        # (app/core/variants/proposal_check.py); its verdict redraws the answer's title
        self.checker = ProposalCheck(session, check.cmd, timeout=check.timeout,
                                     sandbox=check.sandbox) if check.cmd else None
        if self.checker is not None:
            session.changes.subscribe(self._checked)
        self.core_state = CoreState(variants, self.live, self.checker)  # the conditions core owns
        self.availability = Availability(self.core_state)  # every condition; the panes' on mount
        self._initial_context = list(context)
        self.watch_files = watch_files
        self.blink = blink  # snapshot tests turn the cursor blink off
        self.painted: Listeners[None] = Listeners()  # told after each frame that changed something
        self._ready = False
        self.gc = AnswerGC()
        self.branch = ""
        self._tree_from: Widget | None = None  # what had the keys when Ctrl+T showed the tree
        self._available: tuple[bool, ...] | None = None  # core's conditions the key bar last saw
        self._leave: Callable[[], None] = lambda: None  # what stops hearing the variants

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
            yield ReviewPane(self.variants, self.live, self.core_state, id="center")
            yield ConversationPane(self.variants, self.welcome, id="side")
        yield Line(id="status")
        yield Composer(self.variants, self.key_names, blink=self.blink)
        yield KeyBar(id="keys")

    def on_mount(self) -> None:
        self._ready = True
        availability = self.availability
        availability.cursor, availability.review = self.review.diff, self.review
        availability.draft = self.composer.prompt
        self.review.set_keys(self.key_names)
        self._render_header()
        self.composer.add_each(list(self._initial_context), self.composer.render_context)
        self.composer.focus()
        self.key_bar.set_where(self.focus_area)
        self._place_tree()
        self._leave = self.variants.subscribe(self._heard)  # every variant's, once
        self.composer.default_variants = self.default_variants
        self.composer.key_variants = self.default_variants if self.default_variants > 1 else 3
        self.sync.retry_hint = self.composer.retry_hint
        self.set_interval(IDLE_TICK, self.frame)
        self.frame(force_status=True)
        gc.freeze()  # what start-up built stays: keep it out of every later collection
        launch_gc.launched()  # (and steer's launch kept the collector off until now)
        if self.session.provider.capabilities.warm_up:  # the model loads while you type
            self.run_worker(self.session.provider.warm(), group="warm")

    def on_unmount(self) -> None:
        self._ready = False
        self._leave()
        self.availability.cursor = self.availability.review = self.availability.draft = None

    def _render_header(self) -> None:
        branch = f" · {self.branch}" if self.branch else ""
        # the folder's and the branch's names are outside text too
        self.sub_title = name(f"{self.session.ws.root.name}{branch} · {self.session.provider.label}")

    # -- the frame -------------------------------------------------------------------------
    def _heard(self, ev: Arrived | Due | SetChanged) -> None:
        """New text arrived (a screen update is coming: once per frame at most), or another
        variant is on screen, or a set began or ended (app/core/variants/group.py)."""
        if type(ev) is Arrived:
            if self._ready:
                self.conversation.wake()
        elif type(ev) is SetChanged:
            self._variant_shown()

    def frame(self, force_status: bool = False) -> None:
        """Everything that arrived since the last frame, rendered once; then the key bar is
        told if what the keys can do changed (in the same paint)."""
        if not self._ready or shutting_down(self.app):
            return
        try:
            self._apply(self.sync.take(force_status))
            self.follow_availability()
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
        elif session.pending is not None and self.files_pane.badges_due(session.streaming):
            self.files_pane.show_pending(session.pending, f, session.streaming)  # held back
        if f.started is not None:
            self.gc.streaming()
            self.review.answer_started()
            self._render_queue()
        for ended in f.ended:  # said, and nothing moves: the keys stay where the user put them
            if ended.turn is session.failed:  # before a word of it: nothing lost
                self.composer.request_failed(ended.turn)
            elif ended.failure:
                self.notify(ended.failure, title="The answer stopped", severity="error", timeout=8)
        if f.ended:
            self._render_queue()
        if f.ended and not session.streaming:
            self.review.answer_over()
            self.set_timer(GC_AFTER, partial(self.gc.settled, lambda: self.session.streaming))
        if f.permissions:  # said in the key bar; the user opens the question (rule 8)
            self._show_where()
        if f.title is not None:
            self.conversation.set_title(f.title)
        if f.status is not None:
            self.status.set(self.set.status(f.status))
        if self.variants.active or f.status is not None:
            self._show_variants()
        if f.status is not None or f.started is not None or f.ended:
            self._show_where()  # what waits in the review changed, or whether it streams
        if f.changed:
            self.painted.publish(None)

    @on(Composer.QueueChanged)
    def _render_queue(self) -> None:
        self.conversation.show_queue(self.session.queue, self.composer.editing is not None)

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
        self.conversation.answer_permission()

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

    async def action_redo_rewind(self) -> None:
        await self._rewind_chosen(rewind.RewindChoice(-1, "redo"))

    async def _rewind_chosen(self, choice: rewind.RewindChoice | None) -> None:
        if choice is None:
            return
        if await rewind.carry_out(self.session, choice, self.notify):
            self._reread("Rewound.")  # the session was rebuilt: from the start, as a resumed one
        self.frame(force_status=True)
        await self.review.check_undo()

    def _reread(self, message: str = "", keep_file: bool = False) -> None:
        """Read the session on screen from its start: rebuilt by a rewind, or another variant
        shown (`keep_file`: the review stays on its file, if that variant has it)."""
        selected = self.review.selected if keep_file else None
        self.sync = FrameSync(self.session, mode=self.sync.mode)
        self.sync.retry_hint = self.composer.retry_hint
        self.conversation.clear()
        self.files_pane.reset()
        self.review.reset(message)
        if selected and self.session.pending is not None and selected in self.session.pending.files:
            self.review.select(selected, None, manual=False)

    # -- variants (app/ui/variant_set.py): asked at once, shown one at a time -------------
    @on(Composer.AskVariants)
    def _ask_variants(self, event: Composer.AskVariants) -> None:
        self._say(self.set.ask(event.text, event.n))
        self.post_message(SessionChanged(force_status=False))

    def action_send_variants(self) -> None:
        self._say(self.composer.send_variants())

    def action_next_variant(self) -> None:
        self.variants.step(1)

    def action_prev_variant(self) -> None:
        self.variants.step(-1)

    def action_compare(self) -> None:
        shown = self.set.compare(self.review.selected, self.review.diff.hunk)
        self.app.push_screen(shown) if isinstance(shown, ModalScreen) else self._say(shown)

    def action_check_variants(self) -> None:
        if not self.variants.active and self.checker is not None:  # one answer: its proposal
            self.notify(self.checker.recheck(), timeout=3)
            return

        async def check() -> None:
            self._say(await self.set.check(partial(self.notify, timeout=3)))
            self._show_variants()

        self.run_worker(check(), group="checks", exclusive=True)

    def action_send_failure(self) -> None:
        """F: the failing check's output to the model, as the next message; the fix's hunks
        replace the failing answer's open ones, as a redirect's do (Session.send_back)."""
        message = self.checker.failure() if self.checker is not None else None
        if message is None:
            self.notify("no failing check to send", timeout=3)
            return
        self.session.send_back(message)
        self.frame(force_status=True)

    def _checked(self, ev: object) -> None:
        if type(ev) is Checked and self._ready:
            self.frame(force_status=True)

    def _variant_shown(self) -> None:
        """Another variant on screen, or a set began or ended."""
        if self.sync.session is not self.session:
            self._reread(keep_file=True)
        self.frame(force_status=True)
        self._show_where()

    def _show_variants(self) -> None:
        self.review.show_tabs(self.set.tabs())
        self.conversation.show_variants(self.set.cards())

    def _say(self, said: Said | None) -> None:
        if said is not None:
            self.notify(said[0], severity=said[1], timeout=4 if said[1] == "information" else 8)
