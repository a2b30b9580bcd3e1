"""A conversation about one change set: turns, prompts, steering, queued follow-ups.

A change set is a PendingDiff over bases snapshotted when its first request was made. While
it still has undecided hunks, every new message (a redirect, a follow-up) continues the same
change set: the model sees its own previous answer and the user's decisions, and its new
edits land in the same pending diff. Once everything is decided, the next message starts a
new change set on fresh snapshots of the disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Literal

from app.core.conversation import context_budget as budgets
from app.core.conversation import prompts
from app.core.conversation.agent import AGENT_EVENTS, AgentHost, ProseOnly
from app.core.conversation.log import SessionLog
from app.core.conversation.records import (
    Accept,
    AgentRec,
    Context,
    End,
    Files,
    Info,
    Queue,
    Rebase,
    Snap,
    TurnRec,
)
from app.core.conversation.review import Review
from app.core.conversation.store import RecordingResolver
from app.core.conversation.turn import Turn, TurnState, end_record, restore_end
from app.core.disk.journal import Entry, Journal
from app.core.disk.snapshot import Snapshot
from app.core.disk.workspace import Workspace
from app.core.edits.diff import PendingDiff
from app.core.edits.formats import choose, fragments, make_parser
from app.core.edits.formats.base import StreamParser
from app.core.edits.hunks import OPEN, EditError, HunkState
from app.core.events import (
    Connected,
    Done,
    Error,
    FileEdit,
    FileWrite,
    ReasoningDelta,
    Retrying,
    TextDelta,
    Usage,
)
from app.core.provider import Provider, Request
from app.core.text.textfile import NotText

__all__ = ["ContextError", "Session", "Turn", "TurnState", "end_record", "restore_end"]


class ContextError(ValueError):
    """A file asked for as context cannot be used (outside the workspace, binary...)."""


class Session:
    def __init__(self, ws: Workspace, provider: Provider, *, fmt: str = "auto",
                 context: list[str] | None = None, max_tokens: int | None = None,
                 temperature: float | None = None) -> None:
        self.ws = ws
        self.provider = provider
        self.log: SessionLog | None = None  # where it is saved (app/core/conversation/log.py), if it is
        self.fmt_choice = fmt
        self.fmt = fmt
        self.fmt_reason = ""  # why this answer's format was chosen (shown in its title)
        self.context: list[str] = []
        self.outlined: set[str] = set()  # context files sent as their outline only
        self._outline_tokens: dict[tuple, int] = {}
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
        self.history: list[dict[str, str]] = []
        self.turns: list[Turn] = []
        self.queue: list[str] = []
        self._task: asyncio.Task[None] | None = None
        self._parser: StreamParser | None = None  # the answer streaming now
        self._steering: asyncio.Task[None] | None = None  # the answer a steer will cut
        self._snapshots: list[Snapshot] = []
        self.agent = AgentHost(self)  # plans, tool calls, reads, writes, permissions of agents
        self.journal = Journal.for_workspace(ws)
        # one write at a time (accept, undo), shared with the live rebase (app/core/git/sync.py)
        self.write_lock = asyncio.Lock()
        # what checkpoints need: each accept's journal step with the turn it belongs to
        self.accepts: list[tuple[int, str]] = []
        self.file_steps: list[Files] = []  # files rewound to a checkpoint, or redone
        self.rejections: list[str] = []  # earlier change sets' rejected proposals, and why
        self._resolver = ws  # what the pending diff reads bases through
        self._logged_lists: tuple[list[str], list[str]] = ([], [])
        self.branch: str | None = None
        self.created = time.time()
        self.forked_from: str | None = None

    # -- context ---------------------------------------------------------------------------
    def add_context(self, raw: str, *, outline: bool = False) -> str:
        """A file for the model to see: whole, or (`outline`) only its definitions."""
        try:
            rel = self.ws.check_path(raw)
        except ValueError as exc:
            raise ContextError(str(exc)) from None
        if not self.ws.abspath(rel).is_file():
            raise ContextError(f"{rel}: no such file")
        if outline:
            self.outlined.add(rel)
        else:
            self.outlined.discard(rel)
        if rel not in self.context:
            self.context.append(rel)
            self._log_lists()
        return rel

    def remove_context(self, rel: str) -> None:
        if rel in self.context:
            self.context.remove(rel)
            self._log_lists()
        self.outlined.discard(rel)

    def file_tokens(self, rel: str, *, outline: bool | None = None) -> int:
        """Estimated tokens of a context file as it would be sent (a stat, or the outline
        read once per version of the file)."""
        outline = rel in self.outlined if outline is None else outline
        try:
            st = self.ws.abspath(rel).stat()
        except OSError:
            return 0
        if not outline:
            return int(st.st_size / budgets.CHARS_PER_TOKEN) + 8
        key = (rel, st.st_mtime_ns, st.st_size)
        if key not in self._outline_tokens:
            try:
                lines = budgets.outline(self.ws.snapshot(rel))
            except (NotText, OSError):
                lines = []
            self._outline_tokens[key] = budgets.estimate_tokens("\n".join(lines)) + 16
        return self._outline_tokens[key]

    def budget(self, draft: str = "") -> budgets.Budget:
        """The next request's size against the model's context window. A follow-up carries
        the conversation so far; a new question the context files."""
        fmt = self.fmt if self.turn else self.fmt_choice
        used = budgets.estimate_tokens(prompts.system_prompt(fmt))
        used += budgets.estimate_tokens(draft)
        files = {rel: self.file_tokens(rel) for rel in self.context}
        if self._open_change_set():
            used += sum(budgets.estimate_tokens(m["content"]) for m in self.history)
        else:
            used += sum(files.values())
        return budgets.Budget(used, self.provider.context_window, files)

    # -- state -----------------------------------------------------------------------------
    @property
    def turn(self) -> Turn | None:
        return self.turns[-1] if self.turns else None

    @property
    def streaming(self) -> bool:
        """An answer is coming. False as soon as it is interrupted (the turn settles at once),
        even while the cancelled task still unwinds."""
        turn = self.turn
        return (self._task is not None and not self._task.done() and turn is not None
                and turn.live)

    def _open_change_set(self) -> bool:
        return self.pending is not None and any(h.state in OPEN or h.state == HunkState.STREAMING
                                                for h in self.pending.hunks)

    def _snapshot_context(self) -> list[Snapshot]:
        snaps = []
        for rel in self.context:
            try:
                snaps.append(self.ws.snapshot(rel).prepare())
            except NotText as exc:
                raise ContextError(str(exc)) from None
        return snaps

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
        return self._start(instruction, "follow-up" if self._open_change_set() else "ask")

    @property
    def refused(self) -> list[EditError]:
        """The edits of the answer on screen that could not be applied."""
        pending = self.pending
        return [e for e in pending.errors if e.turn == pending.turn] if pending else []

    def retry_refused(self) -> Turn | None:
        """Ask the model to redo the edits that could not be applied, showing it the files
        as they are now (a follow-up: decisions so far are kept and told)."""
        errors = self.refused
        if not errors or self.streaming or self.pending is None:
            return None
        snaps = []
        for path in dict.fromkeys(e.path for e in errors if e.path):
            with contextlib.suppress(ValueError, NotText, OSError):
                snap = self.ws.snapshot(self.ws.check_path(path))
                if snap.exists:
                    snaps.append(snap)
        text = prompts.retry_message([(e.path, e.message) for e in errors], snaps)
        content = prompts.steer_message(text, self.pending.hunks, interrupted=False)
        return self._start("retry the edits that could not be applied", "follow-up",
                           content=content)

    @property
    def failed(self) -> Turn | None:
        """The last request, when it failed before any answer text arrived: the one a retry
        sends again (and whose instruction the prompt gets back)."""
        turn = self.turn
        return turn if turn is not None and turn.failed and not self.streaming else None

    def retry_failed(self) -> Turn | None:
        """Send the failed request again, as a new request: a first question is asked afresh
        (the files as they are now), a follow-up or redirect resends the message it sent."""
        failed = self.failed
        if failed is None:
            return None
        if failed.kind == "ask":
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

    def redirect(self, instruction: str) -> Turn:
        """Stop the running answer and continue from it with a new instruction; decisions
        already made are kept and the model is told about them. A back-end that steers
        natively cuts the answer itself and goes on without a new request."""
        turn = self.turn
        if (self.provider.capabilities.native_steer and self._steering is None
                and turn is not None and turn.state == "streaming" and self.streaming):
            return self._steer(instruction)
        self._cancel()
        return self._start(instruction, "redirect")

    def _steer(self, instruction: str) -> Turn:
        assert self.pending is not None and self._task is not None
        turn = Turn(instruction, "redirect")  # its clock starts now: redirect -> first token
        content = prompts.steer_message(instruction, self.pending.hunks, interrupted=True)
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
        self._log_lists()

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
               turn: Turn | None = None, content: str | None = None, events=None) -> Turn:
        previous = self.turn
        caps = self.provider.capabilities
        snapshots: list[Snapshot] | None = None
        if kind == "ask":
            snapshots = self._snapshot_context()
            if self.fmt_choice != "auto":
                fmt, self.fmt_reason = self.fmt_choice, "as asked (--format)"
            else:
                choice = choose(caps, self.provider.model, [len(s.lines) for s in snapshots])
                fmt, self.fmt_reason = choice.fmt, choice.reason
            cut = self._continues()
            outlines = {s.path: budgets.outline(s) for s in snapshots if s.path in self.outlined}
            content = prompts.first_message(
                instruction, snapshots, outlines, rejected=self._rejected_so_far(),
                interrupted=cut and previous is not None and previous.state == "interrupted")
            if caps.agent:  # it reads the files it needs itself (through steer): it gets the words
                fmt, content = "agent", instruction
                self.fmt_reason = "the agent edits files itself"
        else:
            assert self.pending is not None and previous is not None
            if (self.fmt == "agent") != caps.agent:  # a resumed session, another back-end
                raise ContextError("this change set was made with an agent (--agent) and the "
                                   "back-end now is not one, or the other way round: decide its "
                                   "open hunks first, or resume it with the same back-end")
            if content is None:
                content = prompts.steer_message(instruction, self.pending.hunks,
                                                interrupted=previous.state == "interrupted")
            fmt = self.fmt
        turn = turn or Turn(instruction, kind)
        bases = snapshots if snapshots is not None else self._snapshots
        prefill = prompts.prefill(fmt, bases) if caps.prefill else ""
        rec = TurnRec(kind=kind, instruction=instruction, content=content, fmt=fmt,
                      agent=caps.agent, prefill=prefill, steered_at=turn.steered_at,
                      bases=None if snapshots is None else [Snap.of(s) for s in snapshots],
                      time=time.time())
        self._open_turn(rec, turn, snapshots)
        # a whole-file answer mostly repeats the files: a back-end with predicted outputs
        # gets them as the prediction (it streams the unchanged parts at once)
        prediction = (prompts.prediction(bases)
                      if caps.predicted_outputs and fmt == "whole" and kind == "ask" else None)
        # a grammar-constrained back-end (llama.cpp) is held to the format's shape (a first
        # answer: a redirect or follow-up continues where the grammar would not fit)
        grammar = (prompts.grammar(fmt, bases)
                   if caps.grammar and caps.prefill and kind == "ask" else None)
        max_tokens = self.max_tokens
        if max_tokens is None and caps.model_class == "tiny":
            max_tokens = prompts.answer_budget(bases)
        req = Request(self._messages, model=self.provider.model, max_tokens=max_tokens,
                      temperature=self.temperature, prefill=prefill, prediction=prediction,
                      grammar=grammar, context=list(self.context))
        self._task = asyncio.get_running_loop().create_task(
            self._run(turn, req, self._parser, events))
        return turn

    def _open_turn(self, rec: TurnRec, turn: Turn, snapshots: list[Snapshot] | None) -> None:
        """What a request opens: a change set for an ask, the conversation so far, the
        parser. Shared by a live turn and one replayed from the session's log."""
        if snapshots is not None:
            self.rejections = self._rejected_so_far()
            if not self._continues():
                self.history = []
            self._snapshots = snapshots
            self.pending = PendingDiff(self._resolver, snapshots)
            self.pending.on_rebase = self._rebased
            self.review = Review(self.ws, self.pending, self.journal, lock=self.write_lock)
            self.review.on_decided = self.agent.settle
            self.review.on_record = self._decided
            self.fmt = rec.fmt
        else:
            assert self.pending is not None
            self.pending.begin_turn()
        assert self.pending is not None
        # a whole-file answer showing part of a file keeps the rest, unless this instruction
        # may mean deleting code (then the deletion is proposed, flagged)
        self.pending.removal_asked = fragments.asks_removal(rec.instruction)
        messages = [{"role": "user", "content": rec.content}] if rec.agent else [
            {"role": "system", "content": prompts.system_prompt(self.fmt)}, *self.history,
            {"role": "user", "content": rec.content}]
        turn.prose_from = len(self.pending.prose)
        turn.pending, turn.pturn = self.pending, self.pending.turn
        turn.content = rec.content
        self.turns.append(turn)
        known = frozenset(s.path for s in self._snapshots)
        self._parser = ProseOnly() if rec.agent else make_parser(self.fmt, known, self.ws.has_file)
        self._messages = messages
        self._record(rec)
        self._log_lists()
        if rec.prefill:
            self._feed(turn, rec.prefill)

    def _continues(self) -> bool:
        """A new change set keeps the conversation when the last answer was cut short: what
        it said stays what it is, an interrupted answer, never silently dropped."""
        previous = self.turn
        return previous is not None and previous.state in ("interrupted", "error")

    def _rejected_so_far(self) -> list[str]:
        """The rejections a new change set must not forget: earlier ones, then the ones of
        the change set it replaces (with the user's reasons)."""
        pending = self.pending
        fresh = prompts.rejected_lines(pending.hunks) if pending is not None else []
        return (self.rejections + fresh)[-prompts.REJECTIONS_KEPT:]

    def _feed(self, turn: Turn, text: str) -> None:
        turn.chunks.append(text)
        turn.size += len(text)
        self.pending.feed(self._parser.feed(text))  # type: ignore[union-attr]

    async def _run(self, turn: Turn, req: Request, parser, events=None) -> None:
        pending = self.pending
        assert pending is not None
        log = self.log
        clock = time.perf_counter
        try:
            async for ev in events if events is not None else self.provider.stream(req):
                turn.last_data = clock()  # what a stall is measured from
                t = type(ev)
                if t is TextDelta:
                    if turn.first_token is None:
                        turn.first_token = time.perf_counter()
                        turn.state = "streaming"
                    turn.deltas += 1
                    turn.chunks.append(ev.text)
                    turn.size += len(ev.text)
                    pending.feed(parser.feed(ev.text))
                    if log is not None:  # after the feed: a base it read is logged first
                        log.text(ev.text)
                    self.wake()
                elif t is ReasoningDelta:
                    if turn.first_token is None:
                        turn.first_token = time.perf_counter()
                        turn.state = "streaming"
                    turn.reasoning.append(ev.text)
                    if log is not None:
                        log.reasoning(ev.text)
                elif t is Connected:
                    turn.connected = time.perf_counter()
                elif t is Usage:
                    turn.usage = ev
                elif t is Retrying:  # the back-end waits, then asks again: say so on screen
                    turn.retries.append(ev)
                    turn.retry_at = turn.last_data + ev.delay
                    self.wake()
                elif t is Error:
                    turn.error = ev
                elif t is Done:
                    turn.finish_reason = ev.finish_reason
                    turn.server_tokens_per_s = ev.server_tokens_per_s
                elif t in AGENT_EVENTS:
                    if t is FileEdit or t is FileWrite:
                        self._record(AgentRec(kind="edit", path=ev.path, old=ev.old, new=ev.new)
                                     if t is FileEdit else
                                     AgentRec(kind="write", path=ev.path, new=ev.content))
                    self.agent.handle(turn, ev)
        except asyncio.CancelledError:
            if turn.live:
                self._finalize(turn, parser, interrupted=True)
            raise
        except Exception as exc:  # a provider bug must not leave the UI streaming forever
            turn.error = Error("protocol", f"{type(exc).__name__}: {exc}")
        if turn.live:  # a steered answer ends as interrupted, where the server cut it
            self._finalize(turn, parser, interrupted=turn.finish_reason == "steered")
        if self.queue and turn.complete and self._task is asyncio.current_task():
            self._task = None
            self.start(self.queue.pop(0))

    def _finalize(self, turn: Turn, parser, *, interrupted: bool) -> None:
        turn.ended = time.perf_counter()
        if interrupted:
            turn.state = "interrupted"
            turn.finish_reason = turn.finish_reason or "cancelled"
        elif turn.error is not None:
            turn.state = "error"
        else:
            turn.state = "done"
        pending = self.pending
        assert pending is not None
        pending.feed(parser.finish(complete=turn.complete))
        pending.finish()
        self.agent.end_turn()
        # the conversation continues from whatever the model managed to say; a request that
        # failed before it said anything never reached the conversation (a retry sends it
        # again, and the model must not see it twice)
        if not turn.failed:
            self.history = [*self._messages[1:], {"role": "assistant", "content": turn.text}]
        if self.log is not None:
            self._record(end_record(turn))
            self._log_lists()

    # -- saving (app/core/conversation/log.py) -----------------------------------------------------
    def _record(self, rec) -> None:
        if self.log is not None:
            self.log.append(rec)
            if type(rec) in (TurnRec, End, Accept) or rec.t in ("reject", "undo"):
                self.log.summary(self.info())

    def _log_lists(self) -> None:
        """The queue and the context, when they changed since they were last logged (the UI
        edits the queue in place; this runs at every turn boundary and decision too)."""
        if self.log is None:
            return
        queue, context = self._logged_lists
        if self.queue != queue:
            self._record(Queue(items=list(self.queue)))
        if self.context != context:
            self._record(Context(items=list(self.context)))
        self._logged_lists = (list(self.queue), list(self.context))

    def _decided(self, rec) -> None:
        """A decision of the review, for the log; an accept is a checkpoint of this turn."""
        if type(rec) is Accept:
            rec.turn = max(len(self.turns) - 1, 0)
            if rec.entry is not None and rec.hunks:
                self.accepts.append((rec.turn, rec.entry))
        self._record(rec)
        self._log_lists()

    def _rebased(self, path: str, snap: Snapshot | None, reason: str) -> None:
        if self.log is not None:
            self._record(Rebase(path=path, snap=None if snap is None else Snap.of(snap),
                                reason=reason))

    def info(self) -> Info:
        """What `steer sessions` shows of this session."""
        assert self.log is not None
        pending = self.pending
        open_ = sum(1 for h in pending.hunks if h.state in OPEN) if pending is not None else 0
        first = self.turns[0].instruction if self.turns else ""
        return Info(id=self.log.id, root=str(self.ws.root), branch=self.branch,
                    created=self.created, updated=time.time(), first=first,
                    turns=len(self.turns), open=open_, forked_from=self.forked_from)

    def attach(self, log: SessionLog, *, branch: str | None = None, created: float | None = None,
               forked_from: str | None = None) -> None:
        """Save this session from now on into `log`: what follows is appended to it."""
        self.log = log
        self.branch = branch
        self.created = created or time.time()
        self.forked_from = forked_from
        self._resolver = self._recording_resolver()
        if self.pending is not None:
            self.pending.resolver = self._resolver
        self._log_lists()
        log.summary(self.info())

    def _recording_resolver(self) -> RecordingResolver:
        return RecordingResolver(self.ws, self._record)

    def reset(self) -> None:
        """Forget the conversation and the change set (a rewind replays what stands)."""
        if self.streaming:
            raise RuntimeError("an answer is streaming")
        self.turns, self.history, self.queue = [], [], []
        self.context = []
        self.pending = self.review = None
        self._snapshots = []
        self.accepts, self.rejections, self.file_steps = [], [], []
        self._logged_lists = ([], [])
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
        """Undo the last accept: this session's, else the journal's last undoable one (the
        same one `steer undo` reverts), so the app and the command line never disagree."""
        if self.review is not None:
            return await self.review.undo_async()
        async with self.write_lock:
            done = await asyncio.to_thread(self.journal.undo, self.ws)
            return done.label

    async def aclose(self) -> None:
        self._cancel()
        await self.wait()
        await self.provider.aclose()
        if self.log is not None:
            self._log_lists()
            await asyncio.to_thread(self.log.close)
