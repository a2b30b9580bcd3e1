"""The answer streaming now: the back-end's events into the turn, the change set and the log.

The hot path of steer: each text delta goes through the answer's parser into the pending
diff, then to the log, then wakes the UI once per burst; look-ups go to the knowledge, an
agent's edits to the agent host, the rest (reasoning, usage, retries, errors, the end) to
the turn. When the answer ends (done, Esc, a steer cutting it, a back-end failure) `finish`
closes its edits and tells the conversation what the model said.

Session (app/core/conversation/session.py) opens one per turn and holds the task that runs
it; this module does not know Session, only what it needs of one (`Host`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol

from app.core.conversation.agent import AGENT_EVENTS, AgentHost
from app.core.conversation.context import Conversation
from app.core.conversation.saving import Saving
from app.core.conversation.turn import Turn, end_record
from app.core.edits.diff import PendingDiff
from app.core.edits.formats.base import StreamParser
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
from app.core.review.change_set import ChangeSet
from app.core.review.events import Ended
from app.core.storage.records import AgentRec

if TYPE_CHECKING:
    from app.core.knowledge.service import Knowledge


class Host(Protocol):
    """What an answer needs of its session."""

    changes: ChangeSet
    saving: Saving
    sent: Conversation
    agent: AgentHost
    knowledge: Knowledge | None

    @property
    def context(self) -> list[str]: ...
    def wake(self) -> None: ...


class Answer:
    def __init__(self, host: Host, turn: Turn, parser: StreamParser, pending: PendingDiff,
                 messages: list[dict]) -> None:
        self.host = host
        self.turn = turn
        self.parser = parser
        self.pending = pending
        self.messages = messages  # the request it answers
        self.rid: str | None = None  # the id the server keeps it by (Done)

    @property
    def tentative(self) -> str:
        """Its prose not yet final (see StreamParser.tentative)."""
        return self.parser.tentative() if self.turn.live else ""

    def feed(self, text: str) -> None:
        """Text of the answer not from the back-end now (a prefill, a resume's)."""
        self.turn.chunks.append(text)
        self.turn.size += len(text)
        self.pending.feed(self.parser.feed(text))

    async def run(self, events: AsyncIterator[Event]) -> None:
        """Take the back-end's events until the answer ends (or the task is cancelled)."""
        host, turn, parser, pending = self.host, self.turn, self.parser, self.pending
        log, saving, kick = host.saving.log, host.saving, host.changes.kick
        clock = time.perf_counter
        try:
            async for ev in events:
                turn.last_data = clock()  # what a stall is measured from
                if type(ev) is TextDelta:  # (types compared by identity: the hot path)
                    turn.add_text(ev.text)
                    pending.feed(parser.feed(ev.text))
                    if log is not None:  # after the feed: a base it read is logged first
                        log.text(ev.text)
                    host.wake()
                elif type(ev) in LOOKUP_EVENTS and host.knowledge is not None:
                    host.knowledge.handle(turn, ev, host.context)  # type: ignore[arg-type]
                    host.wake()
                elif type(ev) in AGENT_EVENTS:
                    if type(ev) is FileEdit:
                        saving.save(AgentRec(kind="edit", path=ev.path, old=ev.old, new=ev.new))
                    elif type(ev) is FileWrite:
                        saving.save(AgentRec(kind="write", path=ev.path, new=ev.content))
                    host.agent.handle(turn, ev)
                else:  # reasoning, the connection, usage, a retry, an error, the end
                    turn.take(ev)
                    if type(ev) is ReasoningDelta and log is not None:
                        log.reasoning(ev.text)
                    elif type(ev) is Retrying:  # the back-end waits: say so on screen
                        host.wake()
                    elif type(ev) is Done:
                        self.rid = ev.response_id
                kick()  # edits that completed: placed against the disk now
        except asyncio.CancelledError:
            if turn.live:
                self.finish(interrupted=True)
            kick()
            raise
        except Exception as exc:  # a provider bug must not leave the UI streaming forever
            turn.error = Error("protocol", f"{type(exc).__name__}: {exc}")
        if turn.live:  # a steered answer ends as interrupted, where the server cut it
            self.finish(interrupted=turn.finish_reason == "steered")
        kick()

    def finish(self, *, interrupted: bool) -> None:
        """The answer ended: its edits close, and the conversation goes on from whatever
        the model said, with its look-ups as sent; a request failed before it said anything
        never reached it (a retry sends it again)."""
        host, turn, pending = self.host, self.turn, self.pending
        turn.end(interrupted=interrupted)
        pending.feed(self.parser.finish(complete=turn.complete))
        pending.finish()
        host.agent.end_turn()
        rid, self.rid = (self.rid if turn.complete else None), None
        if not turn.failed:
            host.sent.reached(self.messages, turn.text[turn.lookup_chars:], rid, turn.lookups)
        if host.saving.log is not None:
            host.saving.save(end_record(turn).model_copy(update={"response_id": rid}))
            host.saving.save_lists()
        host.changes.publish(Ended(turn))  # after it is saved: a check may start on it
