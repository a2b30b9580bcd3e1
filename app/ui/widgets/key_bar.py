"""The bottom line: where keys go now, and the keys that do something there.

Textual's Footer recomposes a widget per key whenever the bindings change, which costs a
layout pass of the whole screen (30-50 ms here) on every focus change, every answer's start
and end, and every Esc. This bar is one line of text: a change repaints one row. Keys are
clickable, as in the Footer.

On a narrow terminal the bar keeps what fits, dropping whole entries by the rank the action
table gives them (`bar`): Help and Quit always stay, so every other key can be found.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.dom import DOMNode
from textual.widget import Widget

from app.ui.actions import BY_ID
from app.view.status import clip

WHERE = {  # the bar's first word: where the next key goes (the screen's focus areas)
    "prompt": "✎ typing", "diff": "◆ reviewing", "tree": "▤ files", "queue": "⏳ queue",
    "conversation": "≡ conversation",  # (not ☰: Unicode 16 made it 2 cells, older terminals draw 1)
}


LABEL_MAX = 40  # a label the screen sets (a path in it) is cut here


class KeyBar(Widget):
    DEFAULT_CSS = """
    KeyBar { height: 1; width: 1fr; background: $panel; color: $text-muted; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.where = ""
        self.note = ""  # what waits elsewhere and its key ("3 hunks to review: Tab")
        self.also: frozenset[str] = frozenset()  # action ids shown though the table hides them
        self.labels: dict[str, str] = {}  # action id -> its label now ("Undo lines of #3")
        self._text = Text()
        self._spots: list[tuple[int, int, DOMNode, str]] = []  # x1, x2, namespace, action
        self._due = False  # an update is queued: the bindings changed since the last one

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed, immediate=True)
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.update(force=True))
        self.update()

    def _bindings_changed(self, _screen: object) -> None:
        """Several conditions that change in one go (a decision: the hunk, the file, undo)
        each refresh the bindings; the bar walks them once, after the handler that did it."""
        if not self._due:
            self._due = True
            self.call_next(self._update_due)

    def _update_due(self) -> None:
        self._due = False
        self.update()

    def on_resize(self) -> None:
        self.update()

    def set_where(self, area: str, note: str = "") -> None:
        """Where keys go (a key of WHERE), and what waits elsewhere, with its key (`note`)."""
        where = WHERE[area]
        if (where, note) != (self.where, self.note):
            self.where, self.note = where, note
            self.update()

    def set_also(self, ids: frozenset[str]) -> None:
        """Keys the screen wants listed now (the tree's toggle, while the tree is hidden)."""
        if ids != self.also:
            self.also = ids
            self.update()

    def set_label(self, action_id: str, label: str) -> None:
        """Say more than the table's label for an action, now ("" goes back to it)."""
        label = clip(label, LABEL_MAX)
        if self.labels.get(action_id, "") != label:
            self.labels[action_id] = label
            self.update()

    def update(self, force: bool = False) -> None:
        theme = self.app.current_theme
        key_style = f"bold {theme.accent or theme.primary}"
        shown: dict[str, tuple[str, DOMNode, Binding]] = {}  # action -> (key, node, binding)
        palette: tuple[str, DOMNode, Binding] | None = None
        for key, (node, binding, enabled, _tooltip) in self.screen.active_bindings.items():
            if binding.action in ("app.command_palette", "command_palette"):
                palette = (key, node, binding)
                continue
            if not enabled or not (binding.show or binding.id in self.also):
                continue
            other = shown.get(binding.action)
            # one key per action: a letter reads better than its arrow or named twin
            if other is None or (len(key) == 1 < len(other[0])):
                shown[binding.action] = (key, node, binding)
        entries = [_Entry(self.app.get_key_display(b), self.labels.get(b.id or "") or b.description,
                          node, action,
                          BY_ID[b.id].bar if b.id in BY_ID else 2)
                   for action, (_key, node, b) in shown.items()]
        if palette is not None:
            _key, node, b = palette
            entries.append(_Entry(self.app.get_key_display(b), "palette", node, b.action, 1))
        head = f" {self.where} " if self.where else ""
        note = f" {self.note} " if self.note else ""
        room = self.size.width - (cell_len(head) + 1 if head else 0) - (cell_len(note) + 1 if note else 0)
        entries = fit(entries, max(1, room) if self.size.width else 0)
        text = Text(no_wrap=True, overflow="crop")
        spots = []
        if head:
            text.append(head, f"bold reverse {theme.primary}")
            text.append(" ")
        if note:
            text.append(note, f"bold {theme.warning or key_style}")
            text.append(" ")
        for i, e in enumerate(entries):
            start = len(text)
            text.append(e.key, key_style)
            text.append(f" {e.label}" + ("  " if i < len(entries) - 1 else ""))
            spots.append((start, len(text), e.node, e.action))
        if force or text.plain != self._text.plain:
            self._text, self._spots = text, spots
            self.refresh()

    @property
    def plain(self) -> str:
        return self._text.plain

    def render(self) -> Text:
        return self._text

    async def on_click(self, event: events.Click) -> None:
        for x1, x2, node, action in self._spots:
            if x1 <= event.x < x2:
                await self.app.run_action(action, node)
                return


@dataclass(frozen=True, slots=True)
class _Entry:
    key: str
    label: str
    node: DOMNode
    action: str
    rank: int  # the action table's `bar`: 0 always stays, higher goes first


def fit(entries: list[_Entry], width: int) -> list[_Entry]:
    """The entries that fit in `width` cells, in their order: the highest rank goes first
    (the later of equals), rank 0 never. Width 0 (not laid out yet): all of them."""
    kept = list(entries)

    def used() -> int:
        return sum(cell_len(f"{e.key} {e.label}") for e in kept) + 2 * max(0, len(kept) - 1)

    while width > 0 and used() > width:
        droppable = [e for e in kept if e.rank > 0]
        if not droppable:
            break
        worst = max(e.rank for e in droppable)
        kept.remove([e for e in droppable if e.rank == worst][-1])
    return kept
