"""The composer: the prompt and the context line above it, and everything a message goes
through before it is sent.

It owns: sending (Enter; while the model streams the session makes it a redirect), queueing
a follow-up (Tab), editing a queued message back in the prompt (Esc puts it back as it was),
the @path mentions that join the context first (a file the model's window cannot take whole
is never cut silently: the user picks its outline or nothing), `c` from the tree, the
context line (files, the next request's size, the @-completion hint), pastes shown whole
(F2), and the way back from a failed request (its instruction back in a free prompt, F5
sends it again). The prompt widget (app/ui/widgets/prompt.py) keeps history, pastes and
completion; the queue is drawn by the conversation pane, told by `QueueChanged`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Self

from textual import getters, on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input

from app.core.conversation import retries
from app.core.conversation.session import ContextError, Session
from app.core.conversation.turn import Turn
from app.core.variants.group import Variants
from app.ui import actions
from app.ui.compat import alive
from app.ui.dialogs.paste import PasteView
from app.ui.dialogs.questions import ChoiceScreen
from app.ui.messages import SessionChanged
from app.ui.widgets.highlight import warm_lexer
from app.ui.widgets.line import Line
from app.ui.widgets.prompt import PromptInput
from app.view.status import Part, StatusLine

MAP_TICK = 0.5  # seconds between looks at the map's build (the context line shows it)


class Composer(Vertical):
    DEFAULT_CSS = "Composer { height: auto; }"

    prompt = getters.query_one(PromptInput)
    context_line = getters.query_one("#context", Line)

    @dataclass
    class QueueChanged(Message):
        """The queue changed, or a queued message went into or out of the prompt."""

        editing: bool

    @dataclass
    class AskVariants(Message):
        """Send `text` as `n` variants (the screen holds the back-ends to ask)."""

        text: str
        n: int

    @dataclass
    class ContextChanged(Message):
        """The files in the model's context changed (the tree marks them)."""

        paths: set[str]

    def __init__(self, variants: Variants, key_names: dict[str, str], *, blink: bool = True,
                 id: str | None = None) -> None:
        super().__init__(id=id)
        self.variants = variants
        self.key_names = key_names  # action id -> keys bound now (the retry key is named)
        self.blink = blink  # snapshot tests turn the cursor blink off
        self.editing: tuple[int, str] | None = None  # a queued message back in the prompt
        # how many variants a new instruction is asked as (`steer --variants N`), and F3's
        self.default_variants = 1
        self.key_variants = 3
        self._context_shown: set[str] | None = None

    @property
    def session(self) -> Session:
        """The session on screen: the variant shown, or the only one (app/core/variants)."""
        return self.variants.session

    def compose(self) -> ComposeResult:
        yield Line(id="context")
        yield PromptInput(id="prompt", blink=self.blink)

    def on_mount(self) -> None:
        if self.session.provider.context_window is None:
            self.run_worker(self._probe_window(), group="probe")
        if self.session.knowledge is not None:  # the map's progress on the context line
            self._map_shown = ""
            self.set_interval(MAP_TICK, self._map_tick)

    def _map_tick(self) -> None:
        know = self.session.knowledge
        if know is not None and know.line() != self._map_shown:
            self.render_context()

    @on(PromptInput.DropNamed)
    def _drop_named(self, event: PromptInput.DropNamed) -> None:
        event.stop()
        if self.session.knowledge is not None:
            self.session.knowledge.drop(event.path)
            self.notify(f"{event.path} stays out of this request", timeout=3)
        self.render_context()

    def focus(self, scroll_visible: bool = True) -> Self:
        self.prompt.focus(scroll_visible)
        return self

    @property
    def holds_paste(self) -> bool:
        return self.prompt.holds_paste

    def set_files(self, files: list[str]) -> None:
        """The workspace's files (what @path completes)."""
        self.prompt.files = files

    def start_with(self, text: str) -> None:
        """A letter typed in the review starts a message here."""
        self.prompt.insert_text_at_cursor(text)

    async def _probe_window(self) -> None:
        """The server may say what the model's context window is (vLLM, llama-server...)."""
        window = await self.session.provider.probe_context_window()
        if window and alive(self):
            self.session.provider.context_window = window
            self.render_context()

    # -- the prompt's messages -------------------------------------------------------------
    @on(Input.Changed, "#prompt")
    def _prompt_changed(self) -> None:
        self.render_context()

    @on(Input.Submitted, "#prompt")
    def _prompt_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value  # trimmed by the prompt, pastes whole (their own spaces kept)
        if self.editing is not None:
            self.finish_editing(text)
            return
        if not text:
            return
        event.input.value = ""
        self.send(text)

    @on(PromptInput.Queue)
    def _queue(self, event: PromptInput.Queue) -> None:
        text = event.text
        if self.editing is not None:
            self.finish_editing(text)
            return
        self.prompt.value = ""
        if self.session.streaming:
            self.prompt.remember(text)
            self.session.enqueue(text)
            self._queue_changed()
            self.notify(f"queued: {text}", timeout=2)
        else:
            self.send(text)

    def send_variants(self) -> tuple[str, Literal["information"]] | None:
        """F3 from the palette: the typed instruction, as variants (nothing typed: say so)."""
        if not self.prompt.value.strip():
            return "type the instruction first, then F3 sends it as variants", "information"
        self.prompt.action_send_variants()
        return None

    @on(PromptInput.SendVariants)
    def _send_variants(self, event: PromptInput.SendVariants) -> None:
        if self.editing is not None:
            self.finish_editing(event.text)
            return
        self.send(event.text, self.key_variants)

    @on(PromptInput.ShowPaste)
    def _show_paste(self, event: PromptInput.ShowPaste) -> None:
        self.app.push_screen(PasteView(event.paste))

    # -- sending ---------------------------------------------------------------------------
    def send(self, text: str, variants: int = 0) -> None:
        """Send a message (as `variants` answers at once; 0: as many as a new instruction
        gets); its @paths join the context first (asking about any file the model's context
        window cannot take whole)."""
        prompt = self.prompt
        prompt.remember(text)  # Up recalls it
        new = [raw for raw in prompt.mentions(text) if self._known(raw) not in self.session.context]
        self.add_each(new, lambda: self._send(text, variants))

    def _send(self, text: str, variants: int = 0) -> None:
        session = self.session
        if not session.context and not session.streaming and session.pending is None:
            self.notify("No files in the context: the model sees only your message. "
                        "Add files with @path, or c in the tree.", severity="warning", timeout=6)
        going_on = self.variants.streaming or self.variants.open_hunks  # the set takes it
        n = variants or (1 if going_on else self.default_variants)
        if n > 1:
            self.post_message(self.AskVariants(text, n))
            return
        try:
            self.variants.start(text)
        except ContextError as exc:
            self.notify(str(exc), severity="error")
            return
        for path in session.context:
            self.run_worker(asyncio.to_thread(warm_lexer, path), group="warm")
        self.post_message(SessionChanged(force_status=False))

    def _known(self, raw: str) -> str | None:
        try:
            return self.session.ws.check_path(raw)
        except ValueError:
            return None

    # -- the context -----------------------------------------------------------------------
    def add_each(self, raws: list[str], then: Callable[[], None]) -> None:
        """Add files one by one (a question may come up for any of them), then go on."""
        if not raws:
            then()
            return
        self.add_context(raws[0], quiet=False, then=lambda: self.add_each(raws[1:], then))

    def add_context(self, raw: str, quiet: bool = True, then: Callable[[], None] | None = None) -> None:
        """Add a file to the context. One the model's window cannot take whole is not added
        silently nor cut: the user chooses its outline or nothing."""
        session = self.session
        rel = self._known(raw)
        budget = session.budget()
        size = session.files.tokens(rel, outline=False) if rel else 0
        if rel is None or rel in session.context or budget.fits(size):
            try:
                session.files.add(raw)
            except ContextError as exc:
                if not quiet:
                    self.notify(str(exc), severity="error")
            self.render_context()
            if then is not None:
                then()
            return
        room = max(0, (budget.room or 0) - budget.used)
        outline = session.files.tokens(rel, outline=True)

        def chosen(choice: str | None) -> None:
            if choice == "outline":
                session.files.add(rel, outline=True)
                self.notify(f"{rel}: its outline goes to the model (≈{outline:,} tokens)", timeout=4)
            else:
                self.notify(f"{rel} was not added to the context", timeout=4)
            self.render_context()
            if then is not None:
                then()

        self.app.push_screen(ChoiceScreen(
            f"{rel} is ≈{size:,} tokens: more than the ≈{room:,} the model's window has left.",
            "Nothing is cut silently. Send its outline (definitions with line numbers), "
            "or leave it out?",
            [("o", f"outline (≈{outline:,} tokens)", "outline"), ("n", "leave it out", "none")]),
            callback=chosen)

    def toggle_context(self, path: str) -> None:
        """`c` on a file in the tree: in or out of the context."""
        if path in self.session.context:
            self.session.files.remove(path)
            self.render_context()
        else:
            self.add_context(path, quiet=False)

    def render_context(self) -> None:
        session, prompt = self.session, self.prompt
        ctx = session.context
        hint = f"   @{prompt.completion}? Tab completes" if prompt.completion else ""
        shown = "  ".join(f"◆ {p}" + (" (outline)" if p in session.files.outlined else "")
                          for p in ctx) if ctx else "none yet: type @path or press c on a file"
        budget = session.budget(prompt.message).text()
        know = session.knowledge
        named = know.named(prompt.message, ctx) if know is not None and prompt.value else []
        if named:  # files the draft names come along (Ctrl+N drops the last)
            keys = actions.pretty_keys(self.key_names.get("drop_named", ""), first=True)
            shown = (shown + "  " if ctx else "") + "  ".join(
                f"◇ {p}" for p in named) + f" (named; {keys} drops)"
        prompt.named = named  # a reactive: the key bar hears of a change
        # a model without look-ups was shown the top-ranked files whole: which (the ranking
        # is too slow to redo per key, so it is the last request's, said as such)
        attached = [p for p in session.attached_now if p not in ctx and p not in named]
        if attached:
            shown = (shown + "  " if ctx or named else "") + "  ".join(
                f"◇ {p}" for p in attached) + " (attached to the last request: the model " \
                "cannot look files up)"
        parts = [Part(f"Context: {shown}", 0), Part(budget, 2)]
        rules = session.rules.sources([*ctx, *named]) if session.rules is not None else []
        if rules:  # what goes with every request (app/core/conversation/rules.py)
            parts.append(Part(f"Rules: {', '.join(rules)}", 3))
        if know is not None:
            self._map_shown = know.line()
            parts.append(Part(self._map_shown, 3))
        if hint:
            parts.insert(1, Part(hint.strip(), 1))
        # a narrow terminal drops whole parts (the map's state first), never half a word
        self.context_line.set(StatusLine(parts))
        if set(ctx) != self._context_shown:
            self._context_shown = set(ctx)
            self.post_message(self.ContextChanged(set(ctx)))

    # -- the queue -------------------------------------------------------------------------
    def _queue_changed(self) -> None:
        self.post_message(self.QueueChanged(self.editing is not None))

    def edit_queued(self, index: int) -> bool:
        """Back in the prompt to edit; saving puts it back in its place (Enter or Tab), Esc
        leaves it as it was. It is out of the queue meanwhile, so it is not sent half-edited."""
        queue = self.session.queue
        if not 0 <= index < len(queue) or self.editing is not None:
            return False
        text = queue.pop(index)
        self.editing = (index, text)
        self.prompt.show(text)
        self._queue_changed()
        return True

    def finish_editing(self, text: str | None) -> None:
        """Put the message back in its place: as edited (`text`; empty drops it), or as it
        was (None)."""
        assert self.editing is not None
        index, original = self.editing
        self.editing = None
        new = original if text is None else text
        if new:
            queue = self.session.queue
            queue.insert(min(index, len(queue)), new)
        self.prompt.value = ""
        self._queue_changed()

    def drop_queued(self, index: int) -> None:
        if 0 <= index < len(self.session.queue):
            self.session.queue.pop(index)
            self._queue_changed()

    def clear_queue(self) -> None:
        self.session.queue.clear()
        self._queue_changed()

    # -- a failed request ------------------------------------------------------------------
    @property
    def retry_key(self) -> str:
        """The retry key as bound now (the first one: "F5")."""
        keys = self.key_names.get("retry_request", "")
        return actions.pretty_keys(keys.split(",")[0]) if keys else "the palette's Retry"

    @property
    def retry_hint(self) -> str:
        """The line under a failed request in the conversation."""
        return f"{self.retry_key} sends it again"

    def request_failed(self, turn: Turn) -> None:
        """The answer ended before a word of it arrived: the instruction goes back into
        the prompt, if the prompt is free, and the user is told how to send it again."""
        back = self.editing is None and self.prompt.put_back(turn.instruction)
        where = ("your instruction is back in the prompt" if back else
                 "your draft is kept; ↑ in the prompt recalls the instruction")
        self.notify(f"{turn.error.message if turn.error else 'the request failed'}\n"
                    f"{self.retry_key} sends it again; {where}.",
                    title="The request failed", severity="error", timeout=10)

    def retry_failed(self) -> None:
        """Send the failed request again as a new request (exactly one)."""
        failed = self.session.failed
        if failed is None:
            return
        try:
            if retries.retry_failed(self.session) is None:
                return
        except ContextError as exc:  # a context file is gone or unreadable now
            self.notify(str(exc), severity="error")
            return
        if self.prompt.message.strip() == failed.instruction.strip():
            self.prompt.value = ""  # it was put back: it is on its way now, not a draft
        self.post_message(SessionChanged(force_status=False))
