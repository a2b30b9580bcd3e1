"""The inline hunk editor, used when neither $VISUAL nor $EDITOR is set: the hunk's new lines
in a TextArea (with the file's syntax where a grammar is installed); Ctrl+S accepts what is
written, Esc cancels. For a conflict it edits the merge: it starts from the proposal, the
user's lines on disk are shown above it, and Ctrl+S writes what the user settled on over
them. The title's path is outside text, shown through the boundary."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

from textual import getters
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, TextArea

from app.core.conversation.prompts import fence_lang
from app.core.edits.hunks import Hunk, HunkState
from app.view.outside_text import to_text

LANGUAGES = ("python", "javascript", "rust", "markdown", "json", "toml", "yaml", "bash", "css",
             "html", "go", "java", "sql")  # TextArea's grammars


def language(path: str) -> str | None:
    """The TextArea language for a file, when it has one."""
    lang = fence_lang(path)
    return lang if lang in LANGUAGES else None


def _has_grammar(lang: str) -> bool:
    """Whether TextArea can load `lang`: it imports a `tree_sitter_<lang>` package (Textual's
    syntax extra, which steer does not install) and raises once mounted when there is none.
    The language pack's grammars are not offered to it: Textual's queries are written for
    other grammar versions, and a mismatched query can crash tree-sitter, not just fail."""
    return importlib.util.find_spec(f"tree_sitter_{lang}") is not None


class HunkEditor(ModalScreen[list[str] | None]):
    """Edit a hunk's new lines before accepting them. Ctrl+S accepts, Esc cancels."""

    BINDINGS = [Binding("ctrl+s", "save", "Accept edited", priority=True),
                Binding("escape", "cancel", "Cancel", priority=True)]

    area = getters.query_one("#editor-area", TextArea)

    def __init__(self, hunk: Hunk, check: Callable[[list[str]], str] | None = None) -> None:
        """`check`: why the file would no longer parse with these lines ("" when it would)."""
        super().__init__()
        self.hunk = hunk
        self.language = language(hunk.path)
        self.check = check
        self._warned: list[str] | None = None  # the text a first Ctrl+S said does not parse

    def compose(self) -> ComposeResult:
        h = self.hunk
        with Vertical(id="editor"):
            if h.state == HunkState.CONFLICT and h.ancestor is not None:
                yield Label(to_text(f"Merge conflict #{h.id} in {h.path}: edit the proposal into "
                                    "what you want — Ctrl+S writes it over your lines, Esc cancels",
                                    tabs=None), id="editor-title")
                yield Label("your lines on disk:" if h.old else "your lines on disk: (none)")
                for t in h.old[:8]:  # each line through the boundary (a newline is not text)
                    yield Label(to_text(f"  {t}", tabs=None), classes="editor-mine")
                if len(h.old) > 8:
                    yield Label(f"  … {len(h.old) - 8} more", classes="editor-mine")
            else:
                yield Label(to_text(f"Edit hunk #{h.id} in {h.path} — Ctrl+S accepts, Esc cancels",
                                    tabs=None), id="editor-title")
            area = TextArea("\n".join(h.new), id="editor-area", show_line_numbers=True)
            if self.language and _has_grammar(self.language):
                area.language = self.language
            yield area
            yield Label("", id="editor-warning")

    def action_save(self) -> None:
        """Ctrl+S: the edit is written; one that leaves the file unparsable is not, the
        first time: the dialog says why, and a second Ctrl+S on the same text writes it."""
        lines = self.area.text.split("\n")
        broken = self.check(lines) if self.check is not None else ""
        if broken and lines != self._warned:
            self._warned = lines
            warning = self.query_one("#editor-warning", Label)
            warning.update(to_text(f"⚠ {self.hunk.path} would no longer parse: {broken}. "
                                   "Nothing was written: fix it, or Ctrl+S again writes it "
                                   "as it is.", tabs=None))
            warning.add_class("-shown")
            return
        self.dismiss(lines)

    def action_cancel(self) -> None:
        self.dismiss(None)
