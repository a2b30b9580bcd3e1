"""The live status texts: one wording for the terminal app and `steer run`."""

from __future__ import annotations

import math
import time

from app.core.diff import OPEN, HunkState, PendingDiff
from app.core.events import Retrying
from app.core.provider import Provider
from app.core.session import Session, Turn

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


def turn_figures(turn: Turn, now: float | None = None, stop_hint: str = "",
                 user: bool = False) -> str:
    """"streaming · 1,234 tok/s · 567 tok · ttft 80ms · 2.1s": what matters most first, so a
    narrow pane crops the least useful figures. While the answer waits (a retry, a stall)
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
    return " · ".join(p for p in parts if p)


def status_text(provider: Provider, turn: Turn) -> str:
    """The figures with the provider in front (`steer run`'s status line)."""
    return f"{provider.label} · {turn_figures(turn)}"


def answer_title(turn: Turn | None, session: Session | None = None, raw: bool = False) -> str:
    """"Conversation · figures · format whole: why": the format chosen for the answer and why,
    last (a narrow pane crops it before the figures)."""
    head = "Conversation (raw: what the model sent)" if raw else "Conversation"
    if turn is None:
        return head
    fmt = ""
    if session is not None and session.fmt_reason and turn is session.turn:
        fmt = f" · format {session.fmt}: {session.fmt_reason}"
    user = session is not None and session.agent.waiting_for_user
    return f"{head} · {turn_figures(turn, stop_hint='Esc to stop', user=user)}{fmt}"


def hunk_counts(pending: PendingDiff) -> dict[str, int]:
    counts = {"open": 0, "accepted": 0, "rejected": 0, "streaming": 0, "conflict": 0,
              "flagged": 0}
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
        else:
            counts["streaming"] += 1
    return counts


def review_line(session: Session) -> str:
    """The bottom line: the back-end, the format, and where the review stands."""
    turn, pending = session.turn, session.pending
    text = f"{session.provider.label} · format {session.fmt if turn else session.fmt_choice}"
    if turn is None or pending is None:
        return text + " · idle: type an instruction below"
    c = hunk_counts(pending)
    n = sum(c[k] for k in ("open", "accepted", "rejected", "streaming"))
    text += f" · {turn.state} · {n} hunk{'s' if n != 1 else ''}: {c['open']} open"
    if c["streaming"]:
        text += f", {c['streaming']} streaming"
    text += f", {c['accepted']} accepted, {c['rejected']} rejected"
    if c["flagged"]:
        text += (f" · ⚠ {c['flagged']} large deletion{'s' if c['flagged'] != 1 else ''}: not in "
                 "accept all")
    refused = sum(1 for e in pending.errors if e.turn == pending.turn)
    if refused:
        text += f" · {refused} edit{'s' if refused != 1 else ''} refused (r retries)"
    return text
