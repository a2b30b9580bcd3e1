"""Whether a file still parses after a change, in every language steer has a grammar for
(grammars.py): Python with its own parser (its messages are the ones a Python user knows),
the rest with tree-sitter. A proposal that drops a closing brace, or a line-mode pick that
keeps a `-` line without its `+`, is flagged before the accept, as large deletions and
invisible characters are; nothing is refused (the user may mean it).

A file that did not parse before is not flagged: the change did not break it. What the
message says: `syntax error at line N`, N in the file as it would be, and for Python the
parser's words ("syntax error at line 3: expected ':'")."""

from __future__ import annotations

import ast
import warnings
from collections.abc import Sequence
from functools import cache
from pathlib import PurePosixPath
from typing import Any

from app.core.text.grammars import GRAMMARS

MAX_LINES = 50_000  # beyond this a parse on every pick would be felt; such files go unchecked


def grammar(path: str) -> str | None:
    return GRAMMARS.get(PurePosixPath(path).suffix.lower())


def can_parse(path: str) -> bool:
    return grammar(path) is not None


def problem(path: str, lines: Sequence[str]) -> str:
    """"" when `lines` parse (or steer cannot tell); else where and, if known, why not."""
    lang = grammar(path)
    if lang is None or len(lines) > MAX_LINES:
        return ""
    source = "\n".join(lines) + "\n"
    if lang == "python":
        return _python(path, source)
    return _tree_sitter(lang, source.encode("utf-8", "surrogatepass"), len(lines))


def breaks(path: str, before: Sequence[str], after: Sequence[str]) -> str:
    """"" unless `before` parses and `after` does not: then what `problem` says of `after`."""
    if not can_parse(path):
        return ""
    broken = problem(path, after)
    return broken if broken and not problem(path, before) else ""


def _at(line: int | None, why: str = "") -> str:
    where = f"syntax error at line {line}" if line else "syntax error"
    return f"{where}: {why}" if why else where


def _python(path: str, source: str) -> str:
    try:
        with warnings.catch_warnings():  # a SyntaxWarning (an odd escape) is no break
            warnings.simplefilter("ignore")
            ast.parse(source, filename=path)
    except SyntaxError as exc:
        return _at(exc.lineno, exc.msg)
    except (ValueError, RecursionError) as exc:  # a NUL byte; nesting deeper than the parser goes
        return _at(None, str(exc) or type(exc).__name__)
    return ""


@cache
def _parser(lang: str) -> Any:
    from tree_sitter_language_pack import get_parser  # loaded on the first file of its kind

    return get_parser(lang)  # type: ignore[arg-type]  # a name from grammars.py


def _tree_sitter(lang: str, source: bytes, lines: int) -> str:
    try:
        parser = _parser(lang)
    except (LookupError, ValueError, OSError):  # the pack lacks it here: steer cannot tell
        return ""
    node = parser.parse(source).root_node
    if not node.has_error:
        return ""
    while not (node.is_error or node.is_missing):  # down to the first broken node
        node = next((c for c in node.children if c.has_error or c.is_error or c.is_missing), None)
        if node is None:
            return _at(None)
    line = min(node.start_point[0] + 1, max(lines, 1))  # a `}` missing at the end: the last line
    return _at(line, f"missing {node.type!r}" if node.is_missing else "")
