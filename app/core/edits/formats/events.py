"""What edit-format parsers emit. Every format maps onto the same few events, so the pending
diff does not care which format the model wrote.

An *edit* is one located replacement: EditBegin, then its lines, then EditEnd.
Line ops: "-" old only, "+" new only, " " both (context).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

EditKind = Literal["update", "add", "delete", "whole"]


@dataclass(slots=True)
class Prose:
    """One line of the explanation around the edits."""

    text: str


@dataclass(slots=True)
class EditBegin:
    path: str
    kind: EditKind
    # apply_patch: the `@@ header` text to seek to first, and chunks of one file section are
    # sought in order, each after the previous one.
    anchor: str | None = None
    sequential: bool = False
    move_to: str | None = None
    first_in_section: bool = True
    # a structured edit (an agent's) knows where its old lines start in the base: it is
    # placed there, never sought
    at: int | None = None
    # a block that named no file, taken for this one (formats/inferred.py): the hunks' flag
    inferred: str = ""


@dataclass(slots=True)
class Line:
    op: Literal["-", "+", " "]
    text: str


@dataclass(slots=True)
class OldEnd:
    """The old side of the current edit is complete (search/replace `=======`)."""


@dataclass(slots=True)
class EditEnd:
    complete: bool = True
    error: str | None = None  # the format was broken inside this edit
    refused: bool = False  # the text was ambiguous: drop the edit, keep none of its lines


@dataclass(slots=True)
class Malformed:
    """Text that looked like an edit but cannot be one (no file name, stray marker...)."""

    message: str
    path: str | None = None


ParseEvent = Prose | EditBegin | Line | OldEnd | EditEnd | Malformed
