"""One answer and its one clock: what was asked, what arrived and when, how it ended.

The session (app/core/conversation/session.py) opens a turn per request and feeds it the provider's
events; the front-ends read it (app/view). Besides the figures (time to first token,
tokens/s), a turn knows when the back-end last sent anything and the retries it announced,
so a front-end can say "no data for 12 s" or "retrying 2/3 in 1 s (HTTP 500)" on every
frame, also when nothing arrives.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from app.core.edits.diff import PendingDiff
from app.core.events import (
    Connected,
    Done,
    Error,
    Event,
    PlanItem,
    ReasoningDelta,
    Retrying,
    ToolCall,
    Usage,
)
from app.core.storage.records import End, TurnState

__all__ = ["Turn", "TurnState", "end_record", "restore_end"]


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
    # the change set its edits go into, and its number there (PendingDiff.turn)
    pending: PendingDiff | None = field(default=None, repr=False)
    pturn: int = 0
    finish_reason: str | None = None
    error: Error | None = None
    content: str = field(default="", repr=False)  # the user message sent (a retry resends it)
    retries: list[Retrying] = field(default_factory=list)  # announced by the back-end
    retry_at: float | None = None  # when the last announced retry goes out
    last_data: float | None = None  # the last event from the back-end arrived
    plan: list[PlanItem] = field(default_factory=list)  # an agent's latest plan
    tools: dict[str, ToolCall] = field(default_factory=dict)  # an agent's tool calls, by id
    # a natively steered redirect: characters of the previous answer kept where it landed
    steered_at: int | None = None
    prose_from: int = 0  # the change set's explanation lines before this answer's
    # its look-up rounds' calls and outputs as the back-end sent them (the conversation
    # keeps them; the log too, so a resume rebuilds it), and the answer text before the last
    lookups: list[dict] = field(default_factory=list, repr=False)
    lookup_chars: int = 0
    # the check of this answer's proposal (variants/proposal_check.py): its one line ("" none
    # yet), and the end of its output when it failed
    check: str = ""
    check_output: str = ""

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
    def failed(self) -> bool:
        """It ended with an error before the model said a word (a refused key, a rate limit,
        a 5xx, a refused connection, a crashed model): nothing of it is shown or kept, so
        sending it again as a new request loses nothing."""
        return (self.state == "error" and self.deltas == 0 and not self.tools
                and not self.plan)

    def retry_in(self, now: float) -> float | None:
        """Seconds until the announced retry goes out, while the back-end waits for it."""
        if self.retry_at is None or not self.live or now >= self.retry_at:
            return None
        return self.retry_at - now

    def quiet(self, now: float) -> float:
        """Seconds the back-end has sent nothing: since the last event, the request, or the
        announced retry going out, whichever came last."""
        since = self.last_data if self.last_data is not None else self.started
        if self.retry_at is not None and self.retry_at > since:
            since = self.retry_at
        return max(0.0, now - since)

    @property
    def complete(self) -> bool:
        return self.state == "done" and self.error is None and self.finish_reason == "stop"

    def add_text(self, text: str) -> None:
        """A piece of the answer's text arrived (the first starts the token clock)."""
        if self.first_token is None:
            self.first_token = time.perf_counter()
            self.state = "streaming"
        self.deltas += 1
        self.chunks.append(text)
        self.size += len(text)

    def take(self, ev: Event) -> None:
        """What an event tells of this answer's course: reasoning, the connection, usage, a
        retry announced, an error, how it ended. (Its text goes through the session's
        parser, its agent events to the agent host: app/core/conversation/session.py.)"""
        if type(ev) is ReasoningDelta:
            if self.first_token is None:
                self.first_token = time.perf_counter()
                self.state = "streaming"
            self.reasoning.append(ev.text)
        elif type(ev) is Connected:
            self.connected = time.perf_counter()
        elif type(ev) is Usage:
            self.usage = ev
        elif type(ev) is Retrying:  # the back-end waits, then asks again: say so on screen
            self.retries.append(ev)
            self.retry_at = (self.started if self.last_data is None else self.last_data) + ev.delay
        elif type(ev) is Error:
            self.error = ev
        elif type(ev) is Done:
            self.finish_reason = ev.finish_reason
            self.server_tokens_per_s = ev.server_tokens_per_s

    def end(self, *, interrupted: bool) -> None:
        """The answer ended: stopped (Esc, a redirect, a steer), failed, or done."""
        self.ended = time.perf_counter()
        if interrupted:
            self.state = "interrupted"
            self.finish_reason = self.finish_reason or "cancelled"
        elif self.error is not None:
            self.state = "error"
        else:
            self.state = "done"


def end_record(turn: Turn) -> End:
    """A turn's end as the session log keeps it: how it ended and its figures (durations,
    since the clock of one process means nothing to the next)."""
    u = turn.usage
    return End(state=turn.state, finish_reason=turn.finish_reason,
               error=(turn.error.kind, turn.error.message) if turn.error else None,
               usage=(u.prompt, u.completion) if u else None, deltas=turn.deltas,
               server_tps=turn.server_tokens_per_s, ttft=turn.ttft, connect=turn.connect_time,
               elapsed=turn.elapsed, plan=[(p.content, p.status, p.priority) for p in turn.plan],
               tools=[(c.id, c.title, c.kind, c.status) for c in turn.tools.values()],
               retries=[(r.attempt, r.attempts, r.delay, r.reason) for r in turn.retries],
               lookups=turn.lookups, lookup_chars=turn.lookup_chars)


def restore_end(turn: Turn, rec: End) -> None:
    """The figures of a replayed turn, on this process's clock."""
    now = time.perf_counter()
    turn.started = now - rec.elapsed
    turn.ended = now
    turn.first_token = None if rec.ttft is None else turn.started + rec.ttft
    turn.connected = None if rec.connect is None else turn.started + rec.connect
    turn.deltas = rec.deltas
    turn.usage = Usage(*rec.usage) if rec.usage else None
    turn.server_tokens_per_s = rec.server_tps
    turn.finish_reason = rec.finish_reason
    turn.error = Error(rec.error[0], rec.error[1]) if rec.error else None
    turn.plan = [PlanItem(*p) for p in rec.plan]
    turn.tools = {c[0]: ToolCall(*c) for c in rec.tools}
    turn.retries = [Retrying(*r) for r in rec.retries]
    turn.lookups, turn.lookup_chars = list(rec.lookups), rec.lookup_chars
