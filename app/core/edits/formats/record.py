"""What an edit format is, in one record: its name, the rules the prompt gives for it, what
it costs as measured, and what its answers mean for the files (whole-file or not).

Everything steer decides by format asks the record (app/core/edits/formats/__init__.py
`get`), never the format's name, so a new format is one module with its record (and its
tests): the prompt, the choice by cost, the parser, the prefill, the grammar and the
benchmark's scripted answers follow from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

# (path, the file's lines, the lines it should have, the fence's info string) -> the answer
Writer = Callable[[str, Sequence[str], Sequence[str], str], str]


@dataclass(frozen=True)
class Cost:
    """The measured size of an answer and how often it applies exactly (costs.py).

    Answer tokens = `fixed` + `per_line` * lines, per file in context for a whole-file format
    (it writes every line), per change for the others (a block around it: `per_line` 0).
    `exact`: the exact-apply rate per model class (Capabilities.model_class)."""

    fixed: float
    per_line: float = 0.0
    exact: Mapping[str, float] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:  # the measurement is read, never changed
        object.__setattr__(self, "exact", MappingProxyType(dict(self.exact)))


@dataclass(frozen=True)
class Format:
    name: str  # as --format, the config file and a session's log spell it
    label: str  # for people: the answer's title, the reason of a choice
    rules: str = ""  # the system prompt asking for it ("": none of its own)
    cost: Cost | None = None  # None: never chosen by cost
    # an answer is each file complete, in a fenced block after its path: priced by the
    # file's lines, and the parser reads a bare fenced block after a path as the file
    whole_file: bool = False
    # the back-end is an agent (ACP): it edits through steer's tools and its answer is
    # words, with no edit markup to parse
    agent: bool = False
    # the answer a capable model writes in this format for one change (`steer bench task`'s
    # scripted server, and tests); None for a format steer never asks a model to write
    write: Writer | None = None

    @property
    def predictable(self) -> bool:
        """The answer mostly repeats the files it changes, so they are its predicted output
        for a back-end that takes one (the unchanged parts stream at once)."""
        return self.whole_file

    @property
    def prefills_file(self) -> bool:
        """With one file in context the answer's start is known (its path and an opening
        fence): a back-end that takes a prefill gets it, and a grammar can hold the rest to
        the file's shape."""
        return self.whole_file
