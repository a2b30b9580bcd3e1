"""Search/replace blocks, as aider popularised them: a path line, then `<<<<<<< SEARCH`,
the exact old lines, `=======`, the new lines, `>>>>>>> REPLACE` (in a fence or not).

Read by the shared parser (parser.py), which reads every format whichever was asked for.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.core.edits.formats.record import Cost, Format
from app.core.text.linediff import line_diff

RULES = """\
You are a coding assistant pair-programming in the user's repository. Make the change the
user asks for with SEARCH/REPLACE blocks, and say briefly what you did.

path/to/file.py
```python
<<<<<<< SEARCH
exact lines copied from the file
=======
the lines that replace them
>>>>>>> REPLACE
```

Rules: put the file path alone on the line before each block. The SEARCH part must match
the file exactly, including indentation, and be just long enough to be unique. Use several
small blocks rather than one large one. To create a file, use an empty SEARCH part."""


def _count(lines: list[str], block: list[str]) -> int:
    n = len(block)
    return sum(1 for i in range(len(lines) - n + 1) if lines[i : i + n] == block)


def _lines(lines: Sequence[str]) -> str:
    return "".join(t + "\n" for t in lines)


def write(path: str, old: Sequence[str], new: Sequence[str], lang: str) -> str:
    """One block per changed region, its SEARCH part widened until it is unique and not
    empty (an empty file: an empty SEARCH part, which creates it)."""
    a, b = list(old), list(new)
    blocks = []
    for a1, a2, b1, b2 in line_diff(a, b):
        lo, hi = a1, a2
        while (_count(a, a[lo:hi]) != 1 or hi == lo) and (lo > 0 or hi < len(a)):
            lo, hi = max(0, lo - 1), min(len(a), hi + 1)
        search, replace = a[lo:hi], a[lo:a1] + b[b1:b2] + a[a2:hi]
        fence = "````" if any("```" in t for t in search + replace) else "```"
        blocks.append(f"{path}\n{fence}{lang}\n<<<<<<< SEARCH\n" + _lines(search) + "=======\n"
                      + _lines(replace) + f">>>>>>> REPLACE\n{fence}\n")
    return "Done.\n\n" + "\n".join(blocks)


FORMAT = Format(
    "search_replace", "search/replace", RULES,
    # per change: path, markers, the lines around it twice; SmolLM2-135M: 0 of 24 exact
    Cost(77.3, 0.0, {"capable": 1.0, "tiny": 0.0}),
    write=write)
