"""A fenced block that names no file, as a small model writes one: a whole-file proposal for a
context file only when exactly one file fits, never a guess.

A block fits a file when most of its lines are the file's (SHARE of its non-blank lines,
compared stripped, each line of the file used once), or when the request shows one file and
the block is in that file's language. Two files that fit, or none while the block is in a
context file's language, refuse the block aloud. A block in another language (a shell
command in a Python answer) is an example in the prose, as before.

The proposal is flagged (Hunk.inferred): a bulk accept leaves it, `y` takes it.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

SHARE = 0.6  # of the block's non-blank lines found in the file

# what Infer answers: a path (taken, flagged with `note`), or a refusal to say, or nothing
@dataclass(frozen=True, slots=True)
class Inferred:
    path: str | None = None
    note: str = ""  # the hunk's flag when taken, the refusal when not


Infer = Callable[[str, Sequence[str]], Inferred]
PROSE = Inferred()


@lru_cache(maxsize=256)
def _names(path: str) -> frozenset[str]:
    """The fence info words that mean this file's language: its extension and the aliases
    pygments knows for it (```python, ```py for a .py file)."""
    from pygments.lexers import find_lexer_class_for_filename

    ext = os.path.splitext(path)[1].lower().lstrip(".")
    names = {ext} if ext else set()
    lexer = find_lexer_class_for_filename(path)
    if lexer is not None:
        names.update(a.lower() for a in lexer.aliases)
        names.add(lexer.name.lower())
    return frozenset(names)


def _lines(lines: Sequence[str]) -> Counter[str]:
    return Counter(s for t in lines if (s := t.strip()))


def share(block: Counter[str], file: Counter[str]) -> float:
    """The part of the block's non-blank lines that are the file's (each line once)."""
    n = sum(block.values())
    return sum((block & file).values()) / n if n else 0.0


def infer(info: str, block: Sequence[str], files: Mapping[str, Sequence[str]]) -> Inferred:
    """Which context file a block with no file name proposes (see the module's rules).
    `info` is the fence's info string (```python → "python")."""
    words = info.strip().lower().split()
    lang = words[0] if words else ""
    ours = [p for p in files if not lang or lang in _names(p)]  # files in the block's language
    if not ours:
        return PROSE
    have = _lines(block)
    if not have:
        return PROSE
    shares = {p: share(have, _lines(files[p])) for p in ours}
    fits = [p for p in ours if shares[p] >= SHARE]
    if len(fits) == 1:
        (path,) = fits
        return Inferred(path, f"file inferred: {path} (the code block named no file; "
                              f"{shares[path]:.0%} of its lines are {path}'s)")
    if len(fits) > 1:
        named = ", ".join(sorted(fits)[:3]) + (" …" if len(fits) > 3 else "")
        return Inferred(None, f"a code block that names no file fits {len(fits)} files ({named}); "
                              "not taken (a path on the line before the block says which)")
    if len(files) == 1:
        (path,) = files
        return Inferred(path, f"file inferred: {path} (the code block named no file; it is "
                              "the only file shown)")
    best = max(ours, key=lambda p: shares[p])
    return Inferred(None, f"a code block that names no file fits no file shown ({best} has "
                          f"{shares[best]:.0%} of its lines); not taken (a path on the line "
                          "before the block says which)")


def infer_from(files: Mapping[str, Sequence[str]]) -> Infer | None:
    """The parser's inference over these context files (None when there are none)."""
    if not files:
        return None
    return lambda info, block: infer(info, block, files)
