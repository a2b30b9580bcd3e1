"""Compare variants: the region under the diff's cursor as each variant writes it, side by
side, one column per variant. What the models wrote is outside text: shown through
app/view/outside_text.py, never read as markup."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from app.core.variants.group import Variant
from app.view.outside_text import name, to_text
from app.view.variants import state_mark


class CompareScreen(ModalScreen[None]):
    """Esc, q or = closes it; nothing is decided here."""

    DEFAULT_CSS = """
    CompareScreen { align: center middle; }
    #compare-box { width: 96%; height: auto; max-height: 90%; border: thick $primary;
                   background: $surface; padding: 0 1; }
    #compare-title { text-style: bold; padding-bottom: 1; }
    #compare-cols { height: auto; max-height: 70vh; }
    .compare-col { width: 1fr; height: auto; max-height: 70vh; border-left: solid $primary 30%;
                   padding: 0 1; }
    .compare-head { text-style: bold; color: $accent; }
    .compare-what { color: $text-muted; text-style: italic; padding-bottom: 1; }
    #compare-foot { color: $text-muted; }
    """
    BINDINGS = [Binding("escape,q,equals_sign", "close", "Close", priority=True)]

    def __init__(self, path: str, line: int,
                 versions: list[tuple[Variant, list[tuple[str, bool]], str]]) -> None:
        super().__init__()
        self.path, self.line, self.versions = path, line, versions

    def compose(self) -> ComposeResult:
        with Vertical(id="compare-box"):
            yield Label(Text(f"{name(self.path)} near line {self.line + 1}: each variant's version"),
                        id="compare-title")
            with Horizontal(id="compare-cols"):
                for v, lines, what in self.versions:
                    with VerticalScroll(classes="compare-col"):
                        yield Label(Text(f"variant {v.index} {state_mark(v)} {name(v.label)}"),
                                    classes="compare-head")
                        yield Label(Text(what), classes="compare-what")
                        yield Static(_body(lines), markup=False)
            yield Label("▎ marks the variant's own lines (not on disk) · Esc closes · [ ] switch "
                        "variants in the review, y takes a hunk there",
                        id="compare-foot")

    def action_close(self) -> None:
        self.dismiss(None)


def _body(lines: list[tuple[str, bool]]) -> Text:
    if not lines:
        return Text("(this variant does not change the file)", style="dim")
    out = Text()
    for text, own in lines:
        out.append("▎ " if own else "  ", style="bold green" if own else "")
        out.append_text(to_text(text, "bold" if own else ""))
        out.append("\n")
    out.rstrip()
    return out
