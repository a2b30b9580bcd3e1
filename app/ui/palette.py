"""The command palette: one entry per action, each with the key that runs it.

Textual's own system commands would list a second "Keys" (its help panel, next to steer's
help), a second "Quit" and a "Theme" picker next to steer's themes, and none of them shows
a key. This provider replaces them: the actions of the table (app/ui/actions.py) that have a
palette title, with their keys as bound now, the themes, and the Textual commands steer has
no action for (maximize, screenshot). The entries come from the app (`palette_entries`),
which asks the screen what is available now.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content
from textual.markup import escape

TEXTUAL_TWINS = frozenset({"Keys", "Quit", "Theme"})  # steer's help, quit and theme entries


@dataclass(frozen=True, slots=True)
class Entry:
    title: str
    help: str
    run: Callable[[], object]
    key: str = ""  # as shown: "y", "Ctrl+T", "F1 / ?"; "" for none


def textual_extras(commands: Iterable) -> Iterable[Entry]:
    """Textual's system commands, less the ones steer has its own action for."""
    for c in commands:
        if c.title not in TEXTUAL_TWINS:
            yield Entry(c.title, c.help, c.callback)


class SteerCommands(Provider):
    def _entries(self) -> list[Entry]:
        return list(self.app.palette_entries(self.screen))  # type: ignore[attr-defined]  # SteerApp's

    @staticmethod
    def _line(title: Content, key: str, width: int) -> Content:
        if not key:
            return title
        pad = " " * max(2, width - title.cell_length)
        return Content.assemble(title, pad, Content.from_markup("[$accent bold]$key[/]", key=key))

    async def discover(self) -> Hits:
        entries = self._entries()
        width = max((len(e.title) for e in entries), default=0) + 3
        for e in entries:
            yield DiscoveryHit(self._line(Content(e.title), e.key, width), e.run, text=e.title,
                               help=escape(e.help))

    async def search(self, query: str) -> Hits:
        entries = self._entries()
        width = max((len(e.title) for e in entries), default=0) + 3
        matcher = self.matcher(query)
        for e in entries:
            score = matcher.match(e.title)
            if score > 0:
                yield Hit(score, self._line(matcher.highlight(e.title), e.key, width), e.run,
                          text=e.title, help=escape(e.help))
