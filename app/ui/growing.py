"""Changing a ScrollView's virtual size without a screen-wide layout pass.

`Widget.virtual_size` is a layout reactive: every change re-lays-out and re-renders the
whole screen (tens of milliseconds here), which at one change per frame is the difference
between keeping up with a fast model and falling seconds behind. Content that only grows
needs a layout pass only when the scrollbar appears or disappears; otherwise updating the
scrollbar is enough. This leans on Textual's `_scroll_update`, which its own resize path uses.
"""

from __future__ import annotations

from textual.geometry import Size
from textual.widget import Widget


def set_virtual_size(widget: Widget, size: Size) -> None:
    if size == widget.virtual_size:
        return
    shown = (widget.show_vertical_scrollbar, widget.show_horizontal_scrollbar)
    widget.set_reactive(Widget.virtual_size, size)
    widget._scroll_update(size)
    if (widget.show_vertical_scrollbar, widget.show_horizontal_scrollbar) != shown:
        widget.refresh(layout=True)
