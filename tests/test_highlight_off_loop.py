"""The diff pane's colours: pygments is only ever called from the highlight worker, never in
a frame (app/ui/widgets/highlight.py) — not even to find a file's lexer or the colours."""

from __future__ import annotations

import threading

from rich.style import Style

from app.ui.widgets import highlight
from app.ui.widgets.highlight import Highlighter


def _spy(monkeypatch) -> list[str]:
    """Which threads looked up a lexer or a theme."""
    seen: list[str] = []
    lexer, theme = highlight._lexer, highlight.syntax_theme

    def spy_lexer(path):
        seen.append(threading.current_thread().name)
        return lexer(path)

    def spy_theme(name):
        seen.append(threading.current_thread().name)
        return theme(name)

    monkeypatch.setattr(highlight, "_lexer", spy_lexer)
    monkeypatch.setattr(highlight, "syntax_theme", spy_theme)
    return seen


def _in_worker(h: Highlighter, texts: list[str]) -> None:
    t = threading.Thread(target=h.lex, args=(texts,), name="worker")
    t.start()
    t.join()


def test_a_frame_never_looks_up_a_lexer_or_a_theme(monkeypatch):
    seen = _spy(monkeypatch)
    h = Highlighter("big.py", "monokai")
    assert h.tokens("x = 1") is None  # not ready: drawn plain, lexed in the worker
    assert h.tokens("   ") == (("   ", Style()),)  # blank: nothing to colour
    assert seen == []
    _in_worker(h, ["x = 1"])
    assert seen and set(seen) == {"worker"}
    tokens = h.tokens("x = 1")
    assert tokens is not None and "".join(t for t, _ in tokens) == "x = 1"
    assert len({s for _, s in tokens}) > 1  # coloured: a name, an operator, a number


def test_a_file_without_a_lexer_is_plain_once_the_worker_looked(monkeypatch):
    seen = _spy(monkeypatch)
    h = Highlighter("notes.unknown-kind", "monokai")
    assert h.tokens("some text") is None and seen == []
    _in_worker(h, ["some text"])
    assert h.tokens("some text") == (("some text", Style()),)
    assert h.tokens("other text") == (("other text", Style()),)  # no lexer: never waits again
