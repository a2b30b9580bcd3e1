"""Whether a file still parses after a change, for the files steer can parse (Python, for
now). Line mode lets the user take single lines of a hunk: the `-` line of a replace pair
without its `+` leaves a function without its `def`. The review flags that result before
the accept, as it flags large deletions; nothing is refused (the user may mean it).

A file that did not parse before is not flagged: the change did not break it."""

from __future__ import annotations

import ast
import warnings
from collections.abc import Sequence
from pathlib import PurePosixPath

PYTHON = frozenset({".py", ".pyi", ".pyw"})
MAX_LINES = 50_000  # beyond this a parse on every pick would be felt; such files go unchecked


def can_parse(path: str) -> bool:
    return PurePosixPath(path).suffix.lower() in PYTHON


def problem(path: str, lines: Sequence[str]) -> str:
    """"" when `lines` parse (or steer cannot tell); else what the parser says, with the line."""
    if not can_parse(path) or len(lines) > MAX_LINES:
        return ""
    source = "\n".join(lines) + "\n"
    try:
        with warnings.catch_warnings():  # a SyntaxWarning (an odd escape) is no break
            warnings.simplefilter("ignore")
            ast.parse(source, filename=path)
    except SyntaxError as exc:
        return f"{exc.msg} (line {exc.lineno})" if exc.lineno else exc.msg
    except (ValueError, RecursionError) as exc:  # a NUL byte; nesting deeper than the parser goes
        return str(exc) or type(exc).__name__
    return ""


def breaks(path: str, before: Sequence[str], after: Sequence[str]) -> str:
    """"" unless `before` parses and `after` does not: then the parser's message."""
    if not can_parse(path):
        return ""
    broken = problem(path, after)
    return broken if broken and not problem(path, before) else ""
