"""The prompt: Enter sends (or redirects while the model streams), Tab queues a follow-up or
completes an `@path`, with fuzzy matching over the repository's files; Up and Down recall the
instructions sent in this session, as a shell does (Down past the newest: the draft)."""

from __future__ import annotations

import re
import time

from textual.message import Message
from textual.suggester import Suggester
from textual.widgets import Input

from app.ui.actions import bindings

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
    best, best_score = None, None
    for f in files:
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


class PromptInput(Input):
    BINDINGS = bindings("prompt")

    class Queue(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    class Review(Message):
        """Tab in an empty prompt: the user wants to review (while it streams, too)."""

    def __init__(self, *, id: str | None = None, blink: bool = True) -> None:
        # never select the draft on focus: the next key would replace it
        super().__init__(placeholder="Ask for a change…  (@path adds a file, Enter sends, "
                         "Tab queues or reviews, Esc stops)", id=id, select_on_focus=False)
        self.cursor_blink = blink
        self.files: list[str] = []
        self.suggester = _PrefixSuggester(self)
        self.completion: str | None = None  # best @path match for the token being typed
        self.typed_at = float("-inf")  # when the user last pressed a key here
        self.history: list[str] = []  # instructions sent, oldest first
        self._recall = 0  # the entry shown (len(history): the draft)
        self._draft = ""  # what was being typed when Up first left it

    def on_key(self, event) -> None:
        if event.is_printable or event.key in ("backspace", "delete"):
            self.typed_at = time.monotonic()  # writing, not Enter/Esc/Tab

    async def action_submit(self) -> None:
        self.typed_at = float("-inf")  # sent: what comes next is not the same sentence
        await super().action_submit()

    def on_focus(self) -> None:
        self.cursor_position = len(self.value)  # back to a draft: carry on where it ends

    def on_input_changed(self, event: Input.Changed) -> None:
        m = AT_TOKEN.search(self.value[: self.cursor_position])
        self.completion = complete(m.group(1), self.files) if m and m.group(1) else None

    # -- history -------------------------------------------------------------------------
    def remember(self, text: str) -> None:
        """An instruction was sent: the newest entry (a repeat of the last is kept once);
        recalling starts again from the draft."""
        if text and (not self.history or self.history[-1] != text):
            self.history.append(text)
        self._recall, self._draft = len(self.history), ""

    def put_back(self, text: str) -> bool:
        """Give a failed instruction back to type on, unless the user has a draft here
        (theirs is never overwritten: Up recalls the instruction instead)."""
        if self.value.strip():
            return False
        self._recall, self._draft = len(self.history), ""
        self._show(text)
        return True

    def action_history_prev(self) -> None:
        """Up: the instruction sent before the one shown (identical ones skipped, so Up on a
        failed instruction put back goes to the one before it)."""
        i = self._recall
        if i == len(self.history):
            self._draft = self.value
        i -= 1
        while i >= 0 and self.history[i] == self.value:
            i -= 1
        if i >= 0:
            self._recall = i
            self._show(self.history[i])

    def action_history_next(self) -> None:
        """Down: the next newer instruction; past the newest, the draft as it was left."""
        if self._recall >= len(self.history):
            return
        self._recall += 1
        self._show(self.history[self._recall] if self._recall < len(self.history) else self._draft)

    def _show(self, text: str) -> None:
        self.value = text
        self.cursor_position = len(text)

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
            self.post_message(self.Queue(self.value))
            return
        self.post_message(self.Review())


def at_paths(text: str) -> list[str]:
    """The `@path` mentions in a message."""
    return [m.group(1).rstrip(".,;:!?)") for m in re.finditer(r"(?:^|\s)@(\S+)", text)]
