"""A conversation about one change set: turns, steering, the queue, and the records they make.

A change set (app/core/review/change_set.py) is a PendingDiff over bases snapshotted when its
first request was made, with its review. While
it still has undecided hunks, every new message (a redirect, a follow-up) continues the same
change set: the model sees its own previous answer and the user's decisions, and its new
edits land in the same pending diff. Once everything is decided, the next message starts a
new change set on fresh snapshots of the disk.

The conversation sent only grows (DESIGN rule 10): a new change set appends what is new (the
files that changed since the model saw them, the decisions it was not told) after the
conversation so far, never edits an earlier message, so every request continues the last
(previous_response_id, server prefix caches). Only a rewind, a file the user took out of
the context, or a window it would overflow starts it afresh; the title says why (sent.full).

Elsewhere: the answer streaming now (answer.py), asking again (retries.py), what each saved
record does on a resume (replay.py), where it is saved (saving.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Sequence
from typing import Literal

from app.core.conversation import context_budget as budgets
from app.core.conversation import prompts, rules
from app.core.conversation.agent import AgentHost, ProseOnly
from app.core.conversation.answer import Answer
from app.core.conversation.context import ContextError, ContextFiles, Conversation
from app.core.conversation.saving import Saving
from app.core.conversation.turn import Turn, TurnState, end_record, restore_end
from app.core.disk.snapshot import Snapshot
from app.core.disk.workspace import Workspace
from app.core.edits import formats
from app.core.edits.diff import PendingDiff
from app.core.edits.formats import fragments, make_parser
from app.core.edits.formats.inferred import infer_from
from app.core.edits.hunks import DECIDED, EditError
from app.core.events import Event
from app.core.knowledge.service import Knowledge
from app.core.provider import Provider, Request
from app.core.review.change_set import ChangeSet
from app.core.review.events import Arrived, Decided, Rebasing, Settled
from app.core.review.events import Event as Change
from app.core.review.review import Review
from app.core.storage.log import SessionLog
from app.core.storage.records import (
    Accept,
    Files,
    Rebase,
    Snap,
    TurnRec,
)
from app.core.text.names import carried

__all__ = ["ContextError", "Session", "Turn", "TurnState", "end_record", "restore_end"]


class Session:
    def __init__(self, ws: Workspace, provider: Provider, *, fmt: str = "auto",
                 context: list[str] | None = None, max_tokens: int | None = None,
                 temperature: float | None = None, changes: ChangeSet | None = None) -> None:
        self.ws = ws
        self.provider = provider
        # the change sets, the review, the journal, the write lock (app/core/review/): the
        # session subscribes first, so a decision is saved before anyone else hears of it
        self.changes = changes or ChangeSet(ws)
        self.changes.subscribe(self._changed)
        self.saving = Saving(self)  # where it is saved, if it is (app/core/conversation/saving.py)
        self.fmt_choice = fmt
        self.fmt = fmt
        self.fmt_reason = ""  # why this answer's format was chosen (shown in its title)
        # what the model is shown (app/core/conversation/context.py), saved as it changes
        self.files = ContextFiles(ws, self.saving.save_lists)
        for p in context or []:
            self.files.add(p)
        self.max_tokens = max_tokens
        self.temperature = temperature
        # `Arrived` is published when text arrives after the UI last looked (take_data), so
        # that a UI can schedule one frame per burst instead of reacting to every token
        self._data_signalled = False
        self.sent = Conversation(self.files)  # what the model was sent (context.py)
        # the project's rules (AGENTS.md...: rules.py), in every request; None: left out
        self.rules: rules.ProjectRules | None = rules.ProjectRules(ws)
        self.rules_now: rules.Rules | None = None  # what the last request read
        self.attached_now: list[str] = []  # shown whole to a model without look-ups (attach)
        self.turns: list[Turn] = []
        self.queue: list[str] = []
        self._task: asyncio.Task[None] | None = None  # the running answer (or a steer)
        self._answer: Answer | None = None  # the last answer opened (answer.py)
        self._steering: asyncio.Task[None] | None = None  # the answer a steer will cut
        self._snapshots: list[Snapshot] = []
        self.agent = AgentHost(self)  # plans, tool calls, reads, writes, permissions of agents
        # what checkpoints need: each accept's journal step with the turn it belongs to
        self.accepts: list[tuple[int, str]] = []
        self.file_steps: list[Files] = []  # files rewound to a checkpoint, or redone
        self.knowledge: Knowledge | None = None  # the repository map, look-ups (service.py)

    # -- context (app/core/conversation/context.py) -------------------------------------------
    @property
    def context(self) -> list[str]:
        return self.files.paths

    def budget(self, draft: str = "") -> budgets.Budget:
        """The next request's size against the model's context window (and the map's)."""
        fmt = self.fmt if self.turn else self.fmt_choice
        tokens = self.knowledge.budget(self.provider) if self.knowledge else 0
        return self.sent.budget(draft, fmt, self.provider.context_window, map_tokens=tokens)

    # -- state -----------------------------------------------------------------------------
    @property
    def pending(self) -> PendingDiff | None:
        return self.changes.pending

    @property
    def review(self) -> Review | None:
        return self.changes.review

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
    def answer(self) -> Answer | None:
        """The last answer opened (streaming, or ended)."""
        return self._answer

    @property
    def tentative(self) -> str:
        """The answer's prose not yet final (see StreamParser.tentative)."""
        answer = self._answer
        return answer.tentative if answer is not None and answer.turn is self.turn else ""

    def wake(self) -> None:
        """Something arrived (text, an agent's request): tell the UI once per frame."""
        if not self._data_signalled:
            self._data_signalled = True
            self.changes.publish(Arrived())

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
        return self.send(instruction, "follow-up" if going_on else "ask")

    def attached(self, shown: Sequence[str], instruction: str, shown_bytes: int | None = None
                 ) -> list[str]:
        """The files a model without look-ups is shown besides `shown` (the context and the
        files the instruction names): the map's top-ranked ones that fit (Knowledge.attach);
        none for a model that can look files up."""
        know = self.knowledge
        if know is None or not know.blind(self.provider):
            return []
        if shown_bytes is None:
            shown_bytes = 0
            for p in shown:
                with contextlib.suppress(OSError):
                    shown_bytes += os.path.getsize(self.ws.root / p)
        return know.attach(instruction, shown, self.provider.context_window, shown_bytes)

    def send_back(self, message: str) -> Turn:
        """Word on the answer that ended (a failing check's output, F) as the next message:
        appended to the conversation, and, as a redirect's, the new answer's hunks replace
        the still-open ones where it proposes them again; the ones it leaves are kept out of
        a bulk accept. While an answer streams, a redirect."""
        if self.streaming or self.pending is None or self.turn is None:
            return self.start(message)
        return self.send(message, "redirect")

    @property
    def refused(self) -> list[EditError]:
        """The edits of the answer on screen that could not be applied."""
        pending = self.pending
        return [e for e in pending.errors if e.turn == pending.turn] if pending else []

    @property
    def failed(self) -> Turn | None:
        """The last request, failed before any answer text: the one a retry sends again."""
        turn = self.turn
        return turn if turn is not None and turn.failed and not self.streaming else None

    async def ask(self, instruction: str) -> Turn:
        """Send and wait for the answer to end (what `steer run` does)."""
        turn = self.start(instruction)
        await self.wait()
        return turn

    async def wait(self) -> None:
        while self._task is not None and not self._task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self._task)
        await self.changes.arrivals.settle()

    def redirect(self, instruction: str) -> Turn:
        """Stop the running answer and continue from it with a new instruction (decisions kept
        and told); a back-end that steers natively cuts it and goes on, no new request."""
        turn = self.turn
        if (self.provider.capabilities.native_steer and self._steering is None
                and turn is not None and turn.state == "streaming" and self.streaming):
            return self._steer(instruction)
        self._cancel()
        return self.send(instruction, "redirect")

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
            if old.live and self._answer is not None:
                self._answer.finish(interrupted=True)
            self.send(instruction, "redirect", turn=turn)
            return
        await asyncio.wait([cut])  # the server ends the old answer where the steer landed
        self._steering = None
        turn.steered_at = old.size
        self.send(instruction, "redirect", turn=turn, content=req.messages[-1]["content"],
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
        turn, answer = self.turn, self._answer
        if turn is not None and turn.live and answer is not None:
            answer.finish(interrupted=True)
        return True

    def send(self, instruction: str, kind: Literal["ask", "redirect", "follow-up"], *,
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
            # a model that cannot look files up is shown the top-ranked ones whole
            extra = self.files.now(self.attached([s.path for s in snapshots], instruction,
                                                 sum(map(_size, snapshots))))
            self.attached_now = [s.path for s in extra]
            snapshots += extra
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
            if formats.get(self.fmt).agent != caps.agent:  # a resumed session, another back-end
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
        rule_items = self.rules_items(bases, fresh) if kind == "ask" and not caps.agent else []
        rec = TurnRec(kind=kind, instruction=instruction, content=content, fmt=fmt,
                      agent=caps.agent, prefill=prefill, steered_at=turn.steered_at,
                      bases=None if snapshots is None else [Snap.of(s) for s in snapshots],
                      continues=continues, full=full, time=time.time(), map=repo_map,
                      rules=rule_items)
        self.open_turn(rec, turn, snapshots)
        assert self._answer is not None  # _open_turn opened this answer
        req = prompts.request(self._answer.messages, caps, self.provider.model, fmt, bases,
                              first=kind == "ask", prefill=prefill, max_tokens=self.max_tokens,
                              temperature=self.temperature, context=list(self.context),
                              tools=know.offer() if know is not None else (None, 0))
        self._task = asyncio.get_running_loop().create_task(
            self._run(self._answer, events if events is not None else self.provider.stream(req)))
        return turn

    def rules_items(self, bases: list[Snapshot], fresh: bool) -> list[str]:
        """The project's rules for a request showing `bases` (rules.py), when the conversation
        does not hold them as they are now: none, or one item (the rules, or word that they
        are gone)."""
        now = self.rules.read(s.path for s in bases) if self.rules is not None else None
        self.rules_now = now
        held = None if fresh else self.sent.rules
        item = now.item if now is not None else ""
        if item:
            return [] if item == held else [item]
        return [rules.GONE] if held not in (None, rules.GONE) else []

    def open_turn(self, rec: TurnRec, turn: Turn, snapshots: list[Snapshot] | None) -> None:
        """What a request opens: a change set for an ask, the conversation so far, the
        parser. Shared by a live turn and one replayed from the session's log."""
        afresh = not rec.continues if rec.continues is not None else not (  # an older log:
            self.turn is not None and self.turn.state in ("interrupted", "error"))  # went on
        old_pending = self.pending
        if snapshots is not None:
            self._snapshots = snapshots
            pending = self.changes.open(snapshots)
            self.fmt = rec.fmt
        else:
            assert old_pending is not None
            pending = old_pending
            pending.begin_turn(redirect=rec.kind == "redirect")
        # a whole-file answer showing part of a file keeps the rest, unless this instruction
        # may mean deleting code (then the deletion is proposed, flagged)
        pending.removal_asked = fragments.asks_removal(rec.instruction)
        messages = self.sent.open(rec.content, self.fmt, old_pending, snapshots,
                                  afresh=afresh, agent=rec.agent, repo_map=rec.map,
                                  rules=rec.rules)
        self.sent.full = rec.full
        turn.prose_from = len(pending.prose)
        turn.pending, turn.pturn = pending, pending.turn
        turn.content = rec.content
        self.turns.append(turn)
        known = frozenset(carried(s.path) for s in self._snapshots)  # as the request names them
        # a block naming no file may be a context file's whole text, as small models write it
        infer = infer_from({carried(s.path): s.lines for s in self._snapshots if s.exists})
        parser = ProseOnly() if rec.agent else make_parser(self.fmt, known, self.ws.has_file,
                                                             infer)
        self._answer = Answer(self, turn, parser, pending, messages)
        self.saving.save(rec)
        self.saving.save_lists()
        if rec.prefill:
            self._answer.feed(rec.prefill)

    async def _run(self, answer: Answer, events: AsyncIterator[Event]) -> None:
        await answer.run(events)
        if self.queue and answer.turn.complete and self._task is asyncio.current_task():
            self._task = None  # the queue's next message goes as soon as an answer completes
            self.start(self.queue.pop(0))

    def checkpoint(self, rec: Accept) -> None:
        """An accept that wrote something is a checkpoint of its turn (rewind.py)."""
        if rec.entry and rec.hunks:
            self.accepts.append((rec.turn, rec.entry))

    # -- the change set's events (app/core/review/events.py): the session hears them first --
    def _changed(self, ev: Change) -> None:
        if isinstance(ev, Decided):  # a decision the review carried out, for the log
            rec = ev.record
            if type(rec) is Accept:  # an accept checkpoints its turn
                rec.turn = max(len(self.turns) - 1, 0)
                self.checkpoint(rec)
            self.saving.save(rec)
            self.saving.save_lists()
        elif isinstance(ev, Settled):  # an agent's write waits for its hunks' decision
            self.agent.settle()
        elif isinstance(ev, Rebasing) and self.log is not None:  # a resume replays it
            self.saving.save(Rebase(path=ev.path, reason=ev.reason,
                                    snap=None if ev.snapshot is None else Snap.of(ev.snapshot)))

    def attach(self, log: SessionLog, *, branch: str | None = None, created: float | None = None,
               forked_from: str | None = None) -> None:
        """Save this session from now on into `log`: what follows is appended to it."""
        self.saving.attach(log, branch=branch, created=created, forked_from=forked_from)
        self.changes.read_through(self.saving.resolver())

    def reset(self) -> None:
        """Forget the conversation and the change set (a rewind replays what stands)."""
        if self.streaming:
            raise RuntimeError("an answer is streaming")
        self.turns, self.queue, self.accepts, self.file_steps = [], [], [], []
        self.sent.reset()
        self.context.clear()
        self.changes.close()
        self._snapshots = []
        self.saving.forget_lists()
        self.agent = AgentHost(self)

    async def aclose(self) -> None:
        self._cancel()
        await self.wait()
        await self.provider.aclose()
        await self.saving.close()


def _size(snap: Snapshot) -> int:
    """About the bytes a file takes in a request (its lines as read)."""
    return sum(len(t) + 1 for t in snap.lines)
