"""Under the diff in line mode: what y writes in place of the hunk, from the lines picked
(✓), and a flag when the file would no longer parse. With nothing picked it says that y
writes nothing. The lines are outside text, shown through the boundary."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from app.core.edits.hunks import Hunk
from app.core.text.plural import plural
from app.view.outside_text import to_text

PREVIEW_LINES = 6  # this many lines of what y writes, then a count


class LinePreview(Static):
    def show(self, h: Hunk, lines: list[str] | None, broken: str, warning: str) -> None:
        """`lines`: what y writes (None: nothing picked); `broken`: why the file would not
        parse; `warning`: the theme's colour for that."""
        if lines is None:
            self.update(Text.assemble(
                ("Nothing picked: y writes nothing. ", "bold"),
                "Space picks the line under the cursor (✓): a picked − line goes, a picked + "
                "line comes in; every line not picked stays as it is on disk."))
            return
        text = Text(f"y writes in place of hunk #{h.id}'s {plural(len(h.old), 'line')}:\n",
                    style="bold")
        for line in lines[:PREVIEW_LINES]:
            text.append_text(to_text(f"  {line}\n"))
        if len(lines) > PREVIEW_LINES:
            text.append(f"  … {len(lines) - PREVIEW_LINES} more\n", style="dim")
        if not lines:
            text.append("  (no line: the picked − lines go, and no + line was picked)\n",
                        style="dim")
        if broken:
            text.append(f"⚠ {h.path} would no longer parse: ", style=f"bold {warning}")
            text.append_text(to_text(broken))
        text.rstrip()
        self.update(text)
