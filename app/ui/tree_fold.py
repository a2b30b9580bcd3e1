"""The file tree folds away on a narrow terminal, behind a toggle, instead of vanishing.

Below 100 columns the tree would leave the diff a sliver, so it starts hidden; Ctrl+T (the
action table's `toggle_tree`) shows it and goes to it, or hides it. While it is hidden, or
the terminal is narrow, the key bar lists the toggle, so the pane is always one key away. A
mixin of MainScreen (app/ui/main_screen.py), apart so that the router stays small.
"""

from __future__ import annotations

from textual.widget import Widget

from app.ui.file_tree import FileTree
from app.ui.key_bar import KeyBar

NARROW = 100  # columns: below this the tree starts folded (and the side pane is slimmer)
MEDIUM = 140


class TreeFold:
    """Needs the MainScreen's focus_area, session, _ready and its focus actions."""

    tree_wanted: bool | None = None  # the user's toggle; None: shown unless narrow
    _tree_from: Widget | None = None  # what had the keys when the toggle showed the tree

    def on_resize(self, event) -> None:
        width = event.size.width
        self.set_class(width < NARROW, "-narrow")
        self.set_class(NARROW <= width < MEDIUM, "-medium")
        self._place_tree()

    @property
    def tree_shown(self) -> bool:
        return self.tree_wanted if self.tree_wanted is not None else not self.has_class("-narrow")

    def _place_tree(self) -> None:
        shown = self.tree_shown
        self.set_class(not shown, "-tree-hidden")
        if self._ready:
            self.query_one(KeyBar).set_also(
                frozenset() if shown and not self.has_class("-narrow") else frozenset({"toggle_tree"}))

    def _want_tree(self, shown: bool) -> None:
        self.tree_wanted = shown
        self._place_tree()

    def action_toggle_tree(self) -> None:
        """Show the tree and go to it, or hide it. Hiding it while it has the keys hands them
        back where they were when the toggle showed it (else where Esc from the tree would):
        the user's key moves them, never the app on its own."""
        if not self.tree_shown:
            self._tree_from = self.focused
            self._want_tree(True)
            self.query_one(FileTree).focus()
            return
        leaving = self.focus_area == "tree"
        back, self._tree_from = self._tree_from, None
        self._want_tree(False)
        if not leaving:
            return
        if back is not None and back.is_attached and not isinstance(back, FileTree):
            back.focus()
        else:
            self.action_focus_diff() if self.session.pending else self.action_focus_prompt()

    def action_focus_files(self) -> None:
        if not self.tree_shown:
            self._want_tree(True)
        self.query_one(FileTree).focus()
