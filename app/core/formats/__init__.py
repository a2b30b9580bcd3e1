"""Streaming parsers, one module per edit format, and the choice of format per model."""

from __future__ import annotations

import re
from typing import Literal

from app.core.formats.apply_patch import ApplyPatchParser
from app.core.formats.base import StreamParser
from app.core.formats.search_replace import SearchReplaceParser
from app.core.formats.whole_file import WholeFileParser

FormatName = Literal["apply_patch", "search_replace", "whole"]
FORMATS: dict[str, type[StreamParser]] = {
    "apply_patch": ApplyPatchParser,
    "search_replace": SearchReplaceParser,
    "whole": WholeFileParser,
}
SMALL_FILE_LINES = 40  # whole-file answers for files this short cost about what a diff does

# OpenAI's gpt and codex models are trained on apply_patch.
_OPENAI_MODEL = re.compile(r"(^|/)(gpt-|o\d|codex)", re.IGNORECASE)


def choose_format(provider: str, model: str, context_lines: list[int]) -> FormatName:
    if provider == "local":
        return "whole"  # a 135M model copies a file far more reliably than it writes a diff
    if _OPENAI_MODEL.search(model or ""):
        return "apply_patch"
    if context_lines and max(context_lines) <= SMALL_FILE_LINES:
        return "whole"
    return "search_replace"


def make_parser(name: str, known_paths: frozenset[str] = frozenset()) -> StreamParser:
    try:
        return FORMATS[name](known_paths)
    except KeyError:
        raise ValueError(f"unknown edit format {name!r}; choose one of {', '.join(FORMATS)}") from None
