"""A git diff (working tree or index against HEAD) as the rows the diff pane draws.

The pane shows the pending diff by default; its git views show what git sees, with the same
rows, line numbers and colours, read-only.
"""

from __future__ import annotations

import re

from app.view.layout import Row

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)$")


def rows(path: str, diff: str, what: str) -> list[Row]:
    """`diff`: `git diff` output for one file; `what`: the view's name for the title row."""
    out = [Row("file", f"{path} · {what}")]
    if not diff.strip():
        out.append(Row("note", f"no differences ({what})"))
        return out
    old = new = 0
    for line in diff.split("\n"):
        m = _HUNK.match(line)
        if m:
            old, new = int(m.group(1)), int(m.group(3))
            out.append(Row("gap", f"line {old} → {new}" + (f"  {m.group(5)}" if m.group(5) else ""),
                           old_no=old, new_no=new))
            continue
        if not old and not new:
            if line.startswith(("Binary files", "new file", "deleted file", "rename ")):
                out.append(Row("note", line))
            continue  # the header: diff --git, index, ---, +++
        tag, text = line[:1], line[1:]
        if tag == " ":
            out.append(Row("ctx", text, old, new))
            old, new = old + 1, new + 1
        elif tag == "-":
            out.append(Row("del", text, old, None))
            old += 1
        elif tag == "+":
            out.append(Row("add", text, None, new))
            new += 1
        elif line.startswith("\\"):
            out.append(Row("note", line[2:]))
    return out
