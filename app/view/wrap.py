"""Soft wrap for prose, as character spans: how the conversation pane cuts a line of text
into rows (app/ui/widgets/stream_blocks.py). Pure text, cells measured as a terminal draws
them, so it is tested without drawing anything."""

from __future__ import annotations

from rich.cells import cell_len


def wrap_spans(line: str, width: int) -> list[tuple[int, int]]:
    """(start, end) character spans of `line` cut to `width` cells, after the last space of
    a row where there is one (prose reads as words), mid-word only where there is none. A
    row may run past the width by the spaces it ends with; they are cropped when drawn."""
    if width <= 0:
        return [(0, len(line))]
    if line.isascii():
        spans, start, n = [], 0, len(line)
        while n - start > width:
            cut = line.rfind(" ", start + 1, start + width + 1)
            end = cut + 1 if cut > 0 else start + width
            spans.append((start, end))
            start = end
        if start < n or not spans:
            spans.append((start, n))
        return spans
    spans, start, cells, space = [], 0, 0, -1
    for i, ch in enumerate(line):
        w = cell_len(ch)
        if cells + w > width and i > start and ch != " ":
            end = space + 1 if space > start else i
            spans.append((start, end))
            cells = cell_len(line[end:i])
            start, space = end, -1
        if ch == " ":
            space = i
        cells += w
    spans.append((start, len(line)))
    return spans
