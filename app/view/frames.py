"""FrameSync: everything that changed since the last frame, as plain data.

A front-end takes one frame per screen refresh (the TUI at Textual's refresh tick, `steer
run` on its status tick). FrameSync owns the read cursors into the session — which turn is
shown and how much of its text, how many prose lines and edit errors of the pending diff,
which files changed — and returns a `Frame`: the text to append to the answer and
explanation panes, the files whose diff changed with their open-hunk counts, the turn that
started or ended, and the status texts when they are due. Pulling once per frame instead of
pushing per token is what lets a front-end keep up with any rate: a frame costs what
arrived since the last one, never the number of tokens.

Two throttles live here because they are about what a frame contains, not how it is drawn:
while an answer streams, changed files are handed out at most every DIFF_EVERY seconds (the
diff pane and the answer pane drawn in the same frame make most of the screen dirty, so the
diff's changes wait a frame or two and go together), and the bottom line changes at most
once a second (a full-width line changing with the panes would widen every repaint).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from app.core.diff import OPEN, HunkState, PendingDiff
from app.core.session import Session, Turn
from app.view.status import answer_title, review_line

DIFF_EVERY = 0.05  # while streaming, changed files at most 20 times a second
TITLE_EVERY = 0.1  # the answer's live figures
STATUS_EVERY = 1.0  # the bottom line, while an answer streams

TURN_LABEL = {"redirect": "↪ redirect", "follow-up": "› follow-up", "ask": "›"}


@dataclass(slots=True)
class Piece:
    """Text for a pane: appended as it is, or (`line`) as a whole line of its own."""

    text: str
    style: str = "text"  # text | user | dim | error
    line: bool = False


@dataclass(slots=True)
class Ended:
    turn: Turn
    superseded: bool  # a redirect or queued follow-up took over: the user is mid-flow
    failure: str | None = None  # why the answer stopped, when it failed


@dataclass
class Frame:
    answer: list[Piece] = field(default_factory=list)
    explanation: list[Piece] = field(default_factory=list)
    clear_explanation: bool = False
    new_change_set: PendingDiff | None = None  # a fresh pending diff replaced the last one
    dirty: set[str] = field(default_factory=set)  # files whose hunks changed
    open_counts: dict[str, int] = field(default_factory=dict)  # for dirty files: open + streaming
    created: set[str] = field(default_factory=set)  # dirty files the proposal creates
    started: Turn | None = None
    ended: list[Ended] = field(default_factory=list)
    title: str | None = None  # the answer pane's title, when it changed
    status: str | None = None  # the bottom line, when it changed

    @property
    def changed(self) -> bool:
        """Content changed (titles alone do not count: they tick with the clock)."""
        return bool(self.answer or self.explanation or self.clear_explanation or self.dirty
                    or self.started or self.ended or self.new_change_set is not None)


class FrameSync:
    def __init__(self, session: Session, clock: Callable[[], float] = time.perf_counter) -> None:
        self.session = session
        self.clock = clock
        self.turn: Turn | None = None  # the turn on screen
        self.chunks = 0  # its chunks taken so far (the one read cursor into the answer)
        self._pending: PendingDiff | None = None
        self._prose = 0
        self._last_prose: str | None = None
        self._errors = 0
        self._explained = False  # the explanation pane has text
        self._was_live = False
        self._diff_at = self._title_at = self._status_at = float("-inf")
        self._title: str | None = None
        self._status: str | None = None

    def take(self, force_status: bool = False) -> Frame:
        session = self.session
        session.take_data()
        now = self.clock()
        f = Frame()
        self._pull_chunks(f)  # the last words of the turn on screen first: a redirect ends it
        pending = session.pending
        if pending is not None:
            self._pull_pending(f, pending, now)
        turn = session.turn
        if turn is not self.turn and turn is not None:
            if self.turn is not None and self._was_live and not self.turn.live:
                f.ended.append(self._end(f, self.turn, superseded=True))
            self._begin(f, turn)
            self._pull_chunks(f)
        live = turn is not None and turn.live
        if self._was_live and not live and turn is not None:
            f.ended.append(self._end(f, turn, superseded=False))
        self._was_live = live
        self._texts(f, now, force=force_status or (f.changed and not live))
        return f

    # -- the answer ------------------------------------------------------------------------
    def _pull_chunks(self, f: Frame) -> None:
        turn = self.turn
        if turn is not None and self.chunks < len(turn.chunks):
            f.answer.append(Piece("".join(turn.chunks[self.chunks :])))
            self.chunks = len(turn.chunks)

    def _begin(self, f: Frame, turn: Turn) -> None:
        label = TURN_LABEL[turn.kind]
        if self.turn is not None:
            f.answer.append(Piece("", line=True))
        f.answer.append(Piece(f"{label} {turn.instruction}", "user", line=True))
        if turn.kind != "ask" and self._explained:
            f.explanation.append(Piece(f"── {label}: {turn.instruction}", "dim", line=True))
        self.turn, self.chunks = turn, 0
        self._was_live = True
        f.started = turn

    def _end(self, f: Frame, turn: Turn, *, superseded: bool) -> Ended:
        failure = None
        if turn.state == "interrupted":
            f.answer.append(Piece("■ interrupted", "dim", line=True))
        elif turn.error is not None:
            failure = turn.error.message
            f.answer.append(Piece(f"✗ {failure}", "error", line=True))
        elif turn.finish_reason == "length":
            f.answer.append(Piece("✗ the answer hit the token limit; its last edit is incomplete",
                                  "error", line=True))
        return Ended(turn, superseded, failure)

    # -- the pending diff ------------------------------------------------------------------
    def _pull_pending(self, f: Frame, pending: PendingDiff, now: float) -> None:
        if pending is not self._pending:
            self._pending, self._prose, self._errors, self._last_prose = pending, 0, 0, None
            self._explained = False
            f.clear_explanation = True
            f.new_change_set = pending
        if self._prose < len(pending.prose):
            for line in pending.prose[self._prose :]:
                if line.strip() or (self._last_prose and self._last_prose.strip()):
                    f.explanation.append(Piece(line, line=True))  # blank runs collapse to one
                    self._explained = True
                self._last_prose = line
            self._prose = len(pending.prose)
        if self._errors < len(pending.errors):
            for err in pending.errors[self._errors :]:
                f.explanation.append(Piece(f"⚠ {err.message}", "error", line=True))
            self._errors = len(pending.errors)
            self._explained = True
        turn = self.session.turn
        if turn is not None and turn.live and now - self._diff_at < DIFF_EVERY:
            return
        dirty = pending.take_dirty()
        if not dirty:
            return
        self._diff_at = now
        f.dirty = dirty
        for p in dirty & pending.files.keys():
            fd = pending.files[p]
            f.open_counts[p] = sum(1 for h in fd.hunks
                                   if h.state in OPEN or h.state == HunkState.STREAMING)
            if fd.created and fd.hunks:
                f.created.add(p)

    # -- texts -----------------------------------------------------------------------------
    def _texts(self, f: Frame, now: float, force: bool) -> None:
        turn = self.session.turn
        if force or now - self._title_at >= TITLE_EVERY:
            self._title_at = now
            title = answer_title(turn, self.session)
            if title != self._title:
                self._title = f.title = title
        live = turn is not None and turn.live
        if force or now - self._status_at >= (STATUS_EVERY if live else TITLE_EVERY):
            self._status_at = now
            status = review_line(self.session)
            if status != self._status:
                self._status = f.status = status
