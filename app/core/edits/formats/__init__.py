"""Streaming edit parsing, the edit formats' records, and the choice of format per request.

Each format is one module holding its record (record.Format: name, label, prompt rules,
measured cost, whole-file meaning, how a capable model writes it): apply_patch.py,
search_replace.py, whole.py, and agent.py for a back-end that edits through tools. This
registry is the one list of them; code outside this package asks a record (`get`), never
compares a format's name.

The format decides what the prompt asks for; the parser (parser.EditParser) reads all of
them, since models do not always write what they were asked to. The choice is by measured
cost, tokens to an exact result (costs.py), not by the model's name: whole files for small
files and tiny models, search/replace or apply_patch for larger files.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.core.edits.formats import agent, apply_patch, costs, search_replace, whole
from app.core.edits.formats.inferred import Infer
from app.core.edits.formats.parser import EditParser
from app.core.edits.formats.record import Format
from app.core.provider import Capabilities

# the formats a model is asked to write, in the order a tie in cost is broken by
EDIT_FORMATS: tuple[Format, ...] = (apply_patch.FORMAT, search_replace.FORMAT, whole.FORMAT)
FORMATS: tuple[str, ...] = tuple(f.name for f in EDIT_FORMATS)
AGENT = agent.FORMAT
AUTO = "auto"  # not a format: asks for the cheapest one per request (`pick`)
CHOICES: tuple[str, ...] = (AUTO, *FORMATS)  # what --format and the config file accept
_KNOWN = {f.name: f for f in (*EDIT_FORMATS, AGENT)}

# OpenAI's gpt and codex models are trained on apply_patch: their trained format when the
# back-end declares none
_OPENAI_MODEL = re.compile(r"(^|/)(gpt-|o\d|codex)", re.IGNORECASE)


def find(name: str) -> Format | None:
    """The record of the format `name` (an edit format, or the agent's), None for another
    name ("auto" before a format is chosen)."""
    return _KNOWN.get(name)


def get(name: str) -> Format:
    """The record of the format `name`, which must be one (a chosen format, a log's)."""
    rec = _KNOWN.get(name)
    if rec is None:
        raise ValueError(f"unknown edit format {name!r}; choose one of {', '.join(FORMATS)}")
    return rec


def longest_rules() -> str:
    """The longest rules of any format: what a prompt's size is counted with before the
    format is chosen (to be safe)."""
    return max((f.rules for f in EDIT_FORMATS), key=len)


@dataclass(frozen=True)
class Choice:
    fmt: str
    reason: str  # why, in a few words, for the answer's title


def choose(caps: Capabilities, model: str, context_lines: list[int]) -> Choice:
    """The format with the fewest expected tokens to an exact result (costs.py: measured
    answer sizes and exact-apply rates) for these files and this back-end's model."""
    trained = caps.preferred_format if caps.preferred_format in FORMATS else (
        apply_patch.FORMAT.name if _OPENAI_MODEL.search(model or "") else None)
    priced = sorted((costs.cost(f, context_lines, caps.model_class, trained), i, f)
                    for i, f in enumerate(EDIT_FORMATS))
    best, _, fmt = priced[0]
    runner, _, other = priced[1]
    if best == float("inf"):  # no format was ever exact for this model: the one it writes
        fmt = get(trained) if trained else min(
            EDIT_FORMATS, key=lambda f: costs.answer_tokens(f, context_lines))
        return Choice(fmt.name, f"no format applied exactly in the measurements; {fmt.label} "
                                "is the one this model writes at all, and steer keeps what it "
                                "leaves out")
    size = (f"{context_lines[0]}-line file" if len(context_lines) == 1 else
            f"{len(context_lines)} files, {sum(context_lines)} lines" if context_lines else "no file")
    if caps.model_class == "tiny":
        rate = costs.exact_rate(fmt, "tiny", trained)
        why = (f"the tiny model applies {fmt.label} answers exactly {rate:.0%} of the time, "
               f"{other.label} {costs.exact_rate(other, 'tiny', trained):.0%}")
    else:
        alt = "never exact" if runner == float("inf") else f"~{runner:.0f}"
        why = f"{size}: ~{best:.0f} tokens to an exact result, {other.label} {alt}"
        if trained == fmt.name:
            why += "; the model is trained on it"
    return Choice(fmt.name, f"{why} (measured)")


def choose_format(caps: Capabilities, model: str, context_lines: list[int]) -> str:
    return choose(caps, model, context_lines).fmt


def pick(caps: Capabilities, model: str, asked: str, context_lines: Sequence[int]) -> Choice:
    """A new question's format and why: the agent's for an agent back-end (it reads the
    files it needs itself, through steer), the one asked for, or for AUTO the cheapest
    (`choose`)."""
    if caps.agent:
        return Choice(AGENT.name, "the agent edits files itself")
    if asked != AUTO:
        return Choice(asked, "as asked (--format)")
    return choose(caps, model, list(context_lines))


def make_parser(fmt: str, known_paths: frozenset[str] = frozenset(),
                exists: Callable[[str], bool] | None = None,
                infer: Infer | None = None) -> EditParser:
    """`exists`: whether the workspace has a file of that name (a name with spaces before a
    block is taken only then: parser.looks_like_path). `infer`: which context file a block
    naming none proposes (inferred.py), or None to read such a block as prose."""
    rec = find(fmt)
    if rec is None or rec.agent:
        raise ValueError(f"unknown edit format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return EditParser(known_paths, whole=rec.whole_file, exists=exists, infer=infer)
