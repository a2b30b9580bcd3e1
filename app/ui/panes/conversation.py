"""The conversation: the user's messages, the model's prose, one card per edit block, the
answer's live title, and under it the queued follow-ups.

The screen hands each frame's pieces down (`write`: the answer as FrameSync cut it, for the
conversation or the raw view) and the queue as it is; the pane draws them (app/ui/widgets/
stream_view.py draws at stream rate, queue_view.py the queue). A card chosen here goes up as
`StreamView.CardChosen` for the review to show; an agent's permission request is asked here
when the user opens it (the key bar says one waits), and answered to the agent.
"""

from __future__ import annotations

from typing import Self

from textual import getters
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from app.core.conversation.session import Session
from app.core.variants.group import Variants
from app.ui.compat import FrameTickScreen
from app.ui.dialogs.permission import PermissionScreen
from app.ui.messages import SessionChanged
from app.ui.widgets.line import Line
from app.ui.widgets.queue_view import QueueView
from app.ui.widgets.stream_view import StreamView
from app.view.frames import Piece
from app.view.outside_text import to_text
from app.view.welcome import Row as WelcomeRow


class ConversationPane(Vertical):
    stream = getters.query_one(StreamView)
    heading = getters.query_one("#stream-title", Line)
    queue = getters.query_one(QueueView)
    queue_heading = getters.query_one("#queue-title", Line)

    DEFAULT_CSS = """
    ConversationPane > #variant-cards { height: auto; max-height: 16; display: none;
                                        padding: 0 1; border-bottom: solid $primary 40%; }
    ConversationPane > #variant-cards.-shown { display: block; }
    """

    def __init__(self, variants: Variants, welcome: list[WelcomeRow], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.variants = variants
        self.welcome = welcome  # the first screen (no message yet)
        self._cards = ""

    @property
    def session(self) -> Session:
        """The session on screen: the variant shown, or the only one (app/core/variants)."""
        return self.variants.session

    def compose(self) -> ComposeResult:
        yield Line("Conversation", id="stream-title", classes="pane-title")
        yield Static(id="variant-cards")
        stream = StreamView(id="stream")
        stream.welcome = self.welcome
        yield stream
        yield Line("Queued follow-ups (Enter edits, Del drops)", id="queue-title", classes="pane-title")
        yield QueueView(id="queue")

    def focus(self, scroll_visible: bool = True) -> Self:
        self.stream.focus(scroll_visible)
        return self

    def focus_queue(self) -> None:
        self.queue.focus()

    def wake(self) -> None:
        """Make sure a screen update is coming; nothing is repainted for it (a repaint of
        the title here cost every frame a widget more to composite, at the pane's top)."""
        screen = self.screen
        if isinstance(screen, FrameTickScreen):
            screen.request_frame()
        else:
            self.heading.refresh()

    def write(self, pieces: list[Piece]) -> None:
        view = self.stream
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

    def show_variants(self, cards: str) -> None:
        """One card per variant over the answer shown ("" when there is no set)."""
        if cards == self._cards:
            return
        self._cards = cards
        box = self.query_one("#variant-cards", Static)
        box.set_class(bool(cards), "-shown")
        box.update(to_text(cards))

    def set_title(self, title: str) -> None:
        self.heading.set(title)

    def clear(self) -> None:
        self.stream.clear()

    def show_queue(self, queue: list[str], editing: bool) -> None:
        """The queued follow-ups; the title stays while one of them is in the prompt."""
        view, title = self.queue, self.queue_heading
        view.show(queue)
        # display is a layout change: only when it really changes
        if view.display != bool(queue):
            view.display = bool(queue)
        if title.display != (bool(queue) or editing):
            title.display = bool(queue) or editing

    def answer_permission(self) -> bool:
        """The user asked to answer the agent (the dialog never opens by itself: a letter
        meant for the prompt would answer it): its oldest open question."""
        agent = self.session.agent
        if not agent.permissions:
            return False
        req = agent.permissions[0]

        def answered(option: str | None) -> None:
            if req in agent.permissions:
                agent.answer(req, option)
            self.post_message(SessionChanged(force_status=False))

        self.app.push_screen(PermissionScreen(req), callback=answered)
        return True
