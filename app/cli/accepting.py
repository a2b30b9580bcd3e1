"""What `steer run` writes and says about it: accept everything, and one line per file for
whatever was not written (DESIGN rule 9). Shared by a plain run and a run of variants."""

from __future__ import annotations

import sys

from app.core.text.plural import plural


def accept_all(review, ws):
    """Accept everything; whatever goes wrong, say exactly which files were written."""
    from app.core.disk.state_home import StateUnusable
    from app.core.review.review import Outcome

    try:
        return review.accept_all()
    except StateUnusable as exc:  # no journal, no write (rule 5): refused before any file
        return Outcome(messages=[f"nothing was written: {exc}"])
    except Exception as exc:  # a full disk, a lock held too long, a bug: never a traceback
        out = Outcome(messages=[f"the accept stopped: {type(exc).__name__}: {exc}"])
        try:
            for e in review.journal.recover(ws):
                out.written += e.written
                out.not_written += e.notes
                out.recovered.append(f"completed the interrupted accept ({e.label})")
        except Exception as again:  # as above: said, never a traceback
            out.messages.append(f"it is not complete ({again}); any steer command that writes, "
                                "or `steer undo`, completes it")
        return out


def left_open(pending, flagged: bool = False) -> list[str]:
    """After --accept all: each file with hunks still open, and why each was left
    (`flagged`: only those a bulk accept would leave: conflicts, flagged hunks)."""
    from app.core.edits.hunks import OPEN, HunkState

    why = {HunkState.CONFLICT: "conflicts with your change on disk", HunkState.STALE: "stale"}
    lines = []
    for fd in pending.files.values():
        open_ = [h for h in fd.hunks if h.state in OPEN and
                 (not flagged or h.warning or h.state != HunkState.PENDING)]
        if not open_:
            continue
        parts = []
        for h in open_:
            if h.state == HunkState.PENDING:
                reason = (f"{h.warning} (left for a deliberate accept)" if h.warning else
                          "the answer stopped inside it" if h.incomplete else "not accepted")
            else:
                reason = f"{why[h.state]}: {h.note}" if h.note else why[h.state]
            parts.append(f"hunk #{h.id} at line {h.base_start + 1}: {reason}")
        lines.append(f"{fd.path}: {plural(len(open_), 'hunk')} left: " + "; ".join(parts))
    return lines


def report_accept(out) -> None:
    for msg in out.recovered:
        print(f"steer: {msg}", file=sys.stderr)
    for msg in out.messages:
        print(f"steer: {msg}", file=sys.stderr)
    if out.written:
        print(f"steer: accepted {plural(len(out.accepted), 'hunk')}, wrote {', '.join(out.written)}",
              file=sys.stderr)
    for why in out.not_written:
        print(f"steer: not written: {why}", file=sys.stderr)
    if out.written and not out.ok:
        print("steer: `steer undo` reverts the files that were written", file=sys.stderr)
