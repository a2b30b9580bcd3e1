"""The prompt: Enter sends (or redirects while the model streams), Tab queues a follow-up or
completes an `@path`, with fuzzy matching over the repository's files; Up and Down recall the
instructions sent in this session, as a shell does (Down past the newest: the draft).

A paste is kept whole (app/view/pastes.py): one with newlines, tabs, hidden characters or
over 1,000 characters shows as a token (`[pasted 20,000 chars · 312 lines]`) that the cursor
and Backspace treat as one character, F2 shows the text through the boundary for outside
text, and Enter sends it exactly where its token is. Textual's own Input keeps only a
paste's first line; a paste over the limit is refused whole, with a message."""

from __future__ import annotations

import re
from dataclasses import dataclass

from rich.cells import cell_len
from rich.highlighter import Highlighter
from rich.text import Text
from textual import events
from textual.message import Message
from textual.reactive import var
from textual.suggester import Suggester
from textual.widgets import Input
from textual.widgets.input import Selection

from app.ui import actions
from app.ui.actions import bindings
from app.ui.availability import Availability
from app.ui.compat import paste_text
from app.view.outside_text import ESCAPE_STYLE, has_hidden, one_for_one
from app.view.pastes import Paste, Pastes, TooLarge, collapses, normalized

AT_TOKEN = re.compile(r"(?:^|\s)@(\S*)$")


def fuzzy_score(query: str, path: str) -> float | None:
    """Higher is better; None when `query`'s characters do not all occur in order."""
    if not query:
        return None
    q, p = query.lower(), path.lower()
    pos, score, last = 0, 0.0, -2
    base_start = p.rfind("/") + 1
    for ch in q:
        i = p.find(ch, pos)
        if i < 0:
            return None
        score += 3 if i == last + 1 else 1  # runs of matching characters
        if i >= base_start:
            score += 1  # matches in the file name count more than in folders
        last, pos = i, i + 1
    if p[base_start:].startswith(q) or p.startswith(q):
        score += 5
    return score - len(p) * 0.01


def complete(query: str, files: list[str]) -> str | None:
    """The best @path match. A name holding hidden characters (a hostile name: ESC, bidi
    controls) is never offered: it cannot be typed, and shown raw it would reach the
    terminal; such a file is added with `c` in the tree."""
    best, best_score = None, None
    for f in files:
        if has_hidden(f):
            continue
        s = fuzzy_score(query, f)
        if s is not None and (best_score is None or s > best_score):
            best, best_score = f, s
    return best


class _PrefixSuggester(Suggester):
    """Ghost text when the best match extends what was typed."""

    def __init__(self, prompt: PromptInput) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.prompt = prompt

    async def get_suggestion(self, value: str) -> str | None:
        m = AT_TOKEN.search(value)
        if m is None or not m.group(1):
            return None
        best = complete(m.group(1), self.prompt.files)
        if best and best.startswith(m.group(1)) and best != m.group(1):
            return value + best[len(m.group(1)):]
        return None


class _Tokens(Highlighter):
    """Paste tokens drawn apart from typed text."""

    def __init__(self, prompt: PromptInput) -> None:
        self.prompt = prompt

    def highlight(self, text: Text) -> None:
        for start, end, _ in self.prompt.pastes.spans(text.plain):
            text.stylize("bold italic", start, end)


class PromptInput(Input):
    BINDINGS = bindings("prompt")
    # what lists the prompt's own keys (a change refreshes the key bar by itself)
    named: var[list[str]] = var(list, bindings=True)  # files the draft names (the composer sets it)
    holds_paste: var[bool] = var(False, bindings=True)  # the prompt shows a paste token (F2)

    @dataclass
    class Queue(Message):
        """Tab on a message: a follow-up for when the answer ends."""

        text: str

    @dataclass
    class SendVariants(Message):
        """The message, to be answered as several variants at once."""

        text: str

    @dataclass
    class Review(Message):
        """Tab in an empty prompt: the user wants to review (while it streams, too)."""

    @dataclass
    class DropNamed(Message):
        """The user takes the file the draft names (shown ◇ on the context line) out of
        the request it will send."""

        path: str

    @dataclass
    class ShowPaste(Message):
        """F2: the user wants to read a paste whole (the composer shows PasteView)."""

        paste: Paste

    def __init__(self, *, id: str | None = None, blink: bool = True) -> None:
        self.pastes = Pastes()  # the pastes of the message being written
        # never select the draft on focus: the next key would replace it
        super().__init__(placeholder="Ask for a change…  (@path adds a file, Enter sends, "
                         "Tab queues or reviews, Esc stops)", id=id, select_on_focus=False)
        self.cursor_blink = blink
        self.conditions = Availability(draft=self)  # what its keys' `when` reads: its own
        self.files: list[str] = []
        self.suggester = _PrefixSuggester(self)
        self.completion: str | None = None  # best @path match for the token being typed
        self.history: list[str] = []  # instructions sent, oldest first
        self._recall = 0  # the entry shown (len(history): the draft)
        self._draft: tuple[str, tuple[Paste, ...]] = ("", ())  # what was being typed when Up left it
        self.highlighter = _Tokens(self)
        # messages sent or queued: how they were shown (value with tokens, and the pastes)
        self._forms: dict[str, tuple[str, tuple[Paste, ...]]] = {}

    # what the field draws: a hidden character that got into the value anyway is drawn as
    # one dimmed mark of one cell (not its escape, which would move the cursor's cells)
    @property
    def _value(self) -> Text:
        if not has_hidden(self.value):
            return super()._value
        shown, marks = one_for_one(self.value)
        text = Text(shown, no_wrap=True, overflow="ignore", end="")
        if self.highlighter is not None:
            text = self.highlighter(text)
        for at in marks:
            text.stylize(ESCAPE_STYLE, at, at + 1)
        return text

    def _position_to_cell(self, position: int) -> int:
        head = self.value[:position]
        if not has_hidden(head):
            return super()._position_to_cell(position)
        return cell_len(one_for_one(head)[0].expandtabs(4))

    # -- the message ---------------------------------------------------------------------
    @property
    def message(self) -> str:
        """What Enter sends: the typed text (outer spaces trimmed) with each paste token
        replaced by its paste, exactly."""
        return self.pastes.expand(self.value.strip())

    def _sent(self) -> str:
        """The message, remembered with how it was shown (Up, a failed request put back)."""
        shown = self.value.strip()
        text = self.pastes.expand(shown)
        if text != shown:
            self._forms[text] = (shown, tuple(self.pastes.items))
        return text

    def mentions(self, text: str) -> list[str]:
        """The `@path` mentions of a message this prompt sent: only in what was typed."""
        shown, items = self._forms.get(text, (text, ()))
        return at_paths(Pastes(items).typed(shown))

    async def action_submit(self) -> None:
        self.post_message(self.Submitted(self, self._sent(), None))

    def action_send_variants(self) -> None:
        text = self._sent()
        if text:
            self.value = ""
            self.post_message(self.SendVariants(text))

    def on_focus(self) -> None:
        self.cursor_position = len(self.value)  # back to a draft: carry on where it ends

    def on_input_changed(self, event: Input.Changed) -> None:
        if not self.value:
            self.pastes = Pastes()  # sent or cleared: the next message starts afresh
        holds = bool(self.pastes.items) and bool(self.pastes.spans(self.value))
        self.holds_paste = holds  # the paste key is listed while there is a paste
        m = AT_TOKEN.search(self.value[: self.cursor_position])
        self.completion = complete(m.group(1), self.files) if m and m.group(1) else None

    # -- pastes --------------------------------------------------------------------------
    def _on_paste(self, event: events.Paste) -> None:
        """Keep the whole paste (Textual's Input keeps its first line only)."""
        event.stop()
        event.prevent_default()
        text = normalized(paste_text(event.text))
        if not text:
            return
        start, end = sorted(self.selection)
        if collapses(text):
            try:
                text = self.pastes.add(text, self.value[:start] + self.value[end:])
            except TooLarge as exc:  # refused whole, and said: the prompt keeps what it had
                self.notify(str(exc), title="Paste", severity="error", timeout=10)
                return
        self.replace(text, start, end)

    def replace(self, text: str, start: int, end: int) -> None:
        """A token goes whole: an edit that would cut into one takes all of it (text is
        never inserted inside one)."""
        for s, e, _ in self.pastes.spans(self.value):
            if start == end and s < start < e:
                start = end = e
            elif s < end and start < e:
                start, end = min(start, s), max(end, e)
        super().replace(text, start, end)

    def validate_selection(self, selection: Selection) -> Selection:
        """The cursor never rests inside a token: it steps over it."""
        start, end = super().validate_selection(selection)
        old = self.selection.end
        return Selection(self._outside(start, old), self._outside(end, old))

    def _outside(self, pos: int, old: int) -> int:
        for s, e, _ in self.pastes.spans(self.value):
            if s < pos < e:
                return e if old <= s else s if old >= e else (s if pos - s < e - pos else e)
        return pos

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "expand_paste":  # listed only while the prompt holds a paste
            return True if self.pastes.spans(self.value) else None
        # the table's `when` (drop_named: while the draft names a file), read from the prompt
        return True if actions.available(action, self.conditions) else None

    def action_drop_named(self) -> None:
        if self.named:
            self.post_message(self.DropNamed(self.named[-1]))

    def action_expand_paste(self) -> None:
        """Show the paste at (or before) the cursor whole; the last one otherwise."""
        spans = self.pastes.spans(self.value)
        if not spans:
            return
        at = self.cursor_position
        before = [p for s, e, p in spans if s <= at]
        self.post_message(self.ShowPaste(before[-1] if before else spans[0][2]))

    # -- history -------------------------------------------------------------------------
    def remember(self, text: str) -> None:
        """An instruction was sent: the newest entry (a repeat of the last is kept once);
        recalling starts again from the draft."""
        if text and (not self.history or self.history[-1] != text):
            self.history.append(text)
        self._recall, self._draft = len(self.history), ("", ())

    def put_back(self, text: str) -> bool:
        """Give a failed instruction back to type on, unless the user has a draft here
        (theirs is never overwritten: Up recalls the instruction instead)."""
        if self.value.strip():
            return False
        self._recall, self._draft = len(self.history), ("", ())
        self.show(text)
        return True

    def action_history_prev(self) -> None:
        """Up: the instruction sent before the one shown (identical ones skipped, so Up on a
        failed instruction put back goes to the one before it)."""
        i = self._recall
        if i == len(self.history):
            self._draft = (self.value, tuple(self.pastes.items))
        i -= 1
        while i >= 0 and self.history[i] == self.message:
            i -= 1
        if i >= 0:
            self._recall = i
            self.show(self.history[i])

    def action_history_next(self) -> None:
        """Down: the next newer instruction; past the newest, the draft as it was left."""
        if self._recall >= len(self.history):
            return
        self._recall += 1
        if self._recall < len(self.history):
            self.show(self.history[self._recall])
        else:
            self._set(*self._draft)

    def show(self, text: str) -> None:
        """Put a message in the prompt to edit: as it was shown when it was written (its
        pastes as tokens), or, for text that needs one, as one paste."""
        if text in self._forms:
            self._set(*self._forms[text])
        elif collapses(text) and text.strip():
            pastes = Pastes()
            self._set(pastes.add(text, ""), tuple(pastes.items))
        else:
            self._set(text, ())

    def _set(self, value: str, items: tuple[Paste, ...]) -> None:
        self.pastes = Pastes(items)
        self.value = value
        self.cursor_position = len(value)

    def action_tab(self) -> None:
        if self.completion is not None:
            m = AT_TOKEN.search(self.value[: self.cursor_position])
            if m is not None:
                head = self.value[: self.cursor_position - len(m.group(1))]
                tail = self.value[self.cursor_position :]
                self.value = f"{head}{self.completion} {tail.lstrip()}"
                self.cursor_position = len(head) + len(self.completion) + 1
                self.completion = None
                return
        if self.value.strip():
            self.post_message(self.Queue(self._sent()))
            return
        self.post_message(self.Review())


def at_paths(text: str) -> list[str]:
    """The `@path` mentions in a message."""
    return [m.group(1).rstrip(".,;:!?)") for m in re.finditer(r"(?:^|\s)@(\S+)", text)]
