"""Streaming edit parsing and the choice of edit format per model.

The format decides what the prompt asks for; the parser (parser.EditParser) reads all of
them, since models do not always write what they were asked to.
"""

from __future__ import annotations

import re

from app.core.formats.parser import EditParser
from app.core.provider import Capabilities

FORMATS: tuple[str, ...] = ("apply_patch", "search_replace", "whole")
SMALL_FILE_LINES = 40  # whole-file answers for files this short cost about what a diff does

# OpenAI's gpt and codex models are trained on apply_patch.
_OPENAI_MODEL = re.compile(r"(^|/)(gpt-|o\d|codex)", re.IGNORECASE)


def choose_format(caps: Capabilities, model: str, context_lines: list[int]) -> str:
    if caps.preferred_format in FORMATS:
        return caps.preferred_format  # the back-end knows its model (e.g. a tiny local one)
    if _OPENAI_MODEL.search(model or ""):
        return "apply_patch"
    if context_lines and max(context_lines) <= SMALL_FILE_LINES:
        return "whole"
    return "search_replace"


def make_parser(fmt: str, known_paths: frozenset[str] = frozenset()) -> EditParser:
    if fmt not in FORMATS:
        raise ValueError(f"unknown edit format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return EditParser(known_paths, whole=fmt == "whole")
