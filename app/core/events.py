"""What a provider yields while it streams.

Events are slotted dataclasses rather than pydantic models: thousands of them pass per
second on the hot path and they never cross a process boundary.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Literal


@dataclass(slots=True)
class TextDelta:
    text: str


@dataclass(slots=True)
class ReasoningDelta:
    text: str


@dataclass(slots=True)
class Usage:
    prompt: int
    completion: int
    # predicted outputs (Request.prediction): tokens of the prediction the answer kept, and
    # those it did not (billed as completion tokens all the same); None when none was sent
    accepted_prediction: int | None = None
    rejected_prediction: int | None = None


@dataclass(slots=True)
class Connected:
    """The back-end answered (response headers arrived, the model is loaded): the turn's
    clock records the connect time from it."""


ErrorKind = Literal["network", "http", "auth", "rate_limit", "stall", "protocol", "model", "agent",
                   "cancelled"]


@dataclass(slots=True)
class Error:
    kind: ErrorKind
    message: str
    retryable: bool = False


@dataclass(slots=True)
class Retrying:
    """The request failed before any answer text arrived and the back-end will send it again
    in `delay` seconds: yielded before it waits, so every retry is seen (the turn's title,
    `steer run`'s status line). `attempt` is the request about to be made, of `attempts`
    at most (the first one counts): "retrying 2/3 in 1 s (HTTP 500)"."""

    attempt: int
    attempts: int
    delay: float
    reason: str  # short: "HTTP 500", "HTTP 429", "connection refused", "socket closed"


@dataclass(slots=True)
class Done:
    finish_reason: str  # "stop", "length", "cancelled", "steered", "error", ...
    # figures only the server knows (llama-server, Groq and Cerebras send them); everything
    # the client can time itself is timed once, by the turn (app.core.conversation.session.Turn)
    server_tokens_per_s: float | None = None
    # the server's id of the response it keeps (Responses API): what a later request, also
    # from another process, continues (Provider.continue_from); a bookkeeping id, not part
    # of how the answer ended (two Done that differ only by it are equal)
    response_id: str | None = field(default=None, compare=False)


# -- what an agent (capabilities.agent, e.g. ACP) yields besides its text ---------------------
# An agent does not write edit syntax into its answer: its edits arrive structured, and it
# asks the client to read and write files and for permissions. Requests carry a future the
# session resolves; the back-end awaits it and answers the agent.


@dataclass(slots=True)
class PlanItem:
    content: str
    status: str = "pending"  # "pending", "in_progress", "completed"
    priority: str = "medium"


@dataclass(slots=True)
class Plan:
    """The agent's plan, complete each time (it replaces the previous one)."""

    entries: list[PlanItem]


@dataclass(slots=True)
class ToolCall:
    """What a tool call of the agent looks like now (each update repeats every field)."""

    id: str
    title: str
    kind: str | None = None  # "read", "edit", "execute", ... (ACP's ToolKind)
    status: str | None = None  # "pending", "in_progress", "completed", "failed"


@dataclass(slots=True)
class FileEdit:
    """A structured edit of one file: `old` replaced by `new`; `old` None means `new` is the
    whole file. `path` is as the agent sent it (absolute, usually)."""

    path: str
    old: str | None
    new: str
    tool: str = ""  # the tool call it came from


@dataclass(slots=True)
class FileWrite:
    """The agent asks to write a whole file. `reply` gets None once the change is accepted
    (or staged, in `steer run`), else the message the agent is told instead."""

    path: str
    content: str
    reply: asyncio.Future[str | None] = field(repr=False)


@dataclass(slots=True)
class FileRead:
    """The agent reads a file through steer: `reply` gets steer's view of it (the proposal
    so far included), or an exception saying why not."""

    path: str
    line: int | None  # 1-based first line
    limit: int | None
    reply: asyncio.Future[str] = field(repr=False)


@dataclass(slots=True)
class PermissionOption:
    id: str
    name: str
    kind: str  # "allow_once", "allow_always", "reject_once", "reject_always"


@dataclass(slots=True)
class PermissionRequest:
    """The agent asks before running a tool. `reply` gets the chosen option's id, or None
    for "cancelled" (the turn ended)."""

    title: str
    options: list[PermissionOption]
    tool: ToolCall
    reply: asyncio.Future[str | None] = field(repr=False)


AgentEvent = Plan | ToolCall | FileEdit | FileWrite | FileRead | PermissionRequest
Event = Connected | TextDelta | ReasoningDelta | Usage | Retrying | Done | Error | AgentEvent
