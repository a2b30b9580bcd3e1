"""A conversation about one change set: turns, prompts, steering, queued follow-ups.

A change set is a PendingDiff over bases snapshotted when its first request was made. While
it still has undecided hunks, every new message (a redirect, a follow-up) continues the same
change set: the model sees its own previous answer and the user's decisions, and its new
edits land in the same pending diff. Once everything is decided, the next message starts a
new change set on fresh snapshots of the disk.

The conversation sent only grows (DESIGN rule 10): a new change set appends what is new (the
files that changed since the model saw them, the decisions it was not told) after the
conversation so far, never edits an earlier message, so every request continues the last
(previous_response_id, server prefix caches). Only a rewind, a file the user took out of
the context, or a window it would overflow starts it afresh; the title says why (sent.full).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Literal

from app.core.conversation import context_budget as budgets
from app.core.conversation import prompts
from app.core.conversation.agent import AGENT_EVENTS, AgentHost, ProseOnly
from app.core.conversation.context import ContextError, ContextFiles, Conversation
from app.core.conversation.log import SessionLog
from app.core.conversation.records import (
    Accept,
    AgentRec,
    Base,
    Context,
    End,
    Files,
    Meta,
    Queue,
    Reasoning,
    Rebase,
    Record,
    Reject,
    Rewind,
    Snap,
    Text,
    TurnRec,
    Undo,
)
from app.core.conversation.review import Review
from app.core.conversation.saving import Saving
from app.core.conversation.store import RecordingResolver, ReplayResolver
from app.core.conversation.turn import Turn, TurnState, end_record, restore_end
from app.core.disk.journal import Entry, Journal
from app.core.disk.snapshot import Snapshot
from app.core.disk.workspace import Workspace
from app.core.edits import arrival, rebase
from app.core.edits.diff import PendingDiff
from app.core.edits.formats import fragments, make_parser
from app.core.edits.formats.base import StreamParser
from app.core.edits.hunks import DECIDED, EditError, Resolver
from app.core.events import (
    LOOKUP_EVENTS,
    Done,
    Error,
    Event,
    FileEdit,
    FileWrite,
    ReasoningDelta,
    Retrying,
    TextDelta,
)
from app.core.knowledge.service import Knowledge
from app.core.provider import Provider, Request
from app.core.text.names import carried

__all__ = ["ContextError", "Session", "Turn", "TurnState", "end_record", "restore_end"]


class Session:
    def __init__(self, ws: Workspace, provider: Provider, *, fmt: str = "auto",
                 context: list[str] | None = None, max_tokens: int | None = None,
                 temperature: float | None = None) -> None:
        self.ws = ws
        self.provider = provider
        self.saving = Saving(self)  # where it is saved, if it is (app/core/conversation/saving.py)
        self.fmt_choice = fmt
        self.fmt = fmt
        self.fmt_reason = ""  # why this answer's format was chosen (shown in its title)
        self.files = ContextFiles(ws)  # what the model is shown (app/core/conversation/context.py)
        for p in context or []:
            self.add_context(p)
        self.max_tokens = max_tokens
        self.temperature = temperature
        # called when text arrives after the UI last looked (take_data), so that a UI can
        # schedule one frame per burst instead of polling or reacting to every token
        self.on_data: Callable[[], None] | None = None
        self._data_signalled = False
        self.pending: PendingDiff | None = None
        self.review: Review | None = None
        self.sent = Conversation(self.files)  # what the model was sent (context.py)
        self.turns: list[Turn] = []
        self.queue: list[str] = []
        self._task: asyncio.Task[None] | None = None
        self._parser: StreamParser | None = None  # the answer streaming now
        self._steering: asyncio.Task[None] | None = None  # the answer a steer will cut
        self._snapshots: list[Snapshot] = []
        self._messages: list[dict] = []  # the request now streaming
        self._rid: str | None = None  # the id its answer is kept by on the server (Done)
        self.agent = AgentHost(self)  # plans, tool calls, reads, writes, permissions of agents
        self.journal = Journal.for_workspace(ws)
        # one write at a time (accept, undo), shared with the live rebase (app/core/git/sync.py)
        self.write_lock = asyncio.Lock()
        self.arrivals = arrival.Arrivals(ws, self.write_lock)  # each edit checked against the disk
        # what checkpoints need: each accept's journal step with the turn it belongs to
        self.accepts: list[tuple[int, str]] = []
        self.file_steps: list[Files] = []  # files rewound to a checkpoint, or redone
        self._resolver: Resolver = ws  # what the pending diff reads bases through
        self.knowledge: Knowledge | None = None  # the repository map, look-ups (service.py)

    # -- context (app/core/conversation/context.py) -------------------------------------------
    @property
    def context(self) -> list[str]:
        return self.files.paths

    @property
    def outlined(self) -> set[str]:
        return self.files.outlined

    def add_context(self, raw: str, *, outline: bool = False) -> str:
        """A file for the model to see: whole, or (`outline`) only its definitions."""
        rel = self.files.add(raw, outline=outline)
        self.saving.save_lists()
        return rel

    def remove_context(self, rel: str) -> None:
        self.files.remove(rel)
        self.saving.save_lists()

    def file_tokens(self, rel: str, *, outline: bool | None = None) -> int:
        return self.files.tokens(rel, outline=outline)

    def budget(self, draft: str = "") -> budgets.Budget:
        """The next request's size against the model's context window (and the map's)."""
        fmt = self.fmt if self.turn else self.fmt_choice
        tokens = self.knowledge.budget(self.provider) if self.knowledge else 0
        return self.sent.budget(draft, fmt, self.provider.context_window, map_tokens=tokens)

    # -- state -----------------------------------------------------------------------------
    @property
    def log(self) -> SessionLog | None:
        return self.saving.log

    @log.setter
    def log(self, log: SessionLog | None) -> None:
        self.saving.log = log

    @property
    def turn(self) -> Turn | None:
        return self.turns[-1] if self.turns else None

    @property
    def streaming(self) -> bool:
        """An answer is coming (False once interrupted, while the cancelled task unwinds)."""
        turn = self.turn
        return (self._task is not None and not self._task.done() and turn is not None
                and turn.live)

    @property
    def tentative(self) -> str:
        """The answer's prose not yet final (see StreamParser.tentative)."""
        parser = self._parser
        turn = self.turn
        return parser.tentative() if parser is not None and turn is not None and turn.live else ""

    def wake(self) -> None:
        """Something arrived (text, an agent's request): tell the UI once per frame."""
        if not self._data_signalled and self.on_data is not None:
            self._data_signalled = True
            self.on_data()

    def take_data(self) -> None:
        """The UI has taken what arrived: signal the next arrival again."""
        self._data_signalled = False

    # -- asking ----------------------------------------------------------------------------
    def start(self, instruction: str) -> Turn:
        """Send a message. While an answer streams, this is a redirect."""
        if self.streaming:
            return self.redirect(instruction)
        pending = self.pending  # with hunks open or streaming: the change set goes on
        going_on = pending is not None and any(h.state not in DECIDED for h in pending.hunks)
        return self._start(instruction, "follow-up" if going_on else "ask")

    @property
    def refused(self) -> list[EditError]:
        """The edits of the answer on screen that could not be applied."""
        pending = self.pending
        return [e for e in pending.errors if e.turn == pending.turn] if pending else []

    def retry_refused(self) -> Turn | None:
        """Ask the model to redo the edits it could not apply, with the files as they are now."""
        errors = self.refused
        if not errors or self.streaming or self.pending is None:
            return None
        snaps = self.files.now(e.path for e in errors if e.path)
        text = prompts.retry_message([(e.path, e.message) for e in errors], snaps)
        content = prompts.steer_message(text, self.sent.untold(self.pending), interrupted=False)
        return self._start("retry the edits that could not be applied", "follow-up",
                           content=content)

    @property
    def failed(self) -> Turn | None:
        """The last request, failed before any answer text: the one a retry sends again."""
        turn = self.turn
        return turn if turn is not None and turn.failed and not self.streaming else None

    def retry_failed(self) -> Turn | None:
        """Send the failed request again, as a new request: a first question is asked afresh
        (the files as they are now), a follow-up or redirect resends the message it sent."""
        failed = self.failed
        if failed is None:
            return None
        if failed.kind == "ask" and not self.sent.history:
            return self._start(failed.instruction, "ask")
        return self._start(failed.instruction, failed.kind, content=failed.content)

    async def ask(self, instruction: str) -> Turn:
        """Send and wait for the answer to end (what `steer run` does)."""
        turn = self.start(instruction)
        await self.wait()
        return turn

    async def wait(self) -> None:
        while self._task is not None and not self._task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self._task)
        await self.arrivals.settle()

    def redirect(self, instruction: str) -> Turn:
        """Stop the running answer and continue from it with a new instruction (decisions kept
        and told); a back-end that steers natively cuts it and goes on, no new request."""
        turn = self.turn
        if (self.provider.capabilities.native_steer and self._steering is None
                and turn is not None and turn.state == "streaming" and self.streaming):
            return self._steer(instruction)
        self._cancel()
        return self._start(instruction, "redirect")

    def _steer(self, instruction: str) -> Turn:
        assert self.pending is not None and self._task is not None
        turn = Turn(instruction, "redirect")  # its clock starts now: redirect -> first token
        content = prompts.steer_message(instruction, self.sent.untold(self.pending), interrupted=True)
        req = Request([{"role": "user", "content": content}], model=self.provider.model,
                      max_tokens=self.max_tokens, temperature=self.temperature)
        self._steering = self._task
        self._task = asyncio.get_running_loop().create_task(self._steered(turn, req, instruction))
        return turn

    async def _steered(self, turn: Turn, req: Request, instruction: str) -> None:
        old, cut = self.turn, self._steering
        assert old is not None and cut is not None
        try:
            events = await self.provider.steer(req)
        except Exception:  # SteerRefused, or the steer failed: cancel and resend (a spare
            # connection takes the new request at once)
            self._steering = None
            cut.cancel()
            if old.live:
                self._finalize(old, self._parser, interrupted=True)
            self._start(instruction, "redirect", turn=turn)
            return
        await asyncio.wait([cut])  # the server ends the old answer where the steer landed
        self._steering = None
        turn.steered_at = old.size
        self._start(instruction, "redirect", turn=turn, content=req.messages[-1]["content"],
                    events=events)

    def interrupt(self) -> bool:
        """Esc: stop the generation now. Complete hunks stay reviewable."""
        return self._cancel()

    def enqueue(self, message: str) -> None:
        self.queue.append(message)
        self.saving.save_lists()

    def _cancel(self) -> bool:
        task = self._task
        if task is None or task.done() or not self.streaming:
            return False
        task.cancel()
        if self._steering is not None:  # Esc while a steer was on its way: stop both
            self._steering.cancel()
            self._steering = None
        # settle synchronously: the UI must show the stopped state at once, not on the next tick
        turn = self.turn
        if turn is not None and turn.live:
            self._finalize(turn, self._parser, interrupted=True)
        return True

    def _start(self, instruction: str, kind: Literal["ask", "redirect", "follow-up"], *,
               turn: Turn | None = None, content: str | None = None,
               events: AsyncIterator[Event] | None = None) -> Turn:
        previous = self.turn
        caps, know = self.provider.capabilities, self.knowledge
        snapshots: list[Snapshot] | None = None
        full, self.sent.full_next = self.sent.full_next, ""
        continues = None
        if kind == "ask":  # with the files the instruction names (service.py: `named`)
            snapshots = self.files.snapshots() + self.files.now(
                know.named(instruction, self.context) if know is not None else ())
            fmt, self.fmt_reason = prompts.pick_format(caps, self.provider.model,
                                                       self.fmt_choice, snapshots)
            interrupted = previous is not None and previous.state == "interrupted"
            if caps.agent:
                content, continues = instruction, False
            elif content is not None:  # a failed question asked again, as it was
                continues = bool(self.sent.history)
            else:
                content, continues, taken = self.sent.question(
                    instruction, snapshots, fmt, self.pending, interrupted=interrupted,
                    window=self.provider.context_window)
                full = full or taken
        else:
            assert self.pending is not None and previous is not None
            if (self.fmt == "agent") != caps.agent:  # a resumed session, another back-end
                raise ContextError("this change set was made with an agent (--agent) and the "
                                   "back-end now is not one, or the other way round: decide its "
                                   "open hunks first, or resume it with the same back-end")
            if content is None:
                content = prompts.steer_message(instruction, self.sent.untold(self.pending),
                                                interrupted=previous.state == "interrupted")
            fmt = self.fmt
        turn = turn or Turn(instruction, kind)
        bases = snapshots if snapshots is not None else self._snapshots
        prefill = prompts.prefill(fmt, bases) if caps.prefill else ""
        # the map's new items (in full for a new conversation); a steer sends its words only
        fresh, held = kind == "ask" and not continues, self.sent.map_version
        repo_map, self.sent.map_next = know.items(fresh, held, instruction, bases, self.provider
                                                  ) if know and events is None else ([], held)
        rec = TurnRec(kind=kind, instruction=instruction, content=content, fmt=fmt,
                      agent=caps.agent, prefill=prefill, steered_at=turn.steered_at,
                      bases=None if snapshots is None else [Snap.of(s) for s in snapshots],
                      continues=continues, full=full, time=time.time(), map=repo_map)
        self._open_turn(rec, turn, snapshots)
        req = prompts.request(self._messages, caps, self.provider.model, fmt, bases,
                              first=kind == "ask", prefill=prefill, max_tokens=self.max_tokens,
                              temperature=self.temperature, context=list(self.context),
                              tools=know.offer() if know is not None else (None, 0))
        assert self._parser is not None  # _open_turn made this answer's parser
        self._task = asyncio.get_running_loop().create_task(
            self._run(turn, req, self._parser, events))
        return turn

    def _open_turn(self, rec: TurnRec, turn: Turn, snapshots: list[Snapshot] | None) -> None:
        """What a request opens: a change set for an ask, the conversation so far, the
        parser. Shared by a live turn and one replayed from the session's log."""
        afresh = not rec.continues if rec.continues is not None else not (  # an older log:
            self.turn is not None and self.turn.state in ("interrupted", "error"))  # went on
        old_pending = self.pending
        if snapshots is not None:
            self._snapshots = snapshots
            self.pending = PendingDiff(self._resolver, snapshots)
            self.pending.on_rebase = self._rebased
            self.review = Review(self.ws, self.pending, self.journal, lock=self.write_lock)
            self.review.on_decided = self.agent.settle
            self.review.on_record = self._decided
            self.fmt = rec.fmt
        else:
            assert self.pending is not None
            self.pending.begin_turn(redirect=rec.kind == "redirect")
        assert self.pending is not None
        # a whole-file answer showing part of a file keeps the rest, unless this instruction
        # may mean deleting code (then the deletion is proposed, flagged)
        self.pending.removal_asked = fragments.asks_removal(rec.instruction)
        messages = self.sent.open(rec.content, self.fmt, old_pending, snapshots,
                                  afresh=afresh, agent=rec.agent, repo_map=rec.map)
        self.sent.full = rec.full
        turn.prose_from = len(self.pending.prose)
        turn.pending, turn.pturn = self.pending, self.pending.turn
        turn.content = rec.content
        self.turns.append(turn)
        known = frozenset(carried(s.path) for s in self._snapshots)  # as the request names them
        self._parser = ProseOnly() if rec.agent else make_parser(self.fmt, known, self.ws.has_file)
        self._messages = messages
        self.saving.save(rec)
        self.saving.save_lists()
        if rec.prefill:
            self._feed(turn, rec.prefill)

    def _feed(self, turn: Turn, text: str) -> None:
        """Text of `turn` not from the back-end now (a prefill, a resume's), through the parser."""
        assert self.pending is not None and self._parser is not None  # a turn is open
        turn.chunks.append(text)
        turn.size += len(text)
        self.pending.feed(self._parser.feed(text))

    async def _run(self, turn: Turn, req: Request, parser: StreamParser,
                   events: AsyncIterator[Event] | None = None) -> None:
        pending = self.pending
        assert pending is not None
        log = self.log
        clock = time.perf_counter
        try:
            async for ev in events if events is not None else self.provider.stream(req):
                turn.last_data = clock()  # what a stall is measured from
                if type(ev) is TextDelta:  # (types compared by identity: the hot path)
                    turn.add_text(ev.text)
                    pending.feed(parser.feed(ev.text))
                    if log is not None:  # after the feed: a base it read is logged first
                        log.text(ev.text)
                    self.wake()
                elif type(ev) in LOOKUP_EVENTS and self.knowledge is not None:
                    self.knowledge.handle(turn, ev, self.context)  # type: ignore[arg-type]
                    self.wake()
                elif type(ev) in AGENT_EVENTS:
                    if type(ev) is FileEdit:
                        self.saving.save(AgentRec(kind="edit", path=ev.path, old=ev.old, new=ev.new))
                    elif type(ev) is FileWrite:
                        self.saving.save(AgentRec(kind="write", path=ev.path, new=ev.content))
                    self.agent.handle(turn, ev)
                else:  # reasoning, the connection, usage, a retry, an error, the end
                    turn.take(ev)
                    if type(ev) is ReasoningDelta and log is not None:
                        log.reasoning(ev.text)
                    elif type(ev) is Retrying:  # the back-end waits: say so on screen
                        self.wake()
                    elif type(ev) is Done:
                        self._rid = ev.response_id
                self.arrivals.kick(pending)  # edits that completed: placed against the disk now
        except asyncio.CancelledError:
            if turn.live:
                self._finalize(turn, parser, interrupted=True)
            self.arrivals.kick(pending)
            raise
        except Exception as exc:  # a provider bug must not leave the UI streaming forever
            turn.error = Error("protocol", f"{type(exc).__name__}: {exc}")
        if turn.live:  # a steered answer ends as interrupted, where the server cut it
            self._finalize(turn, parser, interrupted=turn.finish_reason == "steered")
        self.arrivals.kick(pending)
        if self.queue and turn.complete and self._task is asyncio.current_task():
            self._task = None
            self.start(self.queue.pop(0))

    def _finalize(self, turn: Turn, parser: StreamParser | None, *, interrupted: bool) -> None:
        assert parser is not None and self.pending is not None  # an answer is open
        turn.end(interrupted=interrupted)
        pending = self.pending
        pending.feed(parser.finish(complete=turn.complete))
        pending.finish()
        self.agent.end_turn()
        # the conversation goes on from whatever the model said, with its look-ups as sent; a
        # request failed before it said anything never reached it (a retry sends it again)
        rid, self._rid = (self._rid if turn.complete else None), None
        if not turn.failed:
            self.sent.reached(self._messages, turn.text[turn.lookup_chars:], rid, turn.lookups)
        if self.log is not None:
            self.saving.save(end_record(turn).model_copy(update={"response_id": rid}))
            self.saving.save_lists()

    # -- the log (app/core/conversation/log.py): what each record does ---------------------
    def apply(self, rec: Record) -> None:
        """Take a record of the log in: the one place that says what each record does. A resume
        applies the log in order (`replay`) through the code that made it; live, a record made
        outside the session (a rewind's files, an answer a kill cut, the UI's lists) is applied
        and saved. Meta, Base and Rewind do nothing here (store header, ReplayResolver, fold)."""
        turn, pending = self.turn, self.pending
        match rec:
            case TurnRec():  # saved as it opens (before the bases its prefill reads)
                if turn is not None and turn.live:  # the log left the answer before it open
                    self._end_as(turn, None)
                snaps = None if rec.bases is None else [b.snapshot().prepare() for b in rec.bases]
                self._open_turn(rec, Turn(rec.instruction, rec.kind, steered_at=rec.steered_at),
                                snaps)
                return
            case End() if turn is not None and turn.live:
                self._end_as(turn, rec)  # saved as the answer ends
                return
            case Rebase():  # saved as the rebase runs (on_rebase)
                fd = pending.files.get(rec.path) if pending is not None else None
                if fd is not None:
                    snap = rec.snap.snapshot().prepare() if rec.snap is not None else None
                    rebase.apply(fd, rebase.DiskRead(rec.path, snap, rec.reason))
                return
            case Meta() | Base() | Rewind():
                return
            case Text() if turn is not None and turn.live:
                turn.state = "streaming"
                self._feed(turn, rec.s)
            case Reasoning() if turn is not None:
                turn.reasoning.append(rec.s)
            case AgentRec():
                self.agent.replay(rec)
            case Accept() | Reject() | Undo() if self.review is not None:
                self.review.replay(rec)
                if isinstance(rec, Accept):
                    self._checkpoint(rec)
            case Queue():
                self.queue[:] = rec.items
            case Context():
                self.context[:] = rec.items
            case Files():
                self.file_steps.append(rec)
                if rec.op == "redo":  # an accept of those turns again: a later rewind takes
                    self.accepts += [(rec.turn, s) for s in rec.steps]  # it out too
        self.saving.save(rec)

    def replay(self, records: list[Record]) -> End | None:
        """Rebuild the session from a log's records (`apply`), saving nothing again. Returns
        the End given to an answer the log left open, for the caller to apply and save."""
        log, self.log = self.log, None
        self._resolver = ReplayResolver(self.ws, records)
        try:
            for rec in records:
                self.apply(rec)
            turn = self.turn
            cut = self._end_as(turn, None) if turn is not None and turn.live else None
        finally:
            self.log = log
            self._resolver = self.ws if log is None else self._recording_resolver()
            if self.pending is not None:
                self.pending.resolver = self._resolver
        self.saving.lists_saved()
        return cut

    def _end_as(self, turn: Turn, rec: End | None) -> End:
        """End a replayed answer as its record says, or as interrupted where the log stops."""
        if rec is None:
            rec = End(state="interrupted", finish_reason="cancelled", deltas=len(turn.chunks))
        restore_end(turn, rec)
        self._rid = rec.response_id
        self._finalize(turn, self._parser, interrupted=rec.state == "interrupted")
        if rec.state != "interrupted":
            turn.state = rec.state
        turn.ended = turn.started + rec.elapsed
        return rec

    def _checkpoint(self, rec: Accept) -> None:
        """An accept that wrote something is a checkpoint of its turn (rewind.py)."""
        if rec.entry and rec.hunks:
            self.accepts.append((rec.turn, rec.entry))

    # -- saving (app/core/conversation/saving.py) ------------------------------------------
    def _decided(self, rec: Accept | Reject | Undo) -> None:
        """A decision the review carried out, for the log; an accept checkpoints its turn."""
        if type(rec) is Accept:
            rec.turn = max(len(self.turns) - 1, 0)
            self._checkpoint(rec)
        self.saving.save(rec)
        self.saving.save_lists()

    def _rebased(self, path: str, snap: Snapshot | None, reason: str) -> None:
        if self.log is not None:
            self.saving.save(Rebase(path=path, snap=None if snap is None else Snap.of(snap),
                                    reason=reason))

    def attach(self, log: SessionLog, *, branch: str | None = None, created: float | None = None,
               forked_from: str | None = None) -> None:
        """Save this session from now on into `log`: what follows is appended to it."""
        self._resolver = self._recording_resolver()
        if self.pending is not None:
            self.pending.resolver = self._resolver
        self.saving.attach(log, branch=branch, created=created, forked_from=forked_from)

    def _recording_resolver(self) -> RecordingResolver:
        return RecordingResolver(self.ws, self.saving.save)

    def reset(self) -> None:
        """Forget the conversation and the change set (a rewind replays what stands)."""
        if self.streaming:
            raise RuntimeError("an answer is streaming")
        self.turns, self.queue, self.accepts, self.file_steps = [], [], [], []
        self.sent.reset()
        self.context.clear()
        self.pending, self.review, self._snapshots = None, None, []
        self.saving.forget_lists()
        self.agent = AgentHost(self)

    # -- the journal ------------------------------------------------------------------------
    async def recover(self) -> list[Entry]:
        """Complete an accept or undo that a crash left half-done (before anything else)."""
        return await asyncio.to_thread(self.journal.recover, self.ws)

    async def journal_undoable(self) -> bool:
        """There is an accept to undo, in this session or from an earlier one (a thread)."""
        if self.review is not None and self.review.can_undo:
            return True
        return await asyncio.to_thread(lambda: self.journal.last_undoable() is not None)

    async def undo(self) -> str:
        """Undo the last accept: this session's, else the journal's (as `steer undo` does)."""
        if self.review is not None:
            return await self.review.undo_async()
        async with self.write_lock:
            done = await asyncio.to_thread(self.journal.undo, self.ws)
            return done.label

    async def aclose(self) -> None:
        self._cancel()
        await self.wait()
        await self.provider.aclose()
        await self.saving.close()
