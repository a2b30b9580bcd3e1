"""The main screen's half that decides where keys go (DESIGN rule 8), and only by the user:
a focus move is always the answer to a key, a click or a palette entry, never to an answer
starting or ending. The key bar says where keys go and what waits elsewhere with its key;
the action table's conditions (app/ui/availability.py) say which keys do something now: the
widgets' own refresh the bindings as they change, and each frame compares core's.
The main screen (app/ui/main_screen.py) composes the panes and routes the rest."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from functools import partial

from textual import getters, on
from textual.events import DescendantFocus, Resize
from textual.reactive import var
from textual.widget import Widget

from app.core.conversation.session import Session
from app.ui import actions
from app.ui.availability import Availability, CoreState
from app.ui.compat import FrameTickScreen
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
from app.view.status import waiting_note

NARROW, MEDIUM = 100, 140  # columns: below NARROW the tree starts folded, panes slimmer below MEDIUM
AREAS = ((PromptInput, "prompt"), (DiffView, "diff"), (FileTree, "tree"), (QueueView, "queue"),
         (StreamView, "conversation"))  # where keys go, by the widget that has the focus


class KeysScreen(FrameTickScreen):
    focus_area: var[str] = var("prompt")  # where keys go now: prompt | diff | tree | queue
    narrow: var[bool] = var(False, toggle_class="-narrow")
    medium: var[bool] = var(False, toggle_class="-medium")

    files_pane = getters.query_one(FilesPane)
    review = getters.query_one(ReviewPane)
    conversation = getters.query_one(ConversationPane)
    composer = getters.query_one(Composer)
    status = getters.query_one("#status", Line)
    key_bar = getters.query_one(KeyBar)

    # what the main screen sets up
    _ready: bool
    key_names: dict[str, str]
    core_state: CoreState
    availability: Availability
    _tree_from: Widget | None
    _available: tuple[bool, ...] | None

    @property
    def session(self) -> Session:
        raise NotImplementedError

    # -- where keys go ---------------------------------------------------------------------
    def on_descendant_focus(self, event: DescendantFocus) -> None:
        area = next((a for cls, a in AREAS if isinstance(event.widget, cls)), None)
        if area is not None:
            self.focus_area = area

    def watch_focus_area(self) -> None:
        self._show_where()

    def _show_where(self) -> None:
        """The key bar says where keys go and what waits elsewhere, with its key (the keys
        that do something now follow on their own: `follow_availability`)."""
        if self._ready:
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
        """The tree folds away on a narrow terminal; the key bar lists its toggle meanwhile.
        Shown there on purpose (Ctrl+T), it takes the conversation's place, not the diff's:
        the diff keeps a width it can be read at, and the conversation is back when the tree
        folds again."""
        if self._ready:
            shown = self.files_pane.shown
            self.set_class(not shown, "-tree-hidden")
            self.set_class(shown and self.narrow, "-tree-crowds")
            self.key_bar.set_also(frozenset() if shown and not self.narrow else frozenset({"toggle_tree"}))

    # -- availability (the action table's conditions: app/ui/availability.py) -------------
    def follow_availability(self) -> None:
        """Called each frame: tell the key bar when a condition of the action table changed,
        whoever changed it (an answer, a decision, git opening, a worker). The widgets'
        conditions are reactives that refresh the bindings themselves; core is not reactive,
        so its conditions are compared here, every one of them (`actions.now`: the list
        is the protocol's), and the review reads again what core changed under its cursor.
        A frame that changed none costs no walk over the bindings."""
        self.review.reread()
        available = actions.now(self.core_state)
        if available != self._available:
            self._available = available
            self.refresh_bindings()

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
