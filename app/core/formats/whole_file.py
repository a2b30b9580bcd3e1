"""Whole files in a fenced block after their path — the format small models manage:

    path/to/file.py
    ```python
    the complete new content
    ```

A fence whose file name cannot be told (from the line before, or from the info string) is
an ordinary code block and stays part of the explanation.
"""

from __future__ import annotations

from app.core.formats.base import FENCE, StreamParser
from app.core.formats.events import EditBegin, EditEnd, Line, ParseEvent, Prose

OUTSIDE, FILE, CODE = range(3)


class WholeFileParser(StreamParser):
    name = "whole"

    def __init__(self, known_paths: frozenset[str] = frozenset()) -> None:
        super().__init__(known_paths)
        self.state = OUTSIDE
        self.fence = ""
        self.path = ""
        self.held: str | None = None  # the last prose line: maybe the next block's path

    def _closes(self, line: str) -> bool:
        stripped = line.strip()
        return stripped.startswith(self.fence) and stripped.strip(self.fence[0]) == "" and (
            len(stripped) >= len(self.fence))

    def _line(self, line: str, out: list[ParseEvent]) -> None:
        if self.state == FILE:
            if self._closes(line):
                out.append(EditEnd())
                self.state = OUTSIDE
            else:
                out.append(Line("+", line))
            return
        if self.state == CODE:
            out.append(Prose(line))
            if self._closes(line):
                self.state = OUTSIDE
            return
        m = FENCE.match(line.strip())
        if m is None:
            if self.held is not None:
                out.append(Prose(self.held))
            self.held = line
            return
        self.fence = m["fence"]
        path = self.looks_like_path(self.held) if self.held is not None else None
        if path is None:
            path = next((p for w in reversed(m["info"].split()) if (p := self.looks_like_path(w))), None)
        elif self.held is not None:
            self.held = None  # the path line belongs to the block, not to the explanation
        if self.held is not None:
            out.append(Prose(self.held))
            self.held = None
        if path is None:
            out.append(Prose(line))
            self.state = CODE
        else:
            out.append(EditBegin(path, "whole"))
            self.path = path
            self.state = FILE

    def _end(self, out: list[ParseEvent], complete: bool) -> None:
        if self.state == FILE:
            why = "the answer stopped" if not complete else "the answer ended"
            out.append(EditEnd(False, f"{why} inside the code block for {self.path}"))
        if self.held is not None:
            out.append(Prose(self.held))
            self.held = None
        self.state = OUTSIDE
