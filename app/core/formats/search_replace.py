"""Search/replace blocks, as aider popularised them:

    path/to/file.py
    ```python
    <<<<<<< SEARCH
    old lines
    =======
    new lines
    >>>>>>> REPLACE
    ```

The file name is the line before the fence (or before the SEARCH marker); a block without
one reuses the previous block's file. An empty SEARCH creates the file (or appends to it).
"""

from __future__ import annotations

import re

from app.core.formats.base import FENCE, StreamParser
from app.core.formats.events import EditBegin, EditEnd, Line, Malformed, OldEnd, ParseEvent, Prose

SEARCH = re.compile(r"^\s*<{5,9} ?SEARCH\b.*$")
DIVIDER = re.compile(r"^\s*={5,9}\s*$")
REPLACE = re.compile(r"^\s*>{5,9} ?REPLACE\b.*$")

OUTSIDE, OLD, NEW, SKIP = range(4)
HOLD = 3  # prose lines held back: they may turn out to be a block's file name and fence


class SearchReplaceParser(StreamParser):
    name = "search_replace"

    def __init__(self, known_paths: frozenset[str] = frozenset()) -> None:
        super().__init__(known_paths)
        self.state = OUTSIDE
        self.held: list[str] = []
        self.last_path: str | None = None
        self.after_block = False

    def _line(self, line: str, out: list[ParseEvent]) -> None:
        state = self.state
        if state == OLD:
            if DIVIDER.match(line):
                out.append(OldEnd())
                self.state = NEW
            elif REPLACE.match(line) or SEARCH.match(line):
                out.append(EditEnd(False, "SEARCH block without a ======= divider"))
                self.state = OUTSIDE
                if SEARCH.match(line):
                    self._line(line, out)
            else:
                out.append(Line("-", line))
            return
        if state == NEW:
            if REPLACE.match(line):
                out.append(EditEnd())
                self.state = OUTSIDE
                self.after_block = True
            elif SEARCH.match(line):
                out.append(EditEnd(False, "block without >>>>>>> REPLACE"))
                self.state = OUTSIDE
                self._line(line, out)
            else:
                out.append(Line("+", line))
            return
        if state == SKIP:  # a block we could not attribute to a file: swallow it
            if REPLACE.match(line):
                self.state = OUTSIDE
                self.after_block = True
            return
        # OUTSIDE
        if SEARCH.match(line):
            self._begin_block(out)
            return
        if self.after_block and FENCE.match(line.strip()):
            self.after_block = False  # the fence closing the block is not explanation
            return
        if line.strip():
            self.after_block = False
        self.held.append(line)
        while len(self.held) > HOLD:
            out.append(Prose(self.held.pop(0)))

    def _begin_block(self, out: list[ParseEvent]) -> None:
        # Walk back over held lines: an opening fence, then the file name.
        held = self.held
        i = len(held) - 1
        while i >= 0 and not held[i].strip():
            i -= 1
        fence_at = i if i >= 0 and FENCE.match(held[i].strip()) else None
        if fence_at is not None:
            i -= 1
            while i >= 0 and not held[i].strip():
                i -= 1
        path = self.looks_like_path(held[i]) if i >= 0 else None
        path_at = i if path is not None else None
        if path is None and fence_at is not None:  # ```python path/to/file.py
            info = FENCE.match(held[fence_at].strip())["info"].split()
            path = next((p for w in reversed(info) if (p := self.looks_like_path(w))), None)
        consumed = [x for x in (path_at, fence_at) if x is not None]
        out.extend(Prose(line) for line in held[: min(consumed, default=len(held))])
        self.held = []
        path = path or self.last_path
        if path is None:
            out.append(Malformed("a SEARCH/REPLACE block does not say which file it edits"))
            self.state = SKIP
            return
        self.last_path = path
        out.append(EditBegin(path, "update"))
        self.state = OLD

    def _end(self, out: list[ParseEvent], complete: bool) -> None:
        if self.state in (OLD, NEW):
            why = "the answer stopped" if not complete else "the answer ended"
            out.append(EditEnd(False, f"{why} inside a SEARCH/REPLACE block"))
        for line in self.held:
            out.append(Prose(line))
        self.held = []
        self.state = OUTSIDE
