"""The variants of one instruction: N sessions answering at once, reviewed side by side.

Variant 1 is the session the app holds; the others are sibling sessions made for the set:
each continues a copy of the conversation so far with its own back-end connection and
streams into a change set of its own, and all of them share the workspace, the journal and
the write lock, so accepts from different variants go through one journal, one undo order,
one compare-and-swap at a time.

Taking hunks from several variants works because an accept is, for the other variants, a
change on disk like any other: their hunks are rebased onto it (app/core/edits/rebase.py).
Hunks far from it shift and stay acceptable, so non-overlapping hunks combine; a hunk the
accepted region touches becomes a conflict, which this module relabels *superseded* (shown,
not acceptable) for as long as the other variant's accept stands. Undoing that accept puts
the disk back where both started, and the rebase turns the superseded hunk into a plain
pending hunk again ("no conflict after all"). The relabel runs after every rebase of a
variant's file (`RebaseDone`), so a rebase put off while an edit streamed is caught too.

`Variants` subscribes once to each variant's change set (app/core/review/events.py): after
the session, which saves each decision first. The screen subscribes to `Variants`
(`subscribe`): it hears `Arrived` from whichever variant streams, `Due` (the live sync runs
a put-off rebase), and `SetChanged`.

The set ends when the next message finds nothing streaming and nothing open: the siblings
go, and variant 1's conversation goes on, told what was taken from which variant.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from app.core.conversation.context import Conversation
from app.core.conversation.session import Session, Turn
from app.core.edits import arrival
from app.core.edits.diff import PendingDiff
from app.core.edits.file_diff import FileDiff
from app.core.edits.hunks import OPEN, Hunk, HunkState
from app.core.listeners import Listeners
from app.core.provider import Provider
from app.core.review.change_set import ChangeSet
from app.core.review.events import Arrived, Decided, Due, Event, RebaseDone
from app.core.storage.records import Accept, Reject, Undo
from app.core.text.plural import plural
from app.core.text.textfile import encode

MAX_VARIANTS = 8


class VariantsRefused(ValueError):
    """Variants cannot start now (said in one line; nothing was sent)."""


@dataclass(frozen=True, slots=True)
class SetChanged:
    """The set, or the variant shown, changed."""


@dataclass(eq=False)
class Variant:
    index: int  # 1-based, as shown
    session: Session
    label: str  # the back-end and model it asks


def count_error(n: int) -> str | None:
    """Why `n` variants cannot be asked for, else None."""
    if n < 1 or n > MAX_VARIANTS:
        return f"variants: 1 to {MAX_VARIANTS}, not {n}"
    return None


def _copy_conversation(src: Conversation) -> Conversation:
    """The conversation so far, for a sibling to go on from (it then grows on its own)."""
    out = copy.copy(src)
    out.history = list(src.history)
    out.told = set(src.told)
    out.rejections = list(src.rejections)
    out.notes = list(src.notes)
    return out


class Variants:
    def __init__(self, main: Session) -> None:
        self.main = main
        self.items: list[Variant] = [Variant(1, main, main.provider.label)]
        self.shown = 0  # the variant on screen (index into items)
        self.asked = ""  # the instruction the set answers
        # the screen's: `Arrived` and `Due` from any variant, `SetChanged` (module docstring)
        self.listeners: Listeners[Arrived | Due | SetChanged] = Listeners()
        self._accepts: list[int] = []  # the variant of each accept still standing, in order
        self._closing: list[asyncio.Task[None]] = []
        main.changes.subscribe(partial(self._heard, main))

    def subscribe(self, fn: Callable[[Arrived | Due | SetChanged], object]) -> Callable[[], None]:
        return self.listeners.subscribe(fn)

    # -- what is on screen --------------------------------------------------------------
    @property
    def session(self) -> Session:
        """The session the screen shows (the main one outside a set)."""
        return self.items[self.shown].session

    @property
    def active(self) -> bool:
        return len(self.items) > 1

    @property
    def streaming(self) -> bool:
        return any(v.session.streaming for v in self.items)

    @property
    def open_hunks(self) -> bool:
        return any(h.state in OPEN or h.state == HunkState.STREAMING
                   for v in self.items if v.session.pending is not None
                   for h in v.session.pending.hunks)

    def show(self, index: int) -> bool:
        """Put variant `index` (0-based, wrapping) on screen; True when it changed."""
        new = index % len(self.items)
        if new == self.shown:
            return False
        self.shown = new
        self._changed()
        return True

    def step(self, delta: int) -> bool:
        return self.show(self.shown + delta)

    def variant_of(self, session: Session) -> Variant | None:
        return next((v for v in self.items if v.session is session), None)

    # -- asking -------------------------------------------------------------------------
    def ask(self, instruction: str, siblings: Sequence[Provider],
            first: Provider | None = None) -> list[Turn]:
        """Send `instruction` as 1 + len(siblings) variants at once: variant 1 on the main
        session (on `first` when given: --variant-models names its model too), the others
        each on a sibling session with its own back-end."""
        main = self.main
        why = count_error(1 + len(siblings))
        if why:
            raise VariantsRefused(why)
        if self.streaming:
            raise VariantsRefused("an answer is streaming: stop it (Esc) before asking for variants")
        if self.open_hunks:
            raise VariantsRefused("variants start a new change set: decide the open hunks first")
        for p in [first or main.provider, *siblings]:
            if not p.capabilities.parallel:
                raise VariantsRefused(f"{p.label} answers one request at a time: it cannot run "
                                      "variants in parallel")
        self._end_set()
        if first is not None and first is not main.provider:
            old, main.provider = main.provider, first
            self._closing.append(asyncio.get_running_loop().create_task(old.aclose()))
        self.items = [Variant(1, main, main.provider.label)]
        self.items += [Variant(i + 2, self._sibling(p), p.label) for i, p in enumerate(siblings)]
        self.shown, self.asked, self._accepts = 0, instruction, []
        turns = [v.session.start(instruction) for v in self.items]
        self._changed()
        return turns

    def start(self, instruction: str) -> Turn:
        """A message from the prompt. While a set streams or has hunks open, every variant
        takes it (a redirect, or a follow-up on its own change set); otherwise the set ends
        and the main session goes on."""
        if self.active and (self.streaming or self.open_hunks):
            turns = [v.session.start(instruction) for v in self.items]
            return turns[self.shown]
        self._end_set()
        return self.main.start(instruction)

    def interrupt(self) -> bool:
        """Esc stops every variant."""
        stopped = [v.session.interrupt() for v in self.items]
        return any(stopped)

    async def wait(self) -> None:
        for v in list(self.items):
            await v.session.wait()

    def _sibling(self, provider: Provider) -> Session:
        m = self.main
        # one journal and one writer; the decisions on the last change set are told to every
        # variant (ChangeSet.beside)
        s = Session(m.ws, provider, fmt=m.fmt_choice, max_tokens=m.max_tokens,
                    temperature=m.temperature, changes=ChangeSet.beside(m.changes))
        s.files, s.sent = m.files, _copy_conversation(m.sent)
        s.knowledge, s.rules = m.knowledge, m.rules
        s.changes.subscribe(partial(self._heard, s))
        s.sent.resumed(provider)  # a server that keeps the conversation goes on from it
        return s

    def _end_set(self) -> None:
        """The set is over (nothing streams, nothing is open): the siblings go, and the main
        conversation is told what was taken from which variant."""
        if not self.active:
            return
        note = taken_note(self.items)
        if note:
            self.main.sent.notes.append(note)
        for v in self.items[1:]:
            self._closing.append(asyncio.get_running_loop().create_task(v.session.aclose()))
        self.items, self.shown, self._accepts = self.items[:1], 0, []
        self._changed()

    async def aclose(self) -> None:
        for v in self.items[1:]:
            await v.session.aclose()
        for t in self._closing:
            with contextlib.suppress(Exception):
                await t
        await self.main.aclose()

    def _changed(self) -> None:
        self.listeners.publish(SetChanged())

    # -- taking hunks across variants ---------------------------------------------------
    def _heard(self, session: Session, ev: Event) -> None:
        """An event of `session`'s change set (it heard it first)."""
        if type(ev) is Arrived or type(ev) is Due:
            self.listeners.publish(ev)
        elif type(ev) is RebaseDone:
            self._relabel(ev.fd)
        elif isinstance(ev, Decided):
            v = self.variant_of(session)
            if v is not None:
                self._decided(v, ev.record)

    def _decided(self, v: Variant, rec: Accept | Reject | Undo) -> None:
        """An accept or undo in variant `v` changed the disk: the others are rebased onto
        it now (not when the watcher reports it), so an overlap is superseded at once."""
        pending = v.session.pending
        if pending is None or isinstance(rec, Reject):
            return
        if isinstance(rec, Accept):
            if not rec.hunks or not self.active:
                return
            self._accepts.append(v.index)
            by_id = {h.id: h for h in pending.hunks}
            paths = {by_id[i].path for i, _, _ in rec.hunks if i in by_id}
        else:
            if v.index in self._accepts:
                del self._accepts[len(self._accepts) - 1 - self._accepts[::-1].index(v.index)]
            paths = set(rec.written) if rec.written is not None else set(pending.files)
        for other in self.items:
            op = other.session.pending
            if other is v or op is None:
                continue
            for path in sorted(paths & set(op.files)):
                fd = op.files[path]
                if arrival.check_now(self.main.ws, fd) is None:
                    self._relabel(fd)

    def _relabel(self, fd: FileDiff) -> None:
        """A conflict in `fd` that another variant's accepted hunk made is superseded by it;
        a superseded hunk whose accept was undone (and that the rebase did not settle) is
        a conflict again, both sides shown."""
        if not self.active:
            return
        taken = self._taken(fd)
        _, shift = fd.expected()
        for h in fd.hunks:
            if h.state not in (HunkState.CONFLICT, HunkState.SUPERSEDED):
                continue
            s = h.base_start + shift(h.base_start)
            e = s + (h.base_end - h.base_start)
            by = next(((i, hid) for i, hid, a, b in taken if s <= b and a <= e), None)
            if by is not None and h.ancestor is not None and h.state == HunkState.CONFLICT:
                h.state = HunkState.SUPERSEDED
                h.note = f"variant {by[0]}'s hunk #{by[1]} was taken here (undoing it brings this back)"
                fd.touch(h)
            elif by is None and h.state == HunkState.SUPERSEDED:
                h.state, h.note = HunkState.CONFLICT, "the variant's accept it gave way to is gone"
                fd.touch(h)

    def _taken(self, fd: FileDiff) -> list[tuple[int, int, int, int]]:
        """The other variants' accepted hunks in this file: (variant, hunk id, disk range)."""
        out = []
        for v in self.items:
            op = v.session.pending
            other = op.files.get(fd.path) if op is not None and op is not fd.owner else None
            if other is None:
                continue
            _, shift = other.expected()
            for h in other.hunks:
                if h.state == HunkState.ACCEPTED:
                    a = h.base_start + shift(h.base_start)
                    out.append((v.index, h.id, a, a + len(h.applied or [])))
        return out

    async def undo(self) -> str:
        """Undo the last accept of the set, whichever variant it was in (journal order)."""
        if self._accepts:
            index = self._accepts[-1]
            v = next((v for v in self.items if v.index == index), None)
            if v is not None and v.session.review is not None and v.session.review.can_undo:
                return await v.session.changes.undo()
        return await self.session.changes.undo()

    # -- what the screen and the report show --------------------------------------------
    def region(self, path: str, hunk: Hunk,
               context: int = 3) -> list[tuple[Variant, list[tuple[str, bool]], str]]:
        """Compare view: each variant's version of the disk region `hunk` (of the variant on
        screen) covers, with `context` lines around it, and what became of its hunks there."""
        shown = self.session.pending
        if shown is None or path not in shown.files:
            return []
        _, shift = shown.files[path].expected()
        s = hunk.base_start + shift(hunk.base_start)
        e = s + (hunk.base_end - hunk.base_start)
        out: list[tuple[Variant, list[tuple[str, bool]], str]] = []
        for v in self.items:
            p = v.session.pending
            fd = p.files.get(path) if p is not None else None
            if fd is None:
                out.append((v, [], "does not change the file"))
                continue
            _, at = fd.expected()
            there = [h.state.value for h in fd.hunks
                     if h.base_start + at(h.base_start) <= e and s <= h.base_end + at(h.base_start)]
            out.append((v, version(fd, s, e, context), ", ".join(there) or "no change here"))
        return out


def version(fd: FileDiff, s: int, e: int, context: int) -> list[tuple[str, bool]]:
    """The file as variant `fd` would make it, for the disk lines [s, e) (plus context):
    what steer expects on disk with every hunk of the variant not rejected applied. Each
    line says whether it differs from the disk (True: the variant's own, not taken yet)."""
    expected, shift = fd.expected()
    changes = sorted((h.base_start + shift(h.base_start), h.base_end + shift(h.base_start), h.new)
                     for h in fd.hunks if h.state not in (HunkState.ACCEPTED, HunkState.REJECTED))
    lo, hi = max(0, s - context), min(len(expected), e + context)
    # widen to the variant's own hunks the region touches, so none is cut in half
    for a, b, _ in changes:
        if a <= hi and lo <= b:
            lo, hi = min(lo, a), max(hi, b)
    out: list[tuple[str, bool]] = []
    at = lo
    for a, b, new in changes:
        if b < lo or a > hi or a < at:
            continue
        out += [(t, False) for t in expected[at:a]] + [(t, True) for t in new]
        at = b
    out += [(t, False) for t in expected[at:hi]]
    return out


def taken_note(items: Sequence[Variant]) -> str:
    """What the next message tells variant 1's conversation about the set."""
    if len(items) < 2:
        return ""
    lines = []
    for v in items:
        p = v.session.pending
        hunks = [h for h in p.hunks if h.state == HunkState.ACCEPTED] if p is not None else []
        whose = "your answer" if v.index == 1 else v.label
        where = ", ".join(f"{h.path} line {h.base_start + 1}" for h in hunks[:12])
        lines.append(f"- variant {v.index} ({whose}): " + (f"{plural(len(hunks), 'hunk')}: {where}"
                                                          if hunks else "nothing"))
    return (f"The last instruction was answered as {len(items)} variants in parallel; you "
            "answered variant 1. The user took:\n" + "\n".join(lines) +
            "\nThe files as they are now are what counts; hunks of yours marked superseded "
            "gave way to another variant's change.")


def summary(v: Variant) -> dict:
    """One variant's figures (`steer run --json`, the tabs)."""
    s = v.session
    turn = s.turn
    p: PendingDiff | None = s.pending
    hunks = p.hunks if p is not None else []
    return {
        "variant": v.index,
        "model": s.provider.model,
        "label": v.label,
        "state": turn.state if turn is not None else "idle",
        "tokens": turn.tokens if turn is not None else 0,
        "ttft_s": None if turn is None or turn.ttft is None else round(turn.ttft, 4),
        "last_token_s": None if turn is None or turn.ended is None
        else round(turn.ended - turn.started, 4),
        "hunks": len(hunks),
        "accepted": sum(1 for h in hunks if h.state == HunkState.ACCEPTED),
        "superseded": sum(1 for h in hunks if h.state == HunkState.SUPERSEDED),
        "open": sum(1 for h in hunks if h.state in OPEN),
        "lines": sum(len(h.new) + len(h.old) for h in hunks),
        "refused": len(p.errors) if p is not None else 0,  # blocks that became no hunk
    }


def final_files(pending: PendingDiff) -> dict[str, bytes | None]:
    """Each file as the variant's whole proposal makes it (None: it deletes the file), in
    the file's own encoding and line endings: what a check runs against."""
    out: dict[str, bytes | None] = {}
    for fd in pending.files.values():
        if not fd.hunks and not fd.move_to:
            continue
        body = None if fd.deleted else encode(fd.proposal(), fd.base.fmt, fd.base.lines)
        if fd.move_to:
            out[fd.path], out[fd.move_to] = None, body
        else:
            out[fd.path] = body
    return out
