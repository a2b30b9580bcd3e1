"""Edit cards: one live line per edit block of an answer, in place of its wire text.

The diff pane shows the change itself; the conversation only needs to say which file, which
hunks, where they stand and how big they are, and to lead there (Enter or a click).
"""

from __future__ import annotations

from collections.abc import Sequence

from app.core.edits.hunks import OPEN, REDIRECTED, Card, Hunk, HunkState

_STATE = {HunkState.STREAMING: "streaming", HunkState.PENDING: "pending",
          HunkState.ACCEPTED: "accepted", HunkState.REJECTED: "rejected",
          HunkState.CONFLICT: "conflict", HunkState.STALE: "stale",
          HunkState.SUPERSEDED: "superseded"}


def hunks_of(cards: Sequence[Card], by_id: dict[int, Hunk]) -> list[Hunk]:
    seen: dict[int, Hunk] = {}
    for card in cards:
        for i in card.hunk_ids():
            h = by_id.get(i)
            if h is not None:
                seen[i] = h
    return list(seen.values())


def card_text(cards: Sequence[Card], by_id: dict[int, Hunk]) -> tuple[str, str]:
    """(text, style) of one line for consecutive cards of one file."""
    first = cards[0]
    path = first.path or "(no file named)"
    errors = [_one_line(c.error, path) for c in cards if c.error]
    hunks = hunks_of(cards, by_id)
    if errors and not hunks:
        return f"⚠ {path}: {errors[0]}", "error"
    streaming = any(not c.done for c in cards)
    added = sum(len(h.new) for h in hunks)
    removed = sum(len(h.old) for h in hunks)
    verb = {"add": "new file", "delete": "delete", "whole": "whole file"}.get(first.kind, "")
    head = f"✎ {path}" + (f" ({verb})" if verb else "")
    if streaming:
        ids = " ".join(f"#{h.id}" for h in hunks)
        lines = sum(c.lines for c in cards)
        return _join(head, ids, f"streaming · {lines} lines"), "card-live"
    states = {h.state for h in hunks}
    if len(states) == 1:  # one word for all
        (state,) = states
        ids = " ".join(f"#{h.id}" for h in hunks)
        text = _join(head, ids, _STATE[state], f"+{added} −{removed}")
        style = "card-live" if state == HunkState.STREAMING else f"card-{_STATE[state]}"
    else:  # a mark per hunk: ✓ accepted, ✗ rejected, ! conflict, ~ stale, none: open
        ids = " ".join(f"#{h.id}{_MARK.get(h.state, '')}" for h in hunks)
        text = _join(head, ids, f"+{added} −{removed}")
        style = "card-mixed"
    if not hunks:
        gone = any(i not in by_id for c in cards for i in c.hunk_ids())
        # hunks it had, gone: a later answer's edit of the same lines took their place; none
        # at all: it proposed what the file already holds
        text, style = _join(head, "replaced by a later answer" if gone else "already on disk"), \
            "card-mixed"
    if any(h.redirected and h.state in OPEN for h in hunks):  # Accept all leaves them
        text += f"  ⚠ {REDIRECTED}"
    if errors:
        text += f"  ⚠ {errors[0]}"
    return text, style


STYLES = ("card-live", "card-pending", "card-accepted", "card-rejected", "card-conflict",
          "card-stale", "card-superseded", "card-mixed")  # every style card_text gives (the pane defines them all)

_MARK = {HunkState.ACCEPTED: "✓", HunkState.REJECTED: "✗", HunkState.CONFLICT: "!",
         HunkState.STALE: "~", HunkState.STREAMING: "…", HunkState.SUPERSEDED: "↷"}


def _join(*parts: str) -> str:
    return "  ".join(p for p in parts if p)


def _one_line(error: str, path: str) -> str:
    """An edit error as one line: its first, without the file name the card shows anyway."""
    line = error.strip().split("\n", 1)[0].rstrip(":")
    return line.removeprefix(f"{path}: ")
