"""OpenAI's apply_patch format, the one codex models are trained to write:

    *** Begin Patch
    *** Update File: src/app.py
    *** Move to: src/main.py        (optional)
    @@ def greet():                 (optional header: seek to this line first)
     context
    -removed
    +added
    *** Add File: notes.md
    +new file line
    *** Delete File: old.txt
    *** End Patch

Each `@@` chunk becomes one edit, sought after the previous chunk of the same file. The
format's record (FORMAT, app/core/edits/formats/record.py) is at the end: its prompt rules,
its measured cost, and how a capable model writes it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from app.core.edits.formats.base import StreamParser
from app.core.edits.formats.events import EditBegin, EditEnd, Line, Malformed, ParseEvent, Prose
from app.core.edits.formats.record import Cost, Format
from app.core.text.linediff import line_diff

OUTSIDE, PATCH, HEADER, UPDATE, ADD = range(5)
_OPS: dict[str, Literal["-", "+", " "]] = {"-": "-", "+": "+", " ": " "}  # a chunk line's marks


class ApplyPatchParser(StreamParser):

    def __init__(self, known_paths: frozenset[str] = frozenset(),
                 exists: Callable[[str], bool] | None = None) -> None:
        super().__init__(known_paths, exists)
        self.state = OUTSIDE
        self.path = ""
        self.move_to: str | None = None
        self.chunks = 0

    @property
    def in_edit(self) -> bool:
        return self.state in (UPDATE, ADD, HEADER)

    def _begin_chunk(self, anchor: str | None, out: list[ParseEvent]) -> None:
        out.append(EditBegin(self.path, "update", anchor=anchor or None, sequential=True,
                             move_to=self.move_to, first_in_section=self.chunks == 0))
        self.chunks += 1
        self.state = UPDATE

    def _close(self, out: list[ParseEvent]) -> None:
        if self.state in (UPDATE, ADD):
            out.append(EditEnd())
        elif self.state == HEADER:
            if self.move_to:  # a pure rename
                out.append(EditBegin(self.path, "update", move_to=self.move_to))
                out.append(EditEnd())
            else:
                out.append(Malformed(f"*** Update File: {self.path} has no changes", self.path))
        self.state = PATCH

    def _directive(self, line: str, out: list[ParseEvent]) -> None:
        body = line.strip()
        for tag, kind in (("*** Update File:", "update"), ("*** Add File:", "add"),
                          ("*** Delete File:", "delete")):
            if body.startswith(tag):
                self._close(out)
                self.path = body[len(tag):].strip()
                if kind == "update":
                    self.move_to, self.chunks, self.state = None, 0, HEADER
                elif kind == "add":
                    out.append(EditBegin(self.path, "add"))
                    self.state = ADD
                else:
                    out.append(EditBegin(self.path, "delete"))
                    out.append(EditEnd())
                return
        if body.startswith("*** Move to:") and self.state == HEADER:
            self.move_to = body[len("*** Move to:"):].strip()
        elif body == "*** End of File":
            pass  # the chunk ends at the end of the file; seeking forward already covers it
        elif body == "*** End Patch":
            self._close(out)
            self.state = OUTSIDE
        else:
            out.append(Malformed(f"unknown patch directive: {body}", self.path or None))

    def _line(self, line: str, out: list[ParseEvent]) -> None:
        state = self.state
        if state == OUTSIDE:
            if line.strip() == "*** Begin Patch":
                self.state = PATCH
            else:
                out.append(Prose(line))
            return
        if line.startswith("***"):
            self._directive(line, out)
            return
        if state == PATCH:
            if line.strip():
                out.append(Malformed(f"text outside any file in the patch: {line.strip()[:80]}"))
            return
        if state == ADD:
            if line.startswith("+"):
                out.append(Line("+", line[1:]))
            elif line == "":
                out.append(Line("+", ""))  # models often drop the '+' of an empty line
            else:
                out.append(EditEnd(False, f"*** Add File: {self.path}: line without '+': {line[:60]}"))
                self.state = PATCH
            return
        # HEADER or UPDATE
        if line.startswith("@@"):
            if state == UPDATE:
                out.append(EditEnd())
            self._begin_chunk(line[2:].strip().removesuffix("@@").strip(), out)
            return
        if state == HEADER:
            self._begin_chunk(None, out)  # codex allows a first chunk without @@
        op = _OPS.get(line[:1])
        if op is not None:
            out.append(Line(op, line[1:]))
        else:
            # an empty line, or a context line whose leading space the model dropped;
            # the locate step verifies it against the file either way
            out.append(Line(" ", line))

    def _end(self, out: list[ParseEvent], complete: bool) -> None:
        if complete:
            self._close(out)
        elif self.state in (UPDATE, ADD):
            out.append(EditEnd(False, f"{self.path}: the answer stopped inside the patch"))
        elif self.state == HEADER:
            out.append(Malformed(f"{self.path}: the answer stopped inside the patch", self.path))
        self.state = OUTSIDE


# -- the format's record -----------------------------------------------------------------------
RULES = """\
You are a coding assistant pair-programming in the user's repository. Make the change the
user asks for by writing a patch in the apply_patch format, and say briefly what you did.

*** Begin Patch
*** Update File: path/to/file.py
@@ def existing_function():
 unchanged context line
-line to remove
+line to add
*** Add File: path/to/new_file.py
+every line of the new file
*** Delete File: path/to/obsolete.py
*** End Patch

Rules: paths are relative to the repository root. Give 3 lines of context around each
change; start each chunk with @@ (optionally followed by a line to seek to). Every
context line starts with a space, removed lines with -, added lines with +."""


def write(path: str, old: Sequence[str], new: Sequence[str], lang: str) -> str:
    """Codex style: @@ and three lines of context; chunks closer than that are one, so
    chunks never overlap."""
    a, b = list(old), list(new)
    out = ["*** Begin Patch", f"*** Update File: {path}"]
    groups: list[list[tuple[int, int, int, int]]] = []
    for h in line_diff(a, b):
        if groups and h[0] - groups[-1][-1][1] <= 6:
            groups[-1].append(h)
        else:
            groups.append([h])
    for group in groups:
        lo, hi = max(0, group[0][0] - 3), min(len(a), group[-1][1] + 3)
        out.append("@@")
        pos = lo
        for a1, a2, b1, b2 in group:
            out += [f" {t}" for t in a[pos:a1]] + [f"-{t}" for t in a[a1:a2]]
            out += [f"+{t}" for t in b[b1:b2]]
            pos = a2
        out += [f" {t}" for t in a[pos:hi]]
    out.append("*** End Patch")
    return "\n".join(out) + "\n\nDone.\n"


FORMAT = Format(
    "apply_patch", "apply_patch", RULES,
    # per change: header, three lines of context each side; SmolLM2-135M: 0 of 24 exact
    Cost(110.0, 0.0, {"capable": 1.0, "tiny": 0.0}),
    write=write)
