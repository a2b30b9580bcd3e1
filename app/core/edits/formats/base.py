"""Line framing shared by the streaming parsers, and how a line is known to name a file.

Parsers only ever act on complete lines, which makes them chunking-invariant by
construction: feeding one character at a time gives exactly the events of feeding the
whole text. The per-chunk cost is the chunk's own length (the partial line is short).

A file name on a line of its own before a block is read by shape, since models name files
in many ways (`**a.py**`, `File: a.py`, `a.py:`). Real names carry brackets, parentheses
and spaces (Next.js `app/[slug]/page.tsx`, `a (copy).py`), and so does prose (`[1] see
below`, Markdown links): a name without spaces is taken when it looks like a path (a folder
or an extension) and is not a Markdown link, one with spaces only when that file exists (a
sentence naming a file is not a file), as is anything in the request's context.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from app.core.edits.formats.events import ParseEvent
from app.core.text.invisible import HIDDEN
from app.core.text.names import unescape

PATHLIKE = re.compile(r"^[\w.\-+@/~:]+$")
EXTENSION = re.compile(r"\.[A-Za-z0-9_]+$")
FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
# what never occurs in a name a model writes before a block: markup and shell quoting
NOT_IN_NAME = re.compile(r"[`*<>|\"\\]")
MD_LINK = re.compile(r"\[[^\]]*\]\(|\[[^\]]*\]:|^\[\^")  # [text](url), [ref]: url, [^note]
_PAIRS = {")": "(", "]": "[", "}": "{"}


def _balanced(text: str) -> bool:
    stack: list[str] = []
    for ch in text:
        if ch in "([{":
            stack.append(ch)
        elif ch in _PAIRS:
            if not stack or stack.pop() != _PAIRS[ch]:
                return False
    return not stack


class StreamParser:
    def __init__(self, known_paths: frozenset[str] = frozenset(),
                 exists: Callable[[str], bool] | None = None) -> None:
        self._buf = ""
        self.known_paths = known_paths
        # whether a workspace file has this name (a name with spaces must exist to be one);
        # asked only for such lines before a block, never per chunk
        self.exists = exists

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
        if len(cand) > 240 or "://" in cand or HIDDEN.search(cand):
            return None
        shaped = "/" in cand or EXTENSION.search(cand) is not None
        if PATHLIKE.match(cand):
            return cand if shaped else None
        if "\\" in cand and unescape(cand) is not None and (
                (self.exists is not None and self.exists(cand))
                or (shaped and not any(c.isspace() for c in cand))):
            # a name carried escaped (app/core/text/names.py): the workspace finds its file,
            # or refuses a new one by that name, saying why
            return cand
        if NOT_IN_NAME.search(cand) or cand.endswith(("/", ".")):
            return None
        if cand[0] + cand[-1] in ("()", "[]") and not (self.exists and self.exists(cand)):
            return self.looks_like_path(cand[1:-1])  # "(src/app.py)": the name in it
        if shaped and not any(c.isspace() for c in cand) and not MD_LINK.search(cand) \
                and _balanced(cand):
            return cand  # lib/[id].ts, app/(auth)/login/page.tsx, routes/$id.tsx
        # spaces (or a shape prose has too): a name only when that file is there
        return cand if self.exists is not None and self.exists(cand) else None
