"""Syntax colours for the diff pane: pygments lexers per file name, and a per-line cache
filled off the event loop (a frame never waits for pygments)."""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from pygments.lexers import get_lexer_for_filename
from pygments.util import ClassNotFound
from rich.style import Style
from rich.syntax import PygmentsSyntaxTheme


@lru_cache(maxsize=64)
def _lexer(path: str):
    try:
        return get_lexer_for_filename(path, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


@lru_cache(maxsize=16)
def syntax_theme(name: str) -> PygmentsSyntaxTheme:
    return PygmentsSyntaxTheme(name)


_UNKNOWN = object()  # the lexer is not looked up yet


class Highlighter:
    """Syntax colours per line, cached by the line's text (a line highlights the same
    wherever it appears). Lines are lexed one by one (~0.07 ms each, the same per line as
    in blocks) in a worker thread: a frame never waits for pygments, it draws a line plain
    until its colours are ready and redraws it then. The lexer and the colours are looked
    up in the worker too (a lexer's first use compiles its patterns, a style's imports its
    module: 20+ ms that used to land in the frame that first showed a file)."""

    def __init__(self, path: str, theme: str) -> None:
        self.path = path
        self.theme_name = theme
        self.lexer: Any = _UNKNOWN  # a pygments Lexer, None (none for this file), or _UNKNOWN
        self.cache: dict[str, tuple[tuple[str, Style], ...]] = {}
        self._styles: dict[object, Style] = {}

    def tokens(self, text: str) -> tuple[tuple[str, Style], ...] | None:
        """The colours of `text` if they are ready (never lexes)."""
        if self.lexer is None or not text.strip():
            return ((text, _PLAIN),)
        return self.cache.get(text)

    def lex(self, texts: Iterable[str]) -> None:
        """Lex and cache (in a worker thread)."""
        lexer = _lexer(self.path) if self.lexer is _UNKNOWN else self.lexer
        theme = syntax_theme(self.theme_name)
        if len(self.cache) > 50_000:
            self.cache.clear()
        for text in texts:
            if text in self.cache or lexer is None:
                continue
            out = []
            for ttype, value in lexer.get_tokens(text):
                value = value.replace("\n", "")
                if value:
                    style = self._styles.get(ttype)
                    if style is None:
                        style = self._styles[ttype] = Style(color=theme.get_style_for_token(ttype).color)
                    out.append((value, style))
            # pygments reads a bare CR as a line end: a line its tokens do not spell out
            # exactly is drawn plain, so every character of the file reaches the boundary
            exact = "".join(value for value, _ in out) == text
            self.cache[text] = tuple(out) if exact else ((text, _PLAIN),)
        self.lexer = lexer  # last: a frame that sees it set finds the lines lexed


_PLAIN = Style()


def warm_lexer(path: str, theme: str | None = None) -> None:
    """pygments compiles a lexer's patterns on first use (~0.3 s for Python): do it early,
    off the event loop, rather than in the frame that shows the first complete hunk (with
    `theme`, its colours too)."""
    lexer = _lexer(path)
    if lexer is not None:
        list(lexer.get_tokens("x = 1\n"))
    if theme is not None:
        syntax_theme(theme)
