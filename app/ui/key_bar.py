"""The bottom line: where keys go now, and the keys that do something there.

Textual's Footer recomposes a widget per key whenever the bindings change, which costs a
layout pass of the whole screen (30-50 ms here) on every focus change, every answer's start
and end, and every Esc. This bar is one line of text: a change repaints one row. Keys are
clickable, as in the Footer.
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.widget import Widget


class KeyBar(Widget):
    DEFAULT_CSS = """
    KeyBar { height: 1; width: 1fr; background: $panel; color: $text-muted; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.where = ""
        self._text = Text()
        self._spots: list[tuple[int, int, object, str]] = []  # x1, x2, namespace, action

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, lambda _screen: self.update())
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.update(force=True))
        self.update()

    def set_where(self, where: str) -> None:
        if where != self.where:
            self.where = where
            self.update()

    def update(self, force: bool = False) -> None:
        theme = self.app.current_theme
        key_style = f"bold {theme.accent or theme.primary}"
        text = Text(no_wrap=True, overflow="crop")
        spots = []
        if self.where:
            text.append(f" {self.where} ", f"bold reverse {theme.primary}")
            text.append(" ")
        shown: dict[str, tuple[str, object, object]] = {}  # action -> (key, node, binding)
        palette = None
        for key, (node, binding, enabled, _tooltip) in self.screen.active_bindings.items():
            if binding.action in ("app.command_palette", "command_palette"):
                palette = (key, node, binding)
                continue
            if not enabled or not binding.show:
                continue
            other = shown.get(binding.action)
            # one key per action: a letter reads better than its arrow or named twin
            if other is None or (len(key) == 1 < len(other[0])):
                shown[binding.action] = (key, node, binding)
        for action, (_key, node, binding) in shown.items():
            start = len(text)
            text.append(self.app.get_key_display(binding), key_style)
            text.append(f" {binding.description}  ")
            spots.append((start, len(text), node, action))
        if palette is not None:
            key, node, binding = palette
            start = len(text)
            text.append(self.app.get_key_display(binding), key_style)
            text.append(" palette")
            spots.append((start, len(text), node, binding.action))
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
