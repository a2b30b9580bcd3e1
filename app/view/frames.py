"""FrameSync: everything that changed since the last frame, as plain data.

A front-end takes one frame per screen refresh (the TUI at Textual's refresh tick, `steer
run` on its status tick). FrameSync owns the read cursors into the session — which turn is
shown, how far into the answer's transcript (its prose and edit cards, in the order the
model wrote them) or its raw text, which files changed — and returns a `Frame`: what to
append to the conversation, the cards whose line changed, the files whose diff changed
with their open-hunk counts, the turn that started or ended, and the status texts when they
are due. Pulling once per frame instead of pushing per token is what lets a front-end keep
up with any rate: a frame costs what arrived since the last one, never the number of tokens.

Two views of an answer: the conversation (default) shows prose as it streams — finished
lines, then the tentative tail the parser has not placed yet — and one live card per edit
block instead of its wire text; raw shows exactly what the model sent.

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
from typing import Literal

from app.core.conversation.session import Session, Turn
from app.core.edits.diff import PendingDiff
from app.core.edits.hunks import DECIDED, Card
from app.core.events import PermissionRequest
from app.core.text import masking
from app.core.variants.check import gist
from app.view.cards import card_text
from app.view.status import answer_title, retry_line, review_line

DIFF_EVERY = 0.05  # while streaming, changed files at most 20 times a second
TITLE_EVERY = 0.1  # the answer's live figures
STATUS_EVERY = 1.0  # the bottom line, while an answer streams

TURN_LABEL = {"redirect": "↪ redirect", "follow-up": "› follow-up", "ask": "›"}


CHECK_LINES = 3  # of a failing check's output, under the answer (the rest: F sends it)


@dataclass(slots=True)
class Piece:
    """Something for the conversation pane:
    - `line`: a whole line of its own in `style` (user | dim | error);
    - style "md": prose to append (complete lines of Markdown);
    - style "tail": the answer's prose not yet final, replacing the last tail;
    - style "card-…" with `key`: an edit card's line, new or changed;
    - style "text": raw answer text (the raw view)."""

    text: str
    style: str = "text"
    line: bool = False
    key: int | None = None


@dataclass(slots=True)
class Ended:
    turn: Turn
    superseded: bool  # a redirect or queued follow-up took over: the user is mid-flow
    failure: str | None = None  # why the answer stopped, when it failed


@dataclass
class Frame:
    answer: list[Piece] = field(default_factory=list)
    new_change_set: PendingDiff | None = None  # a fresh pending diff replaced the last one
    dirty: set[str] = field(default_factory=set)  # files whose hunks changed
    open_counts: dict[str, int] = field(default_factory=dict)  # for dirty files: open + streaming
    created: set[str] = field(default_factory=set)  # dirty files the proposal creates
    started: Turn | None = None
    ended: list[Ended] = field(default_factory=list)
    title: str | None = None  # the answer pane's title, when it changed
    status: str | None = None  # the bottom line, when it changed
    permissions: list[PermissionRequest] = field(default_factory=list)  # new: ask the user

    @property
    def changed(self) -> bool:
        """Content changed (titles alone do not count: they tick with the clock)."""
        return bool(self.answer or self.dirty or self.started or self.ended
                    or self.new_change_set is not None or self.permissions)


@dataclass(eq=False)
class CardLine:
    """Consecutive cards of one file in one answer: one line in the conversation."""

    key: int
    cards: list[Card]
    text: str = ""
    seen: tuple = ()  # its cards' (done, error) and hunks' (id, rev) when its text was made
    drawn_live: bool = False  # a card of it was still streaming then

    @property
    def path(self) -> str | None:
        return self.cards[0].path

    @property
    def live(self) -> bool:
        return any(not c.done for c in self.cards)


class FrameSync:
    def __init__(self, session: Session, clock: Callable[[], float] = time.perf_counter,
                 mode: Literal["conversation", "raw"] = "conversation") -> None:
        self.session = session
        self.clock = clock
        self.mode = mode
        # what the front-end says under a request that failed before any answer, e.g. "F5
        # sends it again" (the app's retry key); None: nothing (`steer run`)
        self.retry_hint: str | None = None
        self._asked: set[int] = set()  # permission requests handed out (by id())
        self.restart()

    def restart(self) -> None:
        """Show everything again from the start (after a switch between the views)."""
        self.turn: Turn | None = None  # the turn on screen
        self.chunks = 0  # its chunks taken so far (the one read cursor into the raw answer)
        self.cards: list[CardLine] = []  # the card lines shown, by key
        self._done_turns = 0  # session turns already replayed (restart)
        self._pending: PendingDiff | None = None  # the change set of the turn on screen
        self._tx = 0  # its transcript items taken
        self._pturn = 0  # its number of the turn on screen
        self._seen: PendingDiff | None = None  # the session's change set, as last seen
        self._tail = ""
        self._was_live = False
        self._diff_at = self._title_at = self._status_at = float("-inf")
        self._title: str | None = None
        self._status: str | None = None
        self._reasoning = 0  # reasoning chunks of the turn taken
        self._thinking = False  # the answer pane is in the middle of reasoning text
        self._plan: tuple = ()  # the plan as last shown
        self._tools: dict[str, str | None] = {}  # tool call id -> status last shown
        self._checks: dict[int, str] = {}  # id(turn) -> the check's verdict last shown
        self._retries = 0  # the back-end's announced retries of the turn shown
        # text shown as it streams (the raw view, reasoning) never shows a key, nor its start
        self._raw, self._thought = masking.StreamMask(), masking.StreamMask()
        self._replay = list(self.session.turns[:-1])  # ended turns to show again first

    def take(self, force_status: bool = False) -> Frame:
        session = self.session
        session.take_data()
        now = self.clock()
        f = Frame()
        while self._replay:  # after a restart: the turns that are over, in full
            old = self._replay.pop(0)
            self._begin(f, old)
            self._pull_agent(f)
            self._pull_answer(f)
            self._end(f, old, superseded=True)
            self._pull_check(f, old)
            self._was_live = False
        self._pull_agent(f)
        self._pull_answer(f)  # the last words of the turn on screen first: a redirect ends it
        pending = session.pending
        if pending is not None:
            self._pull_pending(f, pending, now)
        turn = session.turn
        if turn is not self.turn and turn is not None:
            if self.turn is not None and self._was_live and not self.turn.live:
                f.ended.append(self._end(f, self.turn, superseded=True))
            self._begin(f, turn)
            self._pull_agent(f)
            self._pull_answer(f)
        live = turn is not None and turn.live
        if self._was_live and not live and turn is not None:
            self._end_tail(f)
            f.ended.append(self._end(f, turn, superseded=False))
        self._was_live = live
        self._pull_check(f, turn)
        self._update_cards(f, force=not live)
        self._texts(f, now, force=force_status or (f.changed and not live))
        if masking.known():  # no key value is ever drawn (DESIGN rule 6)
            self._mask(f)
        return f

    @staticmethod
    def _mask(f: Frame) -> None:
        """Whole pieces masked; the tail, redrawn whole as it grows, without an end that may
        start a key; streamed text was masked as it streamed (_raw, _thought)."""
        for p in f.answer:
            if p.style == "tail":
                p.text = masking.mask_shown(p.text)
            elif p.line or p.style not in ("text", "dim"):
                p.text = masking.mask(p.text)
        if f.title is not None:
            f.title = masking.mask(f.title)
        if f.status is not None:
            f.status = masking.mask(f.status)

    # -- the answer ------------------------------------------------------------------------
    def _pull_answer(self, f: Frame) -> None:
        turn = self.turn
        if turn is None:
            return
        if self.mode == "raw":
            if self.chunks < len(turn.chunks):
                if self._thinking:  # the answer proper starts on a line of its own
                    f.answer.append(Piece("", line=True))
                    self._thinking = False
                f.answer.append(Piece(self._raw.feed("".join(turn.chunks[self.chunks :]))))
                self.chunks = len(turn.chunks)
            return
        self.chunks = len(turn.chunks)
        pending = self._pending
        if pending is not None:
            items = pending.transcript
            while self._tx < len(items):
                item = items[self._tx]
                if (item.turn if isinstance(item, Card) else item[0]) > self._pturn:
                    break  # the next answer's: after its own first line
                self._tx += 1
                if self._thinking:
                    f.answer.append(Piece("", line=True))
                    self._thinking = False
                if isinstance(item, Card):
                    self._add_card(f, item, pending)
                else:
                    self._tail = ""
                    if item[1].strip():  # a card after words: a line of its own
                        self._last_key = -1
                    f.answer.append(Piece(item[1] + "\n", "md"))
        tail = writing(self.session.tentative) if turn is self.session.turn else ""
        if tail != self._tail:
            if self._thinking:
                f.answer.append(Piece("", line=True))
                self._thinking = False
            self._tail = tail
            f.answer.append(Piece(tail, "tail"))

    def _end_tail(self, f: Frame) -> None:
        if self._tail:
            self._tail = ""
            f.answer.append(Piece("", "tail"))

    def _add_card(self, f: Frame, card: Card, pending: PendingDiff) -> None:
        last = self.cards[-1] if self.cards else None
        if (last is not None and last.key == self._last_key and last.path == card.path
                and last.cards[0].turn == card.turn and not card.error and not last.cards[0].error):
            last.cards.append(card)  # another block of the same file, right after: one line
            line = last
        else:
            line = CardLine(len(self.cards), [card])
            self.cards.append(line)
        self._last_key = line.key
        self._tail = ""
        self._emit_card(f, line, {h.id: h for h in pending.hunks}, force=True)

    _last_key = -1  # the card line written last, when nothing came after it

    def card_hunks(self, key: int) -> list[int]:
        """The hunk ids of a card line (for jumping to them), those that still exist."""
        line = self.cards[key] if 0 <= key < len(self.cards) else None
        pending = self._pending
        if line is None or pending is None:
            return []
        ids = {h.id for h in pending.hunks}
        return [i for c in line.cards for i in c.hunk_ids() if i in ids]

    def _emit_card(self, f: Frame, line: CardLine, by_id, force: bool = False) -> None:
        # a card that ended with an error has no hunk to change: its own state counts too
        seen = (tuple((c.done, c.error) for c in line.cards),
                tuple((i, by_id[i].rev) for c in line.cards for i in c.hunk_ids() if i in by_id))
        if not force and not line.live and seen == line.seen:
            return  # none of its hunks changed: a file of 100 cards costs 100 lookups, no text
        line.seen, line.drawn_live = seen, line.live
        text, style = card_text(line.cards, by_id)
        if force or text != line.text:
            line.text = text
            f.answer.append(Piece(text, style, key=line.key))

    def _update_cards(self, f: Frame, force: bool) -> None:
        """Cards whose file changed (or that stream) say where they stand now."""
        pending = self._pending
        if pending is None or not self.cards:
            return
        # streaming, changed, or last drawn while streaming (it may have ended since)
        due = [c for c in self.cards if c.live or c.path in f.dirty or force or c.drawn_live]
        if due:
            by_id = {h.id: h for h in pending.hunks}
            for line in due:
                self._emit_card(f, line, by_id)

    def _pull_agent(self, f: Frame) -> None:
        """What a model thinks and an agent does besides writing: reasoning (dim), the plan
        and tool calls (a line each time they change), permission requests (to answer)."""
        turn = self.turn
        if turn is None:
            return
        if self._reasoning < len(turn.reasoning):
            if not self._thinking:
                f.answer.append(Piece("thinking… ", "dim"))
                self._thinking = True
            f.answer.append(Piece(self._thought.feed("".join(turn.reasoning[self._reasoning :])),
                                  "dim"))
            self._reasoning = len(turn.reasoning)
        while self._retries < len(turn.retries):  # each one visible, where it happened
            r = turn.retries[self._retries]
            self._retries += 1
            f.answer.append(Piece(f"↻ {retry_line(r)}", "dim", line=True))
        plan = tuple((p.content, p.status) for p in turn.plan)
        if plan != self._plan:
            self._plan = plan
            done = sum(1 for _, st in plan if st == "completed")
            now = next((c for c, st in plan if st == "in_progress"), None)
            text = f"▸ plan: {done}/{len(plan)} done" + (f" · now: {now}" if now else "")
            f.answer.append(Piece(text, "dim", line=True))
        for tid, call in turn.tools.items():
            if self._tools.get(tid, "") != call.status:
                self._tools[tid] = call.status
                if call.status in (None, "pending", "completed", "failed"):
                    mark = {"completed": "✓", "failed": "✗"}.get(call.status or "", "⚙")
                    f.answer.append(Piece(f"{mark} {call.title}", "dim", line=True))
        for req in self.session.agent.permissions:
            if id(req) not in self._asked:
                self._asked.add(id(req))
                f.permissions.append(req)

    def _begin(self, f: Frame, turn: Turn) -> None:
        label = TURN_LABEL[turn.kind]
        if self.turn is not None:
            f.answer.append(Piece("", line=True))
        f.answer.append(Piece(f"{label} {turn.instruction}", "user", line=True))
        if turn.steered_at is not None:  # the server took it mid-answer: it goes on from here
            f.answer.append(Piece("  (steered: the model continues from where it was)", "dim",
                                  line=True))
        self.turn, self.chunks = turn, 0
        self._reasoning, self._thinking, self._plan, self._tools = 0, False, (), {}
        self._retries = 0
        self._tail, self._last_key = "", -1
        if turn.pending is not self._pending:
            self._pending, self._tx = turn.pending, 0
        self._pturn = turn.pturn
        self._was_live = True
        f.started = turn

    def _end(self, f: Frame, turn: Turn, *, superseded: bool) -> Ended:
        for held, style in ((self._thought.end(), "dim"), (self._raw.end(), "text")):
            if held:  # the stream ended: what was held as a key's possible start
                f.answer.append(Piece(masking.mask(held), style))
        failure = None
        if turn.state == "interrupted":
            f.answer.append(Piece("■ interrupted", "dim", line=True))
        elif turn.error is not None:
            failure = turn.error.message
            f.answer.append(Piece(f"✗ {failure}", "error", line=True))
            if self.retry_hint and turn is self.session.failed:
                f.answer.append(Piece(self.retry_hint, "dim", line=True))
        elif turn.finish_reason == "length":
            f.answer.append(Piece("✗ the answer hit the token limit; its last edit is incomplete",
                                  "error", line=True))
        return Ended(turn, superseded, failure)

    # -- the pending diff ------------------------------------------------------------------
    def _pull_pending(self, f: Frame, pending: PendingDiff, now: float) -> None:
        if pending is not self._seen:
            self._seen = f.new_change_set = pending
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
            f.open_counts[p] = sum(1 for h in fd.hunks if h.state not in DECIDED)
            if fd.created and fd.hunks:
                f.created.add(p)

    def _pull_check(self, f: Frame, turn: Turn | None) -> None:
        """The check of the answer's proposal, once it ended: its verdict under the answer,
        and for a failure the first lines of what it printed (variants/proposal_check.py)."""
        if turn is None or not turn.check or turn.check.startswith("…") or turn.live:
            return
        if self._checks.get(id(turn)) == turn.check:
            return
        self._checks[id(turn)] = turn.check
        failed = turn.check.startswith("✗")
        f.answer.append(Piece(turn.check + (" · F sends it back" if failed else ""),
                              "error" if failed else "dim", line=True))
        for text in gist(turn.check_output, CHECK_LINES):
            f.answer.append(Piece("  " + masking.mask(text), "dim", line=True))

    # -- texts -----------------------------------------------------------------------------
    def _texts(self, f: Frame, now: float, force: bool) -> None:
        turn = self.session.turn
        if force or now - self._title_at >= TITLE_EVERY:
            self._title_at = now
            title = answer_title(turn, self.session, raw=self.mode == "raw")
            if title != self._title:
                self._title = f.title = title
        live = turn is not None and turn.live
        if force or now - self._status_at >= (STATUS_EVERY if live else TITLE_EVERY):
            self._status_at = now
            status = review_line(self.session)
            if status != self._status:
                self._status = f.status = status


# how an edit block starts, as the parser holds it back until it can tell (fence, the
# search/replace marker, apply_patch's envelope): shown as what it is, not as markup
_OPENERS = ("```", "<<<<<<<", "*** Begin Patch", "*** Update File", "*** Add File")


def writing(tail: str) -> str:
    """The prose not yet placed, with an edit block that starts in it (the path line, its
    fence, the first marker, perhaps half typed) shown as "writing calc.py…": the card
    takes over once the parser knows it is an edit."""
    if not tail or not any(c in tail for c in "`<*"):
        return tail
    lines = tail.split("\n")
    for i, line in enumerate(lines):
        t = line.strip()
        if len(t) >= 3 and any(o.startswith(t) or t.startswith(o) for o in _OPENERS):
            path = lines[i - 1].strip().strip("`*:") if i and t.startswith("`") else ""
            if t.startswith("*** ") and ":" in t:
                path = t.split(":", 1)[1].strip()
            keep = lines[: i - 1] if path and not t.startswith("*** ") else lines[:i]
            return "\n".join([*keep, f"writing {path}…" if path else "writing an edit…"])
    return tail
