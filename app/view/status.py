"""The live status texts: one wording for the terminal app and `steer run`.

The bottom line and the answer's title are `StatusLine`s: text made of " · " parts, each
with a rank, so the terminal app fits them to a narrow terminal by dropping whole parts,
never by cutting a word at the edge."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from rich.cells import cell_len
from rich.segment import Segment

from app.core.conversation.session import Session, Turn
from app.core.edits.diff import PendingDiff
from app.core.edits.hunks import OPEN, HunkState
from app.core.events import Retrying
from app.core.provider import Provider
from app.core.text.plural import plural

SEP = " · "


@dataclass(frozen=True, slots=True)
class Part:
    text: str
    rank: int = 0  # a line too narrow for every part drops the highest rank first


class StatusLine(str):
    """The bottom line: its text, and the parts it is made of, so that a narrow terminal
    drops whole parts (the least useful first) instead of cutting a word in two."""

    parts: tuple[Part, ...]

    def __new__(cls, parts: list[Part]) -> StatusLine:
        line = super().__new__(cls, SEP.join(p.text for p in parts))
        line.parts = tuple(parts)
        return line

    def fit(self, width: int) -> str:
        return fit(self.parts, width)


def fit(parts: tuple[Part, ...] | list[Part], width: int) -> str:
    """The parts that fit in `width` cells, in their order, joined by " · ". The highest
    rank goes first (the later of equals); parts gone after the last one shown leave a "…".
    A last part still too wide is cut after a whole word, with "…"."""
    kept = list(parts)

    def line(ps: list[Part]) -> str:
        text = SEP.join(p.text for p in ps)
        return text + (SEP + "…" if ps and ps[-1] is not parts[-1] else "") if ps else "…"

    while len(kept) > 1 and cell_len(line(kept)) > width:
        worst = max(p.rank for p in kept)
        kept.remove([p for p in kept if p.rank == worst][-1])
    return clip(line(kept), width)


def clip_segments(segments: list[Segment], width: int) -> list[Segment]:
    """Styled runs of one line (escapes dimmed, say) cut as `clip` cuts their text: after a
    whole word, with "…" in the style of the run it ends."""
    plain = "".join(seg.text for seg in segments)
    if cell_len(plain) <= width:
        return segments
    n = len(clip(plain, width)) - 1  # the characters kept, before the "…"
    out: list[Segment] = []
    for seg in segments:
        if n <= 0:
            break
        out.append(Segment(seg.text[:n], seg.style) if len(seg.text) > n else seg)
        n -= len(seg.text)
    last = out[-1].style if out else (segments[0].style if segments else None)
    return [*out, Segment("…", last)]


def clip(text: str, width: int) -> str:
    """`text` in at most `width` cells, cut after a whole word with "…" when it does not fit
    (a single word wider than the line is cut where the line ends). The one cut every line
    steer draws goes through: a title, a card, a status or a footer never ends in half a
    word."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return "…"[:max(0, width)]
    cells, n = 0, 0
    for ch in text:  # (cells, not characters: a wide character counts two)
        cells += cell_len(ch)
        if cells > width - 1:
            break
        n += 1
    cut = text[:n]
    if text[n] != " ":  # the cut fell inside a word
        space = cut.rfind(" ")
        if space > 0:
            cut = cut[:space]
    return cut.rstrip(" ·,:;") + "…"


STALL_SHOWN = 3.0  # seconds without data from the back-end before the title says so


def _seconds(x: float) -> str:
    """A countdown: tenths under a second ("0.4 s"), else whole seconds rounded up."""
    tenths = math.ceil(x * 10) / 10
    return f"{tenths:.1f} s" if tenths < 1 else f"{math.ceil(x)} s"


def waiting(turn: Turn, now: float | None = None, *, user: bool = False
            ) -> tuple[str, str | None] | None:
    """What a live answer waits for, when it waits, and why: the countdown of a retry the
    back-end announced ("retrying 2/3 in 1 s", "HTTP 500"), or the back-end's silence once
    it lasts STALL_SHOWN seconds ("no data for 12 s", counting up each frame), unless it is
    the `user` it waits for (an agent asking for a permission or a decision)."""
    if not turn.live:
        return None
    now = time.perf_counter() if now is None else now
    left = turn.retry_in(now)
    if left is not None:
        r = turn.retries[-1]
        return f"retrying {r.attempt}/{r.attempts} in {_seconds(left)}", r.reason
    quiet = turn.quiet(now)
    if quiet >= STALL_SHOWN and not user:
        return f"no data for {int(quiet)} s", None
    return None


def retry_line(r: Retrying) -> str:
    """One announced retry, as the conversation and `steer run` keep it: "HTTP 500: retrying
    2/3 in 0.5 s"."""
    return f"{r.reason}: retrying {r.attempt}/{r.attempts} in {r.delay:g} s"


def figure_parts(turn: Turn, now: float | None = None, stop_hint: str = "",
                 user: bool = False) -> list[str]:
    """["streaming", "1,234 tok/s", "567 tok", "ttft 80ms", "2.1s"]: what matters most first,
    so a narrow pane drops the least useful figures. While the answer waits (a retry, a stall)
    that comes right after the state; with a `stop_hint` (the app's "Esc to stop") it comes
    first, the hint after it: "retrying 2/3 in 1 s · Esc to stop · HTTP 500 · 0 tok · 1.2s"."""
    rate = turn.tokens_per_s
    ttft = turn.ttft
    usage = turn.usage
    predicted = None
    if usage is not None and usage.accepted_prediction is not None:
        predicted = (f"predicted {usage.accepted_prediction}/"
                     f"{usage.accepted_prediction + (usage.rejected_prediction or 0)} tok kept")
    wait = waiting(turn, now, user=user)
    retried = None
    if turn.retries and (wait is None or wait[1] is None):
        n = len(turn.retries)
        retried = f"{n} retr{'y' if n == 1 else 'ies'} ({turn.retries[-1].reason})"
    head: list[str | None]
    if wait is None:
        head = [turn.state]
    elif stop_hint:  # the app's narrow pane: the wait and the way out first, the state implied
        head = [wait[0], stop_hint, wait[1]]
    else:  # `steer run`: "connecting · retrying 2/3 in 1 s (HTTP 500)"
        head = [turn.state, wait[0] + (f" ({wait[1]})" if wait[1] else "")]
    parts = [*head,
             f"{rate:,.0f} tok/s" if rate else None,
             f"{turn.tokens} tok",
             predicted,
             f"ttft {ttft * 1000:.0f}ms" if ttft is not None else None,
             retried,
             f"{turn.elapsed:.1f}s"]
    return [p for p in parts if p]


def turn_figures(turn: Turn, now: float | None = None) -> str:
    """"streaming · 1,234 tok/s · 567 tok · ttft 80ms · 2.1s"."""
    return SEP.join(figure_parts(turn, now))


def status_text(provider: Provider, turn: Turn) -> str:
    """The figures with the provider in front (`steer run`'s status line)."""
    return f"{provider.label} · {turn_figures(turn)}"


# what a narrow conversation pane keeps of a figure, by its first word: the state and the
# live figures (rate, tokens, time) stay; the time to first token, retries, predictions and
# the format's reason go first
_LESSER = ("ttft ", "predicted ", "retr")


def _figure_rank(i: int, text: str) -> int:
    if i == 0:
        return 1  # the state (or the wait, and the way out)
    return 4 if text.startswith(_LESSER) else 2


def answer_title(turn: Turn | None, session: Session | None = None, raw: bool = False) -> StatusLine:
    """"Conversation · figures · format whole: why": the format chosen for the answer and why,
    last. A narrow pane drops the lesser parts first and keeps the live figures."""
    head = "Conversation (raw: what the model sent)" if raw else "Conversation"
    if turn is not None and session is not None and session.sent.full and turn is session.turn:
        # the conversation did not continue (DESIGN rule 10): part of the head, so a narrow
        # pane drops the figures first and cuts the reason before it drops the fact
        head += f" · sent in full ({session.sent.full})"
    parts = [Part(head, 0)]
    if turn is not None:
        user = session is not None and session.agent.waiting_for_user
        figures = figure_parts(turn, stop_hint="Esc to stop", user=user)
        parts += [Part(t, _figure_rank(i, t)) for i, t in enumerate(figures)]
        if turn.check:  # the proposal's check (variants/proposal_check.py), kept when narrow
            parts.insert(1, Part(turn.check, 1))
        if session is not None and session.fmt_reason and turn is session.turn:
            parts.append(Part(f"format {session.fmt}: {session.fmt_reason}", 5))
    note = waiting_note(session, True, False, "Ctrl+G", "Ctrl+D") if session is not None else ""
    if note:  # after the state: what the user does next (the key bar says it too, so a
        parts.insert(min(2, len(parts)), Part(note, 3))  # narrow pane keeps the figures)
    return StatusLine(parts)


def waiting_note(session: Session, typing: bool, draft: bool, answer_key: str,
                 review_key: str) -> str:
    """What waits for the user and the key to it, said instead of moving the keys there
    (DESIGN rule 8): an agent's question ("the agent asks: Ctrl+G"), or once nothing streams,
    the open hunks, told to someone `typing` in the prompt ("3 hunks to review: Tab"; with
    a `draft` Tab would send it, so the review's own key)."""
    if session.agent.permissions:
        return f"the agent asks: {answer_key}"
    if not typing or session.streaming or session.pending is None:
        return ""
    n = sum(1 for h in session.pending.hunks if h.state in OPEN)
    key = review_key if draft else "Tab"
    return f"{n} hunk{'s' if n != 1 else ''} to review: {key}" if n else ""


def hunk_counts(pending: PendingDiff) -> dict[str, int]:
    counts = {"open": 0, "accepted": 0, "rejected": 0, "streaming": 0, "conflict": 0,
              "flagged": 0, "superseded": 0}
    for h in pending.hunks:
        if h.state in OPEN:
            counts["open"] += 1
            if h.state == HunkState.CONFLICT:
                counts["conflict"] += 1
            if h.warning:  # open, and left out of bulk accepts
                counts["flagged"] += 1
        elif h.state == HunkState.ACCEPTED:
            counts["accepted"] += 1
        elif h.state == HunkState.REJECTED:
            counts["rejected"] += 1
        elif h.state == HunkState.SUPERSEDED:
            counts["superseded"] += 1
        else:
            counts["streaming"] += 1
    return counts


def review_parts(session: Session) -> list[Part]:
    """The bottom line's parts: the back-end (rank 3: the header shows it too), the format
    (2), the hunks (0), the answer's state and what needs the user (1)."""
    turn, pending = session.turn, session.pending
    parts = [Part(session.provider.label, 3),
             Part(f"format {session.fmt if turn else session.fmt_choice}", 2)]
    if turn is None or pending is None:
        return parts + [Part("idle: type an instruction below")]
    c = hunk_counts(pending)
    n = sum(c[k] for k in ("open", "accepted", "rejected", "streaming", "superseded"))
    hunks = f"{n} hunk{'s' if n != 1 else ''}: {c['open']} open"
    if c["streaming"]:
        hunks += f", {c['streaming']} streaming"
    hunks += f", {c['accepted']} accepted, {c['rejected']} rejected"
    if c["superseded"]:
        hunks += f", {c['superseded']} superseded"
    parts += [Part(turn.state, 1), Part(hunks)]  # the answer's title shows the state too
    if c["flagged"]:
        # flagged: a deletion nobody asked for, invisible characters, or before a redirect
        parts.append(Part(f"⚠ {plural(c['flagged'], 'flagged hunk')}: not in accept all, "
                          "y takes one", 1))
    refused = sum(1 for e in pending.errors if e.turn == pending.turn)
    if refused:
        parts.append(Part(f"{refused} edit{'s' if refused != 1 else ''} refused (r retries)", 1))
    return parts


def review_line(session: Session) -> StatusLine:
    """The bottom line: the back-end, the format, and where the review stands."""
    return StatusLine(review_parts(session))
