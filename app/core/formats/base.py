"""Line framing shared by the streaming parsers.

Parsers only ever act on complete lines, which makes them chunking-invariant by
construction: feeding one character at a time gives exactly the events of feeding the
whole text. The per-chunk cost is the chunk's own length (the partial line is short).
"""

from __future__ import annotations

import re

from app.core.formats.events import ParseEvent

PATHLIKE = re.compile(r"^[\w.\-+@/~:]+$")
EXTENSION = re.compile(r"\.[A-Za-z0-9_]+$")
FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")


class StreamParser:
    def __init__(self, known_paths: frozenset[str] = frozenset()) -> None:
        self._buf = ""
        self.known_paths = known_paths

    def feed(self, chunk: str) -> list[ParseEvent]:
        if "\n" not in chunk:
            self._buf += chunk
            return []
        out: list[ParseEvent] = []
        lines = (self._buf + chunk).split("\n")
        self._buf = lines.pop()
        for line in lines:
            self._line(line[:-1] if line.endswith("\r") else line, out)
        return out

    def finish(self, complete: bool = True) -> list[ParseEvent]:
        """End of the answer. `complete` is False when it was cut short (interrupted,
        dropped, or stopped at the token limit): an edit still open is then unfinished."""
        out: list[ParseEvent] = []
        if self._buf:
            line, self._buf = self._buf, ""
            # a cut-short answer's last partial line is kept as prose, but not as code: a
            # half-written line of an edit is not what the model meant to write
            if complete or not self.in_edit:
                self._line(line[:-1] if line.endswith("\r") else line, out)
        self._end(out, complete)
        return out

    def tentative(self) -> str:
        """Prose not emitted yet: the partial last line (and lines a parser holds back while
        it cannot tell prose from the start of an edit), for a view that shows text as it
        streams. Empty inside an edit."""
        return "" if self.in_edit else self._buf

    @property
    def in_edit(self) -> bool:
        return False

    def _line(self, line: str, out: list[ParseEvent]) -> None:
        raise NotImplementedError

    def _end(self, out: list[ParseEvent], complete: bool) -> None:
        raise NotImplementedError

    def looks_like_path(self, text: str) -> str | None:
        """The file name a model wrote on a line of its own before a block, if it is one."""
        cand = text.strip().strip("*#`'\"").strip()
        cand = cand.removesuffix(":").strip().strip("*`'\"")
        for prefix in ("File:", "file:", "Path:", "path:", "Filename:", "filename:"):
            if cand.startswith(prefix):
                cand = cand[len(prefix):].strip().strip("`'\"")
        if not cand or cand in self.known_paths:
            return cand or None
        if len(cand) > 240 or "://" in cand or not PATHLIKE.match(cand):
            return None
        return cand if ("/" in cand or EXTENSION.search(cand)) else None
