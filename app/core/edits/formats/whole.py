"""The whole-file format: the file's path on a line of its own, then its complete new text
in one fenced block. The cheapest for small files, and the one a tiny model writes at all.

Read by the shared parser (parser.py: a bare fenced block after a path is the file), and as
the model meant it when it shows only part of the file (fragments.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from app.core.edits.formats.record import Cost, Format

RULES = """\
You are a coding assistant. Change the user's file as asked. Answer with the file's path
on a line of its own, then the complete new content of the file in one code block. If the
file itself contains ``` lines, fence the block with ```` (four backticks)."""


def write(path: str, old: Sequence[str], new: Sequence[str], lang: str) -> str:
    body = "".join(t + "\n" for t in new)
    fence = "````" if "```" in body else "```"
    return f"Here is the updated file.\n\n{path}\n{fence}{lang}\n{body}{fence}\n"


FORMAT = Format(
    "whole", "whole file", RULES,
    # prose, path, fences + every line of the file; SmolLM2-135M: 0 of 24 exact (an earlier
    # 6-task run gave 3 of 6), but it is what it writes at all (97 answer tokens a task,
    # against 254 and 223 in the other two formats)
    Cost(17.0, 9.2, {"capable": 1.0, "tiny": 0.0}),
    whole_file=True, write=write)
