"""A file as it was when the request was made: the base every proposal is diffed against."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.core.text.locate import LineIndex
from app.core.text.textfile import TextFormat


@dataclass(eq=False)
class Snapshot:
    path: str  # relative to the workspace root, POSIX separators
    exists: bool
    lines: list[str] = field(default_factory=list)
    fmt: TextFormat = field(default_factory=TextFormat)
    digest: str | None = None  # sha256 of the bytes on disk, None when the file did not exist
    mode: int | None = None
    raw: bytes | None = None  # only when asked for (Workspace.snapshot(keep_raw=True))
    _index: LineIndex | None = None

    @property
    def index(self) -> LineIndex:
        if self._index is None:
            self._index = LineIndex(self.lines)
        return self._index

    def prepare(self) -> Snapshot:
        """Build the line index now (at request time) rather than inside the stream."""
        self.index.positions(0, "")
        return self
