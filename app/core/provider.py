"""The contract every back-end implements, and what each one declares it can do.

core drives a back-end only through this module: it never imports app/providers, and no
behaviour is decided by a provider's name (the name is for display). A back-end subclasses
`Provider`, declares its `Capabilities`, and the factory (app/providers/factory.py) builds
it from the settings.

`stream(request)` yields events (app.core.events): `Connected` once the back-end answered
(response headers, model loaded), then TextDelta / ReasoningDelta / Usage, and exactly one
Done at the end (preceded by an Error when it failed). A back-end that sends a failed request
again (an error status, a refused connection, a socket closed before any answer) yields
`Retrying` before it waits, every time: a retry is never silent, and never made once answer
text has arrived. An agent (`capabilities.agent`) also
yields plans, tool calls, structured edits and requests (reads, writes, permissions) that
the session answers through the future each request carries. Cancelling the task that iterates
cancels the generation upstream, as `capabilities.cancel` says how.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from app.core.events import Event

# seconds a back-end may send nothing before the answer is given up as stalled (the
# `stall_timeout` setting; --stall-timeout)
STALL_TIMEOUT = 120.0


@dataclass
class Request:
    # chat messages; a look-up round adds its back-end's own items (a `tool_calls` message)
    messages: list[dict[str, Any]]
    model: str = ""
    max_tokens: int | None = None
    temperature: float | None = None
    prefill: str = ""  # the answer's first characters (sent only to `prefill` back-ends)
    prediction: str | None = None  # predicted output (sent only to `predicted_outputs` ones)
    grammar: str | None = None  # a GBNF grammar the answer must follow (only to `grammar` ones)
    context: list[str] = field(default_factory=list)  # files the user attached (relative paths)
    # look-up tools offered to the model (neutral specs: name, description, JSON-schema
    # parameters; app/core/knowledge/tools.py), only to `tools` back-ends; after `tool_rounds`
    # rounds the model is told to answer (tool_choice none)
    tools: list[dict[str, Any]] | None = None
    tool_rounds: int = 0
    tool_choice: str = "auto"  # a back-end's own rounds set "none" past `tool_rounds`


@dataclass(frozen=True, slots=True)
class Capabilities:
    warm_up: bool = False  # warm() does real work (loads a model, opens a socket): start it early
    prefill: bool = False  # continues an answer from Request.prefill
    native_steer: bool = False  # steer() redirects the running answer without a new request
    predicted_outputs: bool = False  # honours Request.prediction
    grammar: bool = False  # constrains its answer by Request.grammar (GBNF, llama.cpp)
    cancel: Literal["close", "message", "thread"] = "close"  # how a cancel reaches the generation
    preferred_format: str | None = None  # the edit format this back-end's model is trained on
    # which measured exact-apply rate of each format describes the model (Cost in each
    # format's record, app/core/edits/formats/costs.py):
    # "tiny" (the embedded 135M model) or "capable"
    model_class: str = "capable"
    # an agent (ACP): it is sent the user's words only and keeps its own conversation; its
    # text is prose, its edits arrive as FileEdit / FileWrite events (app.core.events)
    agent: bool = False
    # calls look-up tools (Request.tools): yields LookupCall, awaits its reply, sends the
    # result and goes on (app/core/events.py)
    tools: bool = False
    # continue_from() takes up a conversation the server keeps by the response id Done gave
    # (a session resumed in a new process goes on sending only what is new)
    continue_from: bool = False
    # can answer several requests at once, each from its own Provider instance (parallel
    # variants): N sockets over the Responses WebSocket, N connections over SSE, the local
    # server queues them. An ACP agent declares nothing of the kind (ACP's initialize has
    # no such capability), so it is False there
    parallel: bool = False
    # sends Provider.seed with every request (Chat Completions `seed`, steer serve's `seed`
    # extension of response.create); OpenAI's Responses API takes no seed
    seed: bool = False


class SteerRefused(RuntimeError):
    """The back-end cannot steer this answer now: cancel and resend instead."""


class Provider:
    """Base class of every back-end. Subclasses set `name`, `model`, `capabilities` and
    implement `stream`; the rest has safe defaults."""

    name: str = "provider"
    model: str = ""
    capabilities: Capabilities = Capabilities()
    context_window: int | None = None  # tokens the model takes in (configured, known or reported)
    # the environment variable the API key is read from (its name, never its value): an
    # error that refuses the key says which variable to check
    key_env: str | None = None
    # sent with every request when set and `capabilities.seed` (parallel variants: seeds
    # 1..N, so N answers of one model differ and each can be reproduced); the label shows it
    # as "#N" either way, so N variants of one model stay told apart
    seed: int | None = None

    def stream(self, request: Request) -> AsyncIterator[Event]:
        raise NotImplementedError

    async def warm(self) -> None:
        """Prepare for the first request (load the model, open the connection)."""

    async def steer(self, request: Request) -> AsyncIterator[Event]:
        """Only with `capabilities.native_steer`: give the answer now streaming a new
        instruction (the request's last message). The running stream ends where the back-end
        cut it (Done("steered"), or Done("stop") when it finished first) and the returned
        iterator streams the answer that continues it, from everything the running stream
        delivered. Raises SteerRefused to fall back to cancel and resend."""
        raise SteerRefused(f"{self.name} cannot steer a running answer")

    def continue_from(self, response_id: str, messages: list[dict[str, str]], answer: str) -> None:
        """Only with `capabilities.continue_from`: the server keeps response `response_id`,
        `answer` to `messages`; the next request that extends them continues it."""

    async def probe_context_window(self) -> int | None:
        """What the server says the model's context window is, when it says (None)."""
        return None

    async def aclose(self) -> None:
        """Release connections and threads."""

    @property
    def label(self) -> str:
        base = f"{self.name}:{self.model}" if self.model else self.name
        return base if self.seed is None else f"{base} #{self.seed}"
