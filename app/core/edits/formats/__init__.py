"""Streaming edit parsing and the choice of edit format per file and model.

The format decides what the prompt asks for; the parser (parser.EditParser) reads all of
them, since models do not always write what they were asked to. The choice is by measured
cost, tokens to an exact result (costs.py), not by the model's name: whole files for small
files and tiny models, search/replace or apply_patch for larger files.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from app.core.edits.formats import costs
from app.core.edits.formats.parser import EditParser
from app.core.provider import Capabilities

FORMATS: tuple[str, ...] = ("apply_patch", "search_replace", "whole")
LABEL = {"apply_patch": "apply_patch", "search_replace": "search/replace", "whole": "whole file"}

# OpenAI's gpt and codex models are trained on apply_patch: their trained format when the
# back-end declares none
_OPENAI_MODEL = re.compile(r"(^|/)(gpt-|o\d|codex)", re.IGNORECASE)


@dataclass(frozen=True)
class Choice:
    fmt: str
    reason: str  # why, in a few words, for the answer's title


def choose(caps: Capabilities, model: str, context_lines: list[int]) -> Choice:
    """The format with the fewest expected tokens to an exact result (costs.py: measured
    answer sizes and exact-apply rates) for these files and this back-end's model."""
    trained = caps.preferred_format if caps.preferred_format in FORMATS else (
        "apply_patch" if _OPENAI_MODEL.search(model or "") else None)
    priced = sorted((costs.cost(f, context_lines, caps.model_class, trained), i, f)
                    for i, f in enumerate(FORMATS))
    best, _, fmt = priced[0]
    runner, _, other = priced[1]
    if best == float("inf"):  # no format was ever exact for this model: the one it writes
        fmt = trained or min(FORMATS, key=lambda f: costs.answer_tokens(f, context_lines))
        return Choice(fmt, f"no format applied exactly in the measurements; {LABEL[fmt]} is the "
                           "one this model writes at all, and steer keeps what it leaves out")
    size = (f"{context_lines[0]}-line file" if len(context_lines) == 1 else
            f"{len(context_lines)} files, {sum(context_lines)} lines" if context_lines else "no file")
    if caps.model_class == "tiny":
        rate = costs.exact_rate(fmt, "tiny", trained)
        why = (f"the tiny model applies {LABEL[fmt]} answers exactly {rate:.0%} of the time, "
               f"{LABEL[other]} {costs.exact_rate(other, 'tiny', trained):.0%}")
    else:
        alt = "never exact" if runner == float("inf") else f"~{runner:.0f}"
        why = f"{size}: ~{best:.0f} tokens to an exact result, {LABEL[other]} {alt}"
        if trained == fmt:
            why += "; the model is trained on it"
    return Choice(fmt, f"{why} (measured)")


def choose_format(caps: Capabilities, model: str, context_lines: list[int]) -> str:
    return choose(caps, model, context_lines).fmt


def make_parser(fmt: str, known_paths: frozenset[str] = frozenset(),
                exists: Callable[[str], bool] | None = None) -> EditParser:
    """`exists`: whether the workspace has a file of that name (a name with spaces before a
    block is taken only then: parser.looks_like_path)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown edit format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return EditParser(known_paths, whole=fmt == "whole", exists=exists)
