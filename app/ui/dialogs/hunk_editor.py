"""The inline hunk editor, used when neither $VISUAL nor $EDITOR is set: the hunk's new lines
in a TextArea (with the file's syntax where a grammar is installed); Ctrl+S accepts what is
written, Esc cancels. The title's path is outside text, shown through the boundary."""

from __future__ import annotations

from importlib.util import find_spec

from textual import getters
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, TextArea

from app.core.conversation.prompts import fence_lang
from app.core.edits.hunks import Hunk
from app.view.outside_text import to_text

LANGUAGES = ("python", "javascript", "rust", "markdown", "json", "toml", "yaml", "bash", "css",
             "html", "go", "java", "sql")  # TextArea's grammars


def language(path: str) -> str | None:
    """The TextArea language for a file, when it has one."""
    lang = fence_lang(path)
    return lang if lang in LANGUAGES else None


class HunkEditor(ModalScreen[list[str] | None]):
    """Edit a hunk's new lines before accepting them. Ctrl+S accepts, Esc cancels."""

    BINDINGS = [Binding("ctrl+s", "save", "Accept edited", priority=True),
                Binding("escape", "cancel", "Cancel", priority=True)]

    area = getters.query_one("#editor-area", TextArea)

    def __init__(self, hunk: Hunk) -> None:
        super().__init__()
        self.hunk = hunk
        self.language = language(hunk.path)

    def compose(self) -> ComposeResult:
        with Vertical(id="editor"):
            yield Label(to_text(f"Edit hunk #{self.hunk.id} in {self.hunk.path} — Ctrl+S accepts, "
                                "Esc cancels", tabs=None), id="editor-title")
            area = TextArea("\n".join(self.hunk.new), id="editor-area", show_line_numbers=True)
            # tree-sitter without the file's grammar (tree_sitter_<name>) raises: plain text
            if self.language and find_spec(f"tree_sitter_{self.language}") is not None:
                area.language = self.language
            yield area

    def action_save(self) -> None:
        self.dismiss(self.area.text.split("\n"))

    def action_cancel(self) -> None:
        self.dismiss(None)
