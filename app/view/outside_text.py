"""The one boundary where outside text becomes screen text (DESIGN rule 12).

File names, file contents, model prose and agent messages come from people and programs
the user does not control. Passed raw to a terminal, an ESC in them sets the window title,
colours the screen, clears it, or (OSC 52) writes the clipboard; a bidi override makes code
read differently from what it does; a bracket read as Textual markup loses text, crashes
the app, or runs an `@click` action. So every view shows outside text through here:

- each hidden character (app/core/text/invisible.py, by Unicode's properties: C0 and C1
  controls, DEL, format characters such as the bidi controls and zero-width characters,
  separators, and every default-ignorable code point, such as the Hangul fillers) becomes
  one visible escape in a single notation, the backslash form a programmer reads (`\\x1b`,
  `\\u202e`), drawn dimmed;
- tabs expand to spaces (content) or show as `\\t` (a name, where a tab is itself suspect,
  as is a newline: `\\n`);
- a lone surrogate (a file name that is not UTF-8, decoded with surrogateescape) cannot be
  written to a terminal at all: it shows as its escape too;
- on screen, so does a character whose width no one can promise: one this Python's Unicode
  tables do not assign (a terminal may draw it at 0, 1 or 2 cells, or drop it), one whose
  width Unicode 16 changed (trigrams, hexagrams, counting rods: 1 cell in older terminals,
  2 in newer ones), an emoji skin-tone modifier (one terminal joins it to the emoji,
  another draws it 2 cells wide), a tag character (invisible; it can carry a hidden
  message in ASCII's shape), and a combining mark that starts the text (it has nothing to
  sit on: a terminal drops it, or puts it on whatever cell is left of it): the layout
  counts the cells the terminal draws, so a full repaint changes no cell (`terminal`, for
  a stream with no layout, leaves them be);
- a presentation selector (U+FE0E/FE0F) after a visible non-ASCII character is dropped
  from display: it only picks the text or emoji form of the character before it, and
  terminals disagree on that form's width, which would leave stray cells; anywhere else it
  selects nothing and is hidden like the rest (invisible.py says why): its escape shows;
- nothing here is ever read as markup: the result is a plain string or a `rich.text.Text`
  built by appending runs, never parsed.

Clean text (nearly all of it) costs one regex search (and `str.isascii`).
"""

from __future__ import annotations

import io
import re
import unicodedata
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import TextIO

from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from app.core.text.invisible import CLASS, HIDDEN

ESCAPE_STYLE = Style(dim=True, italic=True)
_SELECTORS = "\ufe0e\ufe0f"
# what becomes an escape: hidden characters, surrogates, widths Unicode 16 changed, skin-tone
# modifiers, tags
_WIDTH_CHANGED = "\u2630-\u2637\u268a-\u268f\u4dc0-\u4dff\U0001d300-\U0001d356\U0001d360-\U0001d376"
_SHOWN = f"{CLASS}\ud800-\udfff{_WIDTH_CHANGED}\U0001f3fb-\U0001f3ff\U000e0000-\U000e007f"
_ANY = re.compile(f"[{_SHOWN}\t{_SELECTORS}]")
_ANY_IN_NAME = re.compile(f"[{_SHOWN}\t\n{_SELECTORS}]")
_HIDDEN_OR_SELECTOR = re.compile(f"[{CLASS}\ud800-\udfff{_SELECTORS}]")


def escape(ch: str) -> str:
    """The visible form of one hidden character: `\\x1b`, `\\u202e`, `\\U0001f3fd`."""
    cp = ord(ch)
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"


@lru_cache(maxsize=8192)
def _unassigned(ch: str) -> bool:
    return unicodedata.category(ch) == "Cn"


def _unsure(text: str) -> str:
    """The characters of `text` this Python's Unicode tables do not assign ("" for ASCII)."""
    if text.isascii():
        return ""
    return "".join(sorted({ch for ch in text if ch > "\x7f" and _unassigned(ch)}))


@lru_cache(maxsize=256)
def _with(pattern: str, extra: str) -> re.Pattern[str]:
    return re.compile(pattern[:-1] + re.escape(extra) + "]")


def _lone_mark(text: str) -> bool:
    """`text` starts with a combining mark: nothing for it to combine with."""
    return text[:1] > "\x7f" and unicodedata.category(text[0])[0] == "M"


def _stray(text: str, i: int, before: str = "") -> bool:
    """The presentation selector at `i` of `text` is hidden: it follows no visible non-ASCII
    character (invisible.py). `before`: the character drawn before `text`, if any."""
    if i or not before:
        return HIDDEN.match(text, i) is not None
    return HIDDEN.match(before[-1] + text[i], 1) is not None


def _finder(text: str, tabs: int | None) -> re.Pattern[str] | None:
    """What to escape (and expand) in `text`; None when it shows as itself."""
    base = _ANY if tabs else _ANY_IN_NAME
    extra = _unsure(text)
    if extra:
        return _with(base.pattern, extra)
    return base if base.search(text) else None


def pieces(text: str, *, tabs: int | None = 4, col: int = 0, first: bool = True,
           before: str = "") -> Iterator[tuple[str, bool]]:
    """(run, is_escape) pieces of `text` as shown. `tabs`: expand a tab to the next multiple
    of this many columns (counted from `col`, the column `text` starts at), or None for one
    line of a name: a tab shows as `\\t` and a newline as `\\n`. Otherwise newlines pass
    through (callers split lines first). `first`: `text` starts what is drawn (a combining
    mark there has nothing to sit on), not a run that follows another; `before`, the
    character of that run a presentation selector at the start would belong to."""
    found = _finder(text, tabs)
    lead = first and _lone_mark(text)
    if found is None and not lead:
        yield text, False
        return
    pos = 0
    if lead:
        e = escape(text[0])
        yield e, True
        col += len(e)
        pos = 1
    for m in found.finditer(text, pos) if found is not None else ():
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
        elif ch in _SELECTORS and not _stray(text, m.start(), before):
            continue
        else:
            e = "\\t" if ch == "\t" else "\\n" if ch == "\n" else escape(ch)
            yield e, True
            col += len(e)
    if pos < len(text):
        yield text[pos:], False


def visible(text: str, *, tabs: int | None = 4) -> str:
    """`text` as shown, as a plain string (for widths, plain outputs and widgets that take
    strings without markup)."""
    if tabs and "\n" in text:  # tab stops (and a mark that starts a line) per line
        return "\n".join(visible(line, tabs=tabs) for line in text.split("\n"))
    if _finder(text, tabs) is None and not _lone_mark(text):
        return text
    return "".join(run for run, _ in pieces(text, tabs=tabs))


def clean(text: str) -> bool:
    """`text` shows as itself in content (no escape, no tab, no selector): the one search a
    clean line costs."""
    return _ANY.search(text) is None and not _unsure(text) and not _lone_mark(text)


def has_hidden(text: str) -> bool:
    """Whether `text` holds anything this boundary changes (tabs aside)."""
    return _HIDDEN_OR_SELECTOR.search(text) is not None


def to_text(text: str, style: Style | str = "", *, tabs: int | None = 4,
            escape_style: Style = ESCAPE_STYLE) -> Text:
    """`text` as a rich Text: escapes dimmed, never parsed as markup (rich's own Text also
    keeps ESC; this does not). Multi-line text keeps its newlines."""
    out = Text(style=style, end="", no_wrap=False)
    lines = text.split("\n") if tabs and "\n" in text else (text,)  # tab stops per line
    for i, line in enumerate(lines):
        if i:
            out.append("\n")
        for run, esc in pieces(line, tabs=tabs):
            out.append(run, escape_style if esc else None)
    return out


def name(text: str) -> str:
    """A file name, title or one-line label as shown: escapes, a tab as `\\t`, a newline
    as `\\n`."""
    return visible(text, tabs=None)


def terminal(text: str, *, dim: bool = True) -> str:
    """Text for a real terminal (`steer run` on a tty): escapes shown, wrapped in SGR dim
    when `dim`; every escape sequence in the result is steer's own. Newlines and tabs stay."""
    if not _HIDDEN_OR_SELECTOR.search(text):
        return text

    def shown(m: re.Match[str]) -> str:
        ch = m.group()
        if ch in _SELECTORS and not _stray(m.string, m.start()):
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


class Over(io.TextIOBase):
    """A text stream that writes through to `raw` (a terminal, a pipe), changing what is
    written (subclasses' `write`) and nothing else: flush, isatty, fileno and encoding are
    the stream underneath's."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw

    def flush(self) -> None:
        self.raw.flush()

    def isatty(self) -> bool:
        return self.raw.isatty()

    def fileno(self) -> int:
        return self.raw.fileno()

    # typeshed declares TextIOBase.encoding a plain attribute; at run time it is a read-only
    # property, which this one overrides
    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.raw.encoding

    def reconfigure(self, *, errors: str | None = None) -> None:
        """As TextIOWrapper.reconfigure, on the stream underneath."""
        if not isinstance(self.raw, io.TextIOWrapper):
            raise AttributeError(f"{type(self.raw).__name__} has no reconfigure")
        self.raw.reconfigure(errors=errors)


class Shown(Over):
    """A terminal stream everything written to passes `terminal` on: the CLI's stdout and
    stderr when they are terminals, where its messages quote paths, file contents, servers'
    errors and agents' words. `raw` is the terminal underneath (for steer's own sequences)."""

    def write(self, text: str) -> int:
        self.raw.write(terminal(text))
        return len(text)


def underneath(stream: TextIO) -> TextIO:
    """The terminal under a Shown stream (or the stream itself)."""
    return stream.raw if isinstance(stream, Shown) else stream


def segments(runs: Iterable[tuple[str, Style | None]], *, tabs: int | None = 4,
             escape_style: Style = ESCAPE_STYLE) -> list[Segment]:
    """Styled runs of one line (a highlighted line's tokens) as rich Segments: each hidden
    character an escape in its run's style plus `escape_style`, tabs expanded by the column
    across runs (`tabs` None: one line of a name, as in `pieces`)."""
    out: list[Segment] = []
    col = 0
    before = ""
    for text, style in runs:
        for run, esc in pieces(text, tabs=tabs, col=col, first=col == 0, before=before):
            out.append(Segment(run, (style + escape_style if style else escape_style) if esc else style))
            col += len(run)
        before = text[-1:] or before
    return out


# Markdown: escapes go through the parser as look-alikes, one private-use character for each
# character of the escape, so the parser sees one word of the width drawn (a backslash would
# escape what follows, a raw control character would be eaten or break a line) and the
# rendered look-alikes turn back into the escape, dimmed, without moving a cell.
_PLAIN_CHARS = "\\xu0123456789abcdef"
_LOOKALIKES = "".join(chr(0xF8E0 + i) for i in range(len(_PLAIN_CHARS)))
_TO_LOOKALIKE = str.maketrans(_PLAIN_CHARS, _LOOKALIKES)
_FROM_LOOKALIKE = str.maketrans(_LOOKALIKES, _PLAIN_CHARS)
_LOOKALIKE = re.compile(f"[{_LOOKALIKES}]+")


def for_markdown(source: str, *, tabs: int = 4) -> tuple[str, bool]:
    """(source for the Markdown parser, whether `unmark` must run on what it renders).
    Clean text comes back as it is. Text that holds the look-alikes itself (private-use
    characters nobody types) is shown with its escapes undimmed instead."""
    if clean(source):
        return source, False
    if _LOOKALIKE.search(source):
        return "\n".join(visible(line, tabs=tabs) for line in source.split("\n")), False
    out = []
    for line in source.split("\n"):
        out.append("".join(run.translate(_TO_LOOKALIKE) if esc else run
                           for run, esc in pieces(line, tabs=tabs)))
    return "\n".join(out), True


def unmark(line: Iterable[Segment], escape_style: Style = ESCAPE_STYLE) -> list[Segment]:
    """A rendered line of `for_markdown`'s source with its look-alikes as dimmed escapes."""
    out: list[Segment] = []
    for seg in line:
        text, style = seg.text, seg.style
        if seg.control or not _LOOKALIKE.search(text):
            out.append(seg)
            continue
        dim = style + escape_style if style else escape_style
        pos = 0
        for m in _LOOKALIKE.finditer(text):
            if m.start() > pos:
                out.append(Segment(text[pos:m.start()], style))
            out.append(Segment(m.group().translate(_FROM_LOOKALIKE), dim))
            pos = m.end()
        if pos < len(text):
            out.append(Segment(text[pos:], style))
    return out


def one_for_one(text: str, mark: str = "\ufffd") -> tuple[str, list[int]]:
    """`text` with each hidden character (and variation selector) replaced by one `mark` of
    one cell, character for character, and where the marks are: for an editable field,
    whose cursor counts characters (an escape's several would move it)."""
    marks = [m.start() for m in _HIDDEN_OR_SELECTOR.finditer(text)]
    return _HIDDEN_OR_SELECTOR.sub(mark, text), marks
