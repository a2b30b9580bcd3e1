"""The first screen's lines in the conversation pane, drawn from the plain rows of
app/view/welcome.py: a label, then the text wrapped with a hanging indent, in the pane's
own styles.

Wrapped here rather than by a rich Table: a command or a path (`steer --provider cerebras`,
`~/.config/steer/config.toml`) is never broken across lines unless it is wider than the
pane, and a narrow pane (80 columns) puts the text after its label instead of in a column
of its own, so the whole welcome fits in 24 rows. Every span is drawn as a plain segment
(never markup) of the boundary's `name` (app/view/outside_text.py), so a model's or agent's
name is shown as written, escapes and all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from app.view.outside_text import name
from app.view.welcome import Row

STYLES = ("welcome-label", "welcome-key", "welcome-code")
COLUMN_FROM = 44  # pane width from which the labels make a column of their own


def wrap(spans: Sequence[tuple[str, str]], first: int, rest: int) -> list[list[tuple[str, str]]]:
    """Spans (text, kind) cut into lines of `first` cells, then `rest` cells, at a space
    that is not inside a "code" span nor right after a key ("y accepts" stays together). A
    word too wide for the first line starts the second one; only a word wider than a whole
    line is cut. The space a line breaks at is dropped."""
    chars = [(ch, kind) for text, kind in spans for ch in text]

    def breaks(i: int) -> bool:
        return chars[i][0] == " " and chars[i][1] != "code" and (i == 0 or chars[i - 1][1] != "key")

    lines: list[list[tuple[str, str]]] = []
    start, width = 0, first
    while start < len(chars):
        cells, end, cut = 0, start, -1
        while end < len(chars) and cells + cell_len(chars[end][0]) <= max(1, width):
            if end > start and breaks(end):
                cut = end
            cells += cell_len(chars[end][0])
            end += 1
        if end < len(chars) and breaks(end):
            cut = end  # the line is full right before a space: break there
        if end >= len(chars):
            cut = nxt = len(chars)
        elif cut > start:
            nxt = cut + 1
        elif width < rest:  # the first word does not fit after the label: on the next line
            cut = nxt = start
        else:  # one word wider than the line: cut
            cut = nxt = max(end, start + 1)
        lines.append(_runs(chars[start:cut]))
        start, width = nxt, rest
    return lines


def _runs(chars: list[tuple[str, str]]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for ch, kind in chars:
        if out and out[-1][1] == kind:
            out[-1] = (out[-1][0] + ch, kind)
        else:
            out.append((ch, kind))
    return out


def welcome_strips(rows: Sequence[Row], width: int, style: Callable[[str], Style],
                   height: int = 0) -> list[Strip]:
    """`style(name)`: the pane's style of a component ("" is the pane's own). The blank
    lines (above, and between groups) go first when the pane is shorter than the welcome."""
    base = style("")
    kinds = {"text": base + style("text"), "key": base + style("welcome-key"),
             "code": base + style("welcome-code")}
    label_style = base + style("welcome-label")
    column = max((len(r.label) for r in rows), default=0) + 2
    wide = width >= COLUMN_FROM
    blank = Strip.blank(width, base)
    strips: list[Strip] = []
    for row in rows:
        if not row.spans:
            strips.append(blank)
            continue
        label = row.label.ljust(column) if wide else row.label + "  "
        indent = 1 + (column if wide else 2)
        spans = [(name(text), kind) for text, kind in row.spans]
        lines = wrap(spans, width - 2 - len(label), width - 1 - indent)
        for i, line in enumerate(lines):
            head = [Segment(" ", base), Segment(label, label_style)] if i == 0 else [
                Segment(" " * indent, base)]
            segments = head + [Segment(text, kinds.get(kind, kinds["text"])) for text, kind in line]
            strips.append(Strip(segments).crop_extend(0, width, base))
    if height and len(strips) > height:
        strips = [s for s in strips if s is not blank]
    return [blank, *strips] if not height or len(strips) < height else strips
