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
from dataclasses import dataclass, field
from typing import Literal

from app.core import prompts
from app.core.agent import AGENT_EVENTS, AgentHost, ProseOnly
from app.core.diff import OPEN, HunkState, PendingDiff
from app.core.events import (
    Connected,
    Done,
    Error,
    PlanItem,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    Usage,
)
from app.core.formats import choose, fragments, make_parser
from app.core.journal import Entry, Journal
from app.core.provider import Provider, Request
from app.core.review import Review
from app.core.snapshot import Snapshot
from app.core.textfile import NotText
from app.core.workspace import Workspace

TurnState = Literal["connecting", "streaming", "done", "interrupted", "error"]


class ContextError(ValueError):
    """A file asked for as context cannot be used (outside the workspace, binary...)."""


@dataclass(eq=False)
class Turn:
    """One answer, and the one clock that times it (perf_counter seconds)."""

    instruction: str
    kind: Literal["ask", "redirect", "follow-up"] = "ask"
    chunks: list[str] = field(default_factory=list)
    size: int = 0  # characters in chunks
    reasoning: list[str] = field(default_factory=list)
    state: TurnState = "connecting"
    started: float = field(default_factory=time.perf_counter)  # the request was sent
    connected: float | None = None  # the back-end answered
    first_token: float | None = None
    ended: float | None = None
    deltas: int = 0
    usage: Usage | None = None
    server_tokens_per_s: float | None = None  # the back-end's own figure, when it sends one
    finish_reason: str | None = None
    error: Error | None = None
    plan: list[PlanItem] = field(default_factory=list)  # an agent's latest plan
    tools: dict[str, ToolCall] = field(default_factory=dict)  # an agent's tool calls, by id
    # a natively steered redirect: characters of the previous answer kept where it landed
    steered_at: int | None = None

    @property
    def text(self) -> str:
        return "".join(self.chunks)

    @property
    def live(self) -> bool:
        return self.state in ("connecting", "streaming")

    @property
    def tokens(self) -> int:
        return self.usage.completion if self.usage and self.usage.completion else self.deltas

    @property
    def elapsed(self) -> float:
        return (self.ended or time.perf_counter()) - self.started

    @property
    def ttft(self) -> float | None:
        return None if self.first_token is None else self.first_token - self.started

    @property
    def connect_time(self) -> float | None:
        return None if self.connected is None else self.connected - self.started

    @property
    def tokens_per_s(self) -> float | None:
        if self.first_token is None or self.deltas < 2:
            return None
        span = (self.ended or time.perf_counter()) - self.first_token
        return (self.deltas - 1) / span if span > 0 else None

    @property
    def complete(self) -> bool:
        return self.state == "done" and self.error is None and self.finish_reason == "stop"


class Session:
    def __init__(self, ws: Workspace, provider: Provider, *, fmt: str = "auto",
                 context: list[str] | None = None, max_tokens: int | None = None,
                 temperature: float | None = None) -> None:
        self.ws = ws
        self.provider = provider
        self.fmt_choice = fmt
        self.fmt = fmt
        self.fmt_reason = ""  # why this answer's format was chosen (shown in its title)
        self.context: list[str] = []
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
        self._steering: asyncio.Task[None] | None = None  # the answer a steer will cut
        self._snapshots: list[Snapshot] = []
        self.agent = AgentHost(self)  # plans, tool calls, reads, writes, permissions of agents
        self.journal = Journal.for_workspace(ws)
        self._undo_lock = asyncio.Lock()

    # -- context ---------------------------------------------------------------------------
    def add_context(self, raw: str) -> str:
        try:
            rel = self.ws.check_path(raw)
        except ValueError as exc:
            raise ContextError(str(exc)) from None
        if not self.ws.abspath(rel).is_file():
            raise ContextError(f"{rel}: no such file")
        if rel not in self.context:
            self.context.append(rel)
        return rel

    def remove_context(self, rel: str) -> None:
        if rel in self.context:
            self.context.remove(rel)

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
        if kind == "ask":
            self._snapshots = self._snapshot_context()
            self.pending = PendingDiff(self.ws, self._snapshots)
            self.review = Review(self.ws, self.pending, self.journal)
            self.review.on_decided = self.agent.settle
            self.history = []
            if self.fmt_choice != "auto":
                self.fmt, self.fmt_reason = self.fmt_choice, "as asked (--format)"
            else:
                choice = choose(caps, self.provider.model, [len(s.lines) for s in self._snapshots])
                self.fmt, self.fmt_reason = choice.fmt, choice.reason
            content = prompts.first_message(instruction, self._snapshots)
            if caps.agent:  # it reads the files it needs itself (through steer): it gets the words
                self.fmt, content = "agent", instruction
                self.fmt_reason = "the agent edits files itself"
        else:
            assert self.pending is not None and previous is not None
            if content is None:
                content = prompts.steer_message(instruction, self.pending.hunks,
                                                interrupted=previous.state == "interrupted")
            self.pending.begin_turn()
        assert self.pending is not None
        # a whole-file answer showing part of a file keeps the rest, unless this instruction
        # may mean deleting code (then the deletion is proposed, flagged)
        self.pending.removal_asked = fragments.asks_removal(instruction)
        messages = [{"role": "user", "content": content}] if caps.agent else [
            {"role": "system", "content": prompts.system_prompt(self.fmt)}, *self.history,
            {"role": "user", "content": content}]
        prefill = prompts.prefill(self.fmt, self._snapshots) if caps.prefill else ""
        turn = turn or Turn(instruction, kind)
        self.turns.append(turn)
        known = frozenset(s.path for s in self._snapshots)
        self._parser = ProseOnly() if caps.agent else make_parser(self.fmt, known)
        self._messages = messages
        # a whole-file answer mostly repeats the files: a back-end with predicted outputs
        # gets them as the prediction (it streams the unchanged parts at once)
        prediction = (prompts.prediction(self._snapshots)
                      if caps.predicted_outputs and self.fmt == "whole" and kind == "ask" else None)
        # a grammar-constrained back-end (llama.cpp) is held to the format's shape (a first
        # answer: a redirect or follow-up continues where the grammar would not fit)
        grammar = (prompts.grammar(self.fmt, self._snapshots)
                   if caps.grammar and caps.prefill and kind == "ask" else None)
        max_tokens = self.max_tokens
        if max_tokens is None and caps.model_class == "tiny":
            max_tokens = prompts.answer_budget(self._snapshots)
        req = Request(messages, model=self.provider.model, max_tokens=max_tokens,
                      temperature=self.temperature, prefill=prefill, prediction=prediction,
                      grammar=grammar, context=list(self.context))
        if prefill:
            self._feed(turn, prefill)
        self._task = asyncio.get_running_loop().create_task(
            self._run(turn, req, self._parser, events))
        return turn

    def _feed(self, turn: Turn, text: str) -> None:
        turn.chunks.append(text)
        turn.size += len(text)
        self.pending.feed(self._parser.feed(text))  # type: ignore[union-attr]

    async def _run(self, turn: Turn, req: Request, parser, events=None) -> None:
        pending = self.pending
        assert pending is not None
        try:
            async for ev in events if events is not None else self.provider.stream(req):
                t = type(ev)
                if t is TextDelta:
                    if turn.first_token is None:
                        turn.first_token = time.perf_counter()
                        turn.state = "streaming"
                    turn.deltas += 1
                    turn.chunks.append(ev.text)
                    turn.size += len(ev.text)
                    pending.feed(parser.feed(ev.text))
                    self.wake()
                elif t is ReasoningDelta:
                    if turn.first_token is None:
                        turn.first_token = time.perf_counter()
                        turn.state = "streaming"
                    turn.reasoning.append(ev.text)
                elif t is Connected:
                    turn.connected = time.perf_counter()
                elif t is Usage:
                    turn.usage = ev
                elif t is Error:
                    turn.error = ev
                elif t is Done:
                    turn.finish_reason = ev.finish_reason
                    turn.server_tokens_per_s = ev.server_tokens_per_s
                elif t in AGENT_EVENTS:
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
        # the conversation continues from whatever the model managed to say
        self.history = [*self._messages[1:], {"role": "assistant", "content": turn.text}]

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
        async with self._undo_lock:
            done = await asyncio.to_thread(self.journal.undo, self.ws)
            return done.label

    async def aclose(self) -> None:
        self._cancel()
        await self.wait()
        await self.provider.aclose()
