"""How a set of variants reads on screen, without Textual: the tabs over the diff (each
variant's state and size, the one shown in brackets), one card per variant for the
conversation, and the status line's "variant 2/3". What a model said or named is outside
text; the widgets pass it through app/view/outside_text.py."""

from __future__ import annotations

from app.core.variants.check import CheckResult
from app.core.variants.group import Variant, Variants, summary
from app.view.status import Part, StatusLine, clip

CHECK_LINES = 3  # of a failed check's output, on its variant's card

MARKS = {"connecting": "…", "streaming": "✎", "done": "✓", "interrupted": "■", "error": "✗"}


def state_mark(v: Variant) -> str:
    turn = v.session.turn
    if turn is None:
        return " "
    if turn.state == "done" and not turn.complete:
        return "✗"
    return MARKS.get(turn.state, "?")


def size(v: Variant) -> tuple[int, int, int]:
    """Lines added, lines removed, hunks: what the variant proposes."""
    p = v.session.pending
    hunks = p.hunks if p is not None else []
    return (sum(len(h.new) for h in hunks), sum(len(h.old) for h in hunks), len(hunks))


def check_mark(r: CheckResult | None) -> str:
    if r is None:
        return ""
    return " pass" if r.passed else " FAIL" if r.exit_code is not None else f" {r.error.split(':')[0]}"


def tabs(variants: Variants, checks: dict[int, CheckResult] | None = None) -> StatusLine:
    """`[ ▸2 ✎ +12−3 ]  1 ✓ +4−4  3 …`: every variant, the one shown first to stay when the
    pane is narrow; `[` and `]` switch."""
    parts = []
    for i, v in enumerate(variants.items):
        add, rem, _ = size(v)
        label = f"{v.index} {state_mark(v)} +{add}−{rem}{check_mark((checks or {}).get(v.index))}"
        shown = i == variants.shown
        parts.append(Part(f"▸[{label}]" if shown else f" {label} ", 0 if shown else 1 + i))
    parts.append(Part("[ ] switch · = compare", 20))
    return StatusLine(parts)


def where(variants: Variants) -> str:
    """The status line's part naming the variant on screen."""
    v = variants.items[variants.shown]
    return f"variant {v.index}/{len(variants.items)}"


def card(v: Variant, shown: bool, check: CheckResult | None = None, width: int = 48) -> str:
    """One variant in the conversation: its state, figures, and its first words."""
    turn, p, counts = v.session.turn, v.session.pending, summary(v)
    add, rem, n = size(v)
    taken, gone = counts["accepted"], counts["superseded"]
    head = f"{'▸' if shown else ' '} variant {v.index} {state_mark(v)} {v.label}"
    figures = []
    if turn is not None:
        figures.append(f"{turn.tokens} tok")
        if turn.ended is not None:
            figures.append(f"{turn.elapsed:.2f} s")
    figures.append(f"{n} hunk{'s' if n != 1 else ''} +{add}−{rem}")
    if taken:
        figures.append(f"{taken} taken")
    if gone:
        figures.append(f"{gone} superseded")
    if counts["refused"]:
        figures.append(f"{counts['refused']} refused")
    if check is not None:
        figures.append("check passed" if check.passed else
                       f"check failed ({check.error or f'exit {check.exit_code}'})")
    prose = _opening(p.prose if p is not None else [], width)
    if turn is not None and turn.error is not None:
        prose = turn.error.message
    prose = clip(prose, width)
    out = f"{head}\n    {' · '.join(figures)}" + (f"\n    {prose}" if prose else "")
    if check is not None and not check.passed and check.output.strip():
        # what the check said last (a test runner's summary): the reason it failed
        tail = [t for t in check.output.strip().splitlines() if t.strip()][-CHECK_LINES:]
        out += "".join(f"\n    │ {clip(t.strip(), width - 2)}" for t in tail)
    return out


def _opening(prose: list[str], width: int) -> str:
    """The first words of the answer: only as many lines as fill a card's line (cards are
    drawn every frame while variants stream; the prose only grows)."""
    words: list[str] = []
    for line in prose:
        words += line.split()
        if sum(map(len, words)) + len(words) > width:
            break
    return " ".join(words)
