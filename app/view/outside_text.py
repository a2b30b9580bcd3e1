"""The one boundary where outside text becomes screen text (DESIGN rule 12).

File names, file contents, model prose and agent messages come from people and programs
the user does not control. Passed raw to a terminal, an ESC in them sets the window title,
colours the screen, clears it, or (OSC 52) writes the clipboard; a bidi override makes code
read differently from what it does; a bracket read as Textual markup loses text, crashes
the app, or runs an `@click` action. So every view shows outside text through here:

- each hidden character (app/core/invisible.py: C0 and C1 controls, DEL, bidi controls,
  zero-width characters and separators) becomes one visible escape in a single notation,
  the backslash form a programmer reads (`\\x1b`, `\\u202e`), drawn dimmed;
- tabs expand to spaces (content) or show as `\\t` (a name, where a tab is itself suspect);
- variation selectors (U+FE0E/FE0F) are dropped from display: they only pick the text or
  emoji form of the character before them, and terminals disagree on that form's width,
  which would leave stray cells;
- nothing here is ever read as markup: the result is a plain string or a `rich.text.Text`
  built by appending runs, never parsed.

Clean text (nearly all of it) costs one regex search.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import TextIO

from rich.style import Style
from rich.text import Text

from app.core.invisible import CLASS

ESCAPE_STYLE = Style(dim=True, italic=True)
_SELECTORS = "\ufe0e\ufe0f"
_ANY = re.compile(f"[{CLASS}\t{_SELECTORS}]")
_HIDDEN_OR_SELECTOR = re.compile(f"[{CLASS}{_SELECTORS}]")


def escape(ch: str) -> str:
    """The visible form of one hidden character: `\\x1b`, `\\u202e`."""
    cp = ord(ch)
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}"


def pieces(text: str, *, tabs: int | None = 4) -> Iterator[tuple[str, bool]]:
    """(run, is_escape) pieces of `text` as shown. `tabs`: expand a tab to the next multiple
    of this many columns (counted from the start of `text`), or None to show it as `\\t`.
    Newlines pass through (callers split lines first)."""
    if not _ANY.search(text):
        yield text, False
        return
    col = 0
    pos = 0
    for m in _ANY.finditer(text):
        ch = m.group()
        if m.start() > pos:
            run = text[pos:m.start()]
            yield run, False
            col += len(run)  # (for tab stops: a column count good enough for code)
        pos = m.end()
        if ch == "\t" and tabs:
            n = tabs - col % tabs
            yield " " * n, False
            col += n
        elif ch in _SELECTORS:
            continue
        else:
            e = "\\t" if ch == "\t" else escape(ch)
            yield e, True
            col += len(e)
    if pos < len(text):
        yield text[pos:], False


def visible(text: str, *, tabs: int | None = 4) -> str:
    """`text` as shown, as a plain string (for widths, plain outputs and widgets that take
    strings without markup)."""
    if not _ANY.search(text):
        return text
    return "".join(run for run, _ in pieces(text, tabs=tabs))


def has_hidden(text: str) -> bool:
    """Whether `text` holds anything this boundary changes (tabs aside)."""
    return _HIDDEN_OR_SELECTOR.search(text) is not None


def to_text(text: str, style: Style | str = "", *, tabs: int | None = 4,
            escape_style: Style = ESCAPE_STYLE) -> Text:
    """`text` as a rich Text: escapes dimmed, never parsed as markup (rich's own Text also
    keeps ESC; this does not). Multi-line text keeps its newlines."""
    out = Text(style=style, end="", no_wrap=False)
    for run, esc in pieces(text, tabs=tabs):
        out.append(run, escape_style if esc else None)
    return out


def name(text: str) -> str:
    """A file name, title or one-line label as shown: escapes, and a tab as `\\t`."""
    return visible(text, tabs=None)


def terminal(text: str, *, dim: bool = True) -> str:
    """Text for a real terminal (`steer run` on a tty): escapes shown, wrapped in SGR dim
    when `dim`; every escape sequence in the result is steer's own. Newlines and tabs stay."""
    if not _HIDDEN_OR_SELECTOR.search(text):
        return text

    def shown(m: re.Match[str]) -> str:
        ch = m.group()
        if ch in _SELECTORS:
            return ""
        e = escape(ch)
        return f"\x1b[2m{e}\x1b[22m" if dim else e

    return _HIDDEN_OR_SELECTOR.sub(shown, text)


def terminal_line(text: str, width: int, *, dim: bool = True) -> tuple[str, int]:
    """At most `width` columns of one line of `text` for a real terminal, as `terminal`
    writes it (an escape is never cut in half; tabs expanded): (the string, its columns)."""
    out: list[str] = []
    cols = 0
    for run, esc in pieces(text):
        room = width - cols
        if room <= 0 or (esc and len(run) > room):
            break
        if esc:
            out.append(f"\x1b[2m{run}\x1b[22m" if dim else run)
        else:
            run = run[:room]
            out.append(run)
        cols += len(run)
    return "".join(out), cols


class Shown(io.TextIOBase):
    """A terminal stream everything written to passes `terminal` on: the CLI's stdout and
    stderr when they are terminals, where its messages quote paths, file contents, servers'
    errors and agents' words. `raw` is the terminal underneath (for steer's own sequences)."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw

    def write(self, text: str) -> int:
        self.raw.write(terminal(text))
        return len(text)

    def flush(self) -> None:
        self.raw.flush()

    def isatty(self) -> bool:
        return self.raw.isatty()

    def fileno(self) -> int:
        return self.raw.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.raw.encoding

    def reconfigure(self, **kwargs) -> None:
        self.raw.reconfigure(**kwargs)  # type: ignore[attr-defined]


def underneath(stream: TextIO) -> TextIO:
    """The terminal under a Shown stream (or the stream itself)."""
    return stream.raw if isinstance(stream, Shown) else stream
