"""What `steer run` shows while it works (stderr) and reports when done (--json).

On a terminal, what the model, a server or an agent says passes the boundary for outside
text (app/view/outside_text.py) on its way to the screen: an escape sequence in an answer
must not set the user's window title, clear the screen or write the clipboard. Elsewhere
(a pipe, a file) it is passed through as it came."""

from __future__ import annotations

import asyncio
import shutil
from typing import TextIO

from app.core.conversation.session import Session, Turn
from app.core.review.review import Outcome
from app.core.text.masking import StreamMask
from app.view.frames import FrameSync
from app.view.outside_text import terminal, terminal_line
from app.view.render import unified
from app.view.status import retry_line, status_text

DIM, RESET, CLEAR = "\x1b[2m", "\x1b[0m", "\r\x1b[2K"


class LiveStatus:
    """Streams the answer to stderr. On a terminal the last line is the live status, with the
    line being written; elsewhere the text passes through and one summary line follows. It
    reads the session through a FrameSync, as the terminal app does."""

    def __init__(self, out: TextIO, session: Session, *, enabled: bool = True, hz: float = 20.0) -> None:
        self.out = out
        self.session = session
        self.sync = FrameSync(session, mode="raw")  # steer run prints what the model sent
        self.enabled = enabled
        self.tty = out.isatty()
        self.period = 1.0 / hz
        self._partial = ""
        self._midline = False  # not a terminal: the last text written did not end its line
        # the answer's key values masked before the line is drawn: a frame redraws the line
        # being written, and must not show the start of a key whose rest is still to come
        self._mask = StreamMask()
        self._retries: tuple[Turn | None, int] = (None, 0)  # announced retries printed
        self._noted: tuple[Turn | None, set[str]] = (None, set())  # steer's notes printed

    async def follow(self) -> None:
        while True:
            self.flush()
            await asyncio.sleep(self.period)

    def flush(self) -> None:
        frame = self.sync.take()
        turn = self.session.turn
        if not self.enabled or turn is None:
            return
        new = self._mask.feed("".join(p.text for p in frame.answer
                                      if p.style == "text" and not p.line))
        # each retry the back-end announced, on a line of its own (they come before any text)
        notes = "".join(f"steer: {retry_line(r)}\n" for r in self._new_retries(turn))
        notes += "".join(f"steer: {title}\n" for title in self._new_notes(turn))
        if not self.tty:
            if new or notes:
                # a note is a line of its own, also when it comes in the middle of one of the
                # answer's (an agent's update between two words)
                text = ("\n" if notes and self._midline else "") + notes + new
                self.out.write(text)
                self.out.flush()
                self._midline = not text.endswith("\n")
            return
        text = self._partial + new
        *done, self._partial = text.split("\n")
        width = shutil.get_terminal_size((100, 20)).columns
        status = terminal(status_text(self.session.provider, turn), dim=False)
        room = max(0, width - len(status) - 3)
        shown, cols = terminal_line(self._partial.removesuffix("\r"), room)
        lines = "".join(terminal(line.removesuffix("\r")) + "\n" for line in done)
        self.out.write(f"{CLEAR}{terminal(notes)}{lines}{shown}{' ' * (room - cols)} "
                       f"{DIM}{status}{RESET}")
        self.out.flush()

    def _new_retries(self, turn: Turn) -> list:
        seen_turn, seen = self._retries
        if seen_turn is not turn:
            seen = 0
        self._retries = (turn, len(turn.retries))
        return turn.retries[seen:]

    def _new_notes(self, turn: Turn) -> list[str]:
        """steer's own notes on an agent's turn (a step of kind "steer", e.g. an update it
        could not read), each once."""
        seen_turn, seen = self._noted
        if seen_turn is not turn:
            seen = set()
            self._noted = (turn, seen)
        new = [t for t in turn.tools.values() if t.id not in seen and (t.kind == "steer" or (
            t.kind == "lookup" and t.status in ("completed", "failed")))]  # a look-up's card
        seen.update(t.id for t in new)
        return [t.title for t in new]

    def close(self) -> None:
        turn = self.session.turn
        if not self.enabled or turn is None:
            return
        self.flush()
        held = self._mask.end()  # the answer ended: what could have begun a key is not one
        status = status_text(self.session.provider, turn)
        if self.tty:
            last = terminal((self._partial + held).removesuffix("\r"))
            self.out.write(f"{CLEAR}{last}\n{DIM}{terminal(status, dim=False)}{RESET}\n")
        else:
            self.out.write(f"{held}\n[{status}]\n")
        self.out.flush()


def report(session: Session, turn: Turn, outcome: Outcome | None, code: int) -> dict:
    pending = session.pending
    assert pending is not None
    return {
        "exit_code": code,
        "instruction": turn.instruction,
        "provider": session.provider.name,
        "model": session.provider.model,
        "format": session.fmt,
        "format_reason": session.fmt_reason,
        "sent_in_full": session.sent.full or None,  # why it did not continue the conversation
        "rules": session.rules_now.sources if session.rules_now is not None else [],
        "stats": {
            "state": turn.state,
            "finish_reason": turn.finish_reason,
            "connect_s": turn.connect_time,
            "ttft_s": turn.ttft,
            "tokens": turn.tokens,
            "tokens_per_s": turn.tokens_per_s,
            "server_tokens_per_s": turn.server_tokens_per_s,
            "elapsed_s": turn.elapsed,
            "prompt_tokens": turn.usage.prompt if turn.usage else None,
            "accepted_prediction_tokens": turn.usage.accepted_prediction if turn.usage else None,
            "rejected_prediction_tokens": turn.usage.rejected_prediction if turn.usage else None,
        },
        "error": {"kind": turn.error.kind, "message": turn.error.message} if turn.error else None,
        "explanation": explanation(pending.prose),
        "files": [
            {
                "path": fd.path,
                "created": fd.created,
                "deleted": fd.deleted,
                "move_to": fd.move_to,
                "errors": fd.errors,
                "hunks": [
                    {"id": h.id, "state": h.state.value, "incomplete": h.incomplete,
                     "old_start": h.base_start + 1, "old_lines": len(h.old), "removed": h.old,
                     "added": h.new, "note": h.note, "warning": h.warning}
                    for h in fd.hunks
                ],
            }
            for fd in pending.files.values()
        ],
        "edit_errors": [{"path": e.path, "message": e.message} for e in pending.errors],
        # an agent's (--agent) last plan and its tool calls
        "plan": [{"content": p.content, "status": p.status} for p in turn.plan],
        "tool_calls": [{"id": t.id, "title": t.title, "kind": t.kind, "status": t.status}
                       for t in turn.tools.values()],
        # the repository map as the request found it, and its look-ups (kind "lookup" above)
        "map": session.knowledge.line() if session.knowledge is not None else None,
        "accepted": outcome.accepted if outcome else [],
        "conflicts": outcome.conflicts if outcome else [],
        "written": outcome.written if outcome else [],
        "not_written": outcome.not_written if outcome else [],
        "recovered": outcome.recovered if outcome else [],
        "diff": unified(pending),
    }


def explanation(prose: list[str]) -> str:
    """The answer's words around its edits: the blank lines each edit block left in their
    place folded into one paragraph break."""
    out: list[str] = []
    for line in prose:
        if line.strip() or (out and out[-1].strip()):
            out.append(line.rstrip())
    return "\n".join(out).strip()
