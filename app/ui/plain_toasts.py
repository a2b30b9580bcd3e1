"""Toasts are plain text (DESIGN rule 12). They carry paths, instructions, error messages
and agent text, and Textual reads a toast's message as markup unless told otherwise (and a
widget's `notify` tells it markup=True by default): `[slug]` vanishes, `[/]` raises, and
ESC goes to the terminal. An app class that mixes this in shows every toast through the
boundary (app/view/outside_text.py), whoever asks for it."""

from __future__ import annotations

from app.view.outside_text import name, visible


class PlainToasts:
    """Mixed into an App before `App`: `notify` never reads markup (steer's own toasts use
    none; the argument is accepted, and not obeyed)."""

    def notify(self, message: str, *, title: str = "", severity="information",
               timeout: float | None = None, markup: bool = False) -> None:
        super().notify(visible(message), title=name(title), severity=severity,  # type: ignore[misc]  # Textual's Literal
                       timeout=timeout, markup=False)
