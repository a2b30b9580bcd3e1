"""The file tree: the workspace's files (as git sees them), with badges.

Nodes are created lazily, when their folder is expanded, so a 50,000-file repository paints
at once. Badges: git status as `git status -s` colours it (the staged letter green, the
unstaged one in the warning colour: `M` staged, `M` modified, `MM` both; A/D/R/? / U for a
conflict), ●n pending hunks, ◆ in the model's context, + a file the proposal creates.

A file name is outside text (DESIGN rule 12): it is drawn through app/view/outside_text.py,
never parsed as markup (Tree would read a str label as markup: `[slug]` would vanish).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rich.text import Text
from textual.message import Message
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from app.ui.actions import bindings
from app.view.outside_text import to_text

# badge -> theme colour, so badges read well in light and high-contrast themes too
BADGE_COLOR = {"M": "warning", "A": "success", "+": "success", "D": "error", "R": "secondary",
               "?": "secondary", "U": "error", "staged": "success", "pending": "accent",
               "context": "primary"}


class FileTree(Tree[str]):
    BINDINGS = bindings("tree")

    @dataclass
    class ToggleContext(Message):
        """c on a file: in or out of the model's context (the composer does it)."""

        path: str

    def __init__(self, name: str, *, id: str | None = None) -> None:
        super().__init__(to_text(name, tabs=None), data="", id=id)
        self.show_root = False
        self.guide_depth = 2
        self._dirs: dict[str, tuple[list[str], list[str]]] = {"": ([], [])}
        self._by_path: dict[str, TreeNode[str]] = {"": self.root}
        self._filled: set[str] = set()
        self.git: dict[str, tuple[str, str]] = {}  # path -> (staged letter, unstaged letter)
        self.pending: dict[str, int] = {}
        self.created: set[str] = set()
        self.context: set[str] = set()

    # -- structure -------------------------------------------------------------------------
    @staticmethod
    def order(path: str) -> tuple[tuple[int, str], ...]:
        """A sort key that lists paths as the tree shows them: in each folder, its folders
        first, then its files, each by name."""
        parts = path.split("/")
        return (*((0, p) for p in parts[:-1]), (1, parts[-1]))

    def load(self, files: Iterable[str]) -> None:
        dirs: dict[str, tuple[list[str], list[str]]] = {"": ([], [])}
        for path in sorted(set(files)):
            parts = path.split("/")
            parent = ""
            for part in parts[:-1]:
                d = f"{parent}{part}/"
                if d not in dirs:
                    dirs[d] = ([], [])
                    dirs[parent][0].append(d)
                parent = d
            dirs[parent][1].append(path)
        if dirs == self._dirs:
            return
        self._dirs = dirs
        for d in sorted(self._filled, key=len):
            node = self._by_path.get(d)
            if node is not None:
                self._fill(d, node, refill=True)
        if "" not in self._filled:
            self._fill("", self.root)

    def _fill(self, d: str, node: TreeNode[str], refill: bool = False) -> None:
        subdirs, files = self._dirs.get(d, ([], []))
        if refill:
            existing = {c.data for c in node.children}
            if existing == set(subdirs) | set(files):
                return
            expanded = {p for p in self._filled if p.startswith(d) and p != d}
            node.remove_children()
            self._filled -= expanded
        for sub in subdirs:
            child = node.add(self._label(sub), data=sub, allow_expand=True)
            self._by_path[sub] = child
        for f in files:
            self._by_path[f] = node.add_leaf(self._label(f), data=f)
        self._filled.add(d)

    def on_tree_node_expanded(self, event: Tree.NodeExpanded[str]) -> None:
        d = event.node.data
        if d and d.endswith("/") and d not in self._filled:
            self._fill(d, event.node)

    def has(self, path: str) -> bool:
        """The tree shows `path` (or will, once its folder is opened)."""
        if path in self._by_path:
            return True
        parent = path.rsplit("/", 1)[0] + "/" if "/" in path else ""
        return path in self._dirs.get(parent, ((), ()))[1]

    def reveal(self, path: str) -> None:
        """Expand the folders leading to `path` and put the cursor on it."""
        parent = ""
        for part in path.split("/")[:-1]:
            parent = f"{parent}{part}/"
            node = self._by_path.get(parent)
            if node is None:
                return
            if parent not in self._filled:
                self._fill(parent, node)
            node.expand()
        node = self._by_path.get(path)
        if node is not None:
            self.call_after_refresh(self.move_cursor, node)

    # -- badges ----------------------------------------------------------------------------
    def set_badges(self, *, git: dict[str, tuple[str, str]] | None = None,
                   pending: dict[str, int] | None = None,
                   created: set[str] | None = None, context: set[str] | None = None) -> None:
        changed: set[str] = set()
        new: Mapping[str, object] | set[str] | None
        for name, new in (("git", git), ("pending", pending), ("created", created), ("context", context)):
            if new is None:
                continue
            old = getattr(self, name)
            keys = set(old) | set(new)
            changed |= {k for k in keys if (k in old) != (k in new) or (
                isinstance(old, dict) and isinstance(new, dict) and old.get(k) != new.get(k))}
            setattr(self, name, new)
        # folders show that something inside them is pending: relabel each changed path's
        # folders too, once each (a status of 50,000 files shares a few hundred folders), and
        # only nodes the tree has built (folders load lazily; a new node gets its label then)
        todo: set[str] = set()
        for path in changed:
            todo.add(path)
            parent = path.rsplit("/", 1)[0] + "/" if "/" in path else ""
            while parent and parent not in todo:
                todo.add(parent)
                parent = parent[:-1].rsplit("/", 1)[0] + "/" if "/" in parent[:-1] else ""
        for path in todo:
            self._relabel(path)

    def _relabel(self, path: str) -> None:
        node = self._by_path.get(path)
        if node is not None:
            node.set_label(self._label(path))

    def process_label(self, label: str | Text) -> Text:
        """Labels are never markup: a str is shown as written (escapes and all)."""
        return to_text(label, tabs=None) if isinstance(label, str) else label

    def _label(self, path: str) -> Text:
        is_dir = path.endswith("/")
        name = path.rstrip("/").rsplit("/", 1)[-1] + ("/" if is_dir else "")
        text = Text()
        if is_dir:
            text.append(to_text(name, "bold", tabs=None))
            if any(p.startswith(path) for p in self.pending):
                text.append(" ●", self._color("pending", bold=True))
            return text
        staged, unstaged = ("+", "") if path in self.created else self.git.get(path, ("", ""))
        tone = "staged" if staged and not unstaged else (unstaged or staged)
        text.append(to_text(name, self._color(tone) if (staged or unstaged) else "", tabs=None))
        if staged or unstaged:
            text.append(" ")
            if staged:
                text.append(staged, self._color("+" if staged == "+" else "staged"))
            if unstaged:
                text.append(unstaged, self._color(unstaged))
        if self.pending.get(path):
            text.append(f" ●{self.pending[path]}", self._color("pending", bold=True))
        if path in self.context:
            text.append(" ◆", self._color("context", bold=True))
        return text

    def _color(self, badge: str, bold: bool = False) -> str:
        theme = self.app.current_theme
        color = getattr(theme, BADGE_COLOR.get(badge, "accent"), None) or theme.primary
        return f"bold {color}" if bold else color

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.relabel_all())

    def relabel_all(self) -> None:
        """After a theme change: badges take the theme's colours."""
        for path in list(self._by_path):
            if path:
                self._relabel(path)

    def label(self, path: str) -> str:
        """The plain text of `path`'s label, badges included."""
        return self._label(path).plain

    def action_toggle_context(self) -> None:
        node = self.cursor_node
        if node is not None and node.data and not node.data.endswith("/"):
            self.post_message(self.ToggleContext(node.data))
