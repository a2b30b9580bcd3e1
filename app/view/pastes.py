"""Pastes kept whole in a one-line prompt.

The prompt is one line; a paste is often many (a stack trace, a file, a log). Inserted as
text it lost everything after its first line, and a 20,000-character line is no way to see
what you are about to send. So a paste that holds a newline or a tab, runs over
`COLLAPSE_AT` characters, or holds characters a terminal would obey (app/core/text/invisible.py)
is kept aside and shown in the prompt as one token, `[pasted 20,000 chars · 312 lines]`,
which stands for it exactly: the message sent has the pasted text, byte for byte, where its
token is. Up to `LIMIT` characters a message (its pastes together) are kept; a paste that
would go past it is refused whole and said, never cut.

No Textual here: the prompt widget (app/ui/prompt.py) asks this where tokens are and what a
message holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.core.text.invisible import HIDDEN

LIMIT = 1_048_576  # characters in one message's pastes together (1 MiB of ASCII)
COLLAPSE_AT = 1_000  # a longer paste is shown as its token


class TooLarge(ValueError):
    """The paste would take the message past LIMIT; nothing of it was kept."""


@dataclass(frozen=True, slots=True)
class Paste:
    token: str
    text: str


def lines(text: str) -> int:
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def collapses(text: str) -> bool:
    """Whether a paste is shown as a token rather than as the text itself."""
    return (len(text) > COLLAPSE_AT or "\n" in text or "\t" in text or "\r" in text
            or HIDDEN.search(text) is not None)


def normalized(text: str) -> str:
    """A paste as the user copied it: terminals send a newline inside a paste as CR (a
    key press); CRLF line ends are kept."""
    return re.sub(r"\r(?!\n)", "\n", text)


class Pastes:
    """The pastes of the message being written, each known by its token."""

    def __init__(self, items: tuple[Paste, ...] = ()) -> None:
        self.items: list[Paste] = list(items)

    def add(self, text: str, value: str) -> str:
        """Keep `text` for the message whose prompt holds `value`; returns its token.
        Raises TooLarge (keeping nothing) past LIMIT."""
        kept = sum(len(p.text) for p in self.items if p.token in value)
        if kept + len(text) + len(value) > LIMIT:
            raise TooLarge(
                f"paste refused: {len(text):,} characters"
                + (f" (with the {kept:,} already pasted in this message)" if kept else "")
                + f" is over the prompt's limit of {LIMIT:,}; nothing of it was inserted. "
                "Put the text in a file and add it with @path")
        n = lines(text)
        base = f"pasted {len(text):,} chars · {n:,} line{'s' if n != 1 else ''}"
        token, k = f"[{base}]", 1
        while any(p.token == token for p in self.items) or token in value:
            k += 1
            token = f"[{base} #{k}]"
        self.items.append(Paste(token, text))
        return token

    def spans(self, value: str) -> list[tuple[int, int, Paste]]:
        """Where the tokens are in `value`, in order."""
        out = []
        for p in self.items:
            start = value.find(p.token)
            while start >= 0:
                out.append((start, start + len(p.token), p))
                start = value.find(p.token, start + len(p.token))
        return sorted(out, key=lambda s: s[0])

    def expand(self, value: str) -> str:
        """The message `value` stands for: each token replaced by its paste, exactly."""
        spans = self.spans(value)
        if not spans:
            return value
        out, pos = [], 0
        for start, end, p in spans:
            if start < pos:
                continue  # (overlapping tokens cannot come from the prompt; keep the first)
            out += [value[pos:start], p.text]
            pos = end
        out.append(value[pos:])
        return "".join(out)

    def typed(self, value: str) -> str:
        """What the user typed around the tokens (where `@path` mentions are read from:
        a pasted log is not a list of files to add)."""
        out, pos = [], 0
        for start, end, _ in self.spans(value):
            if start >= pos:
                out += [value[pos:start], " "]
                pos = end
        out.append(value[pos:])
        return "".join(out)

    def clear(self) -> None:
        self.items.clear()
