"""What a provider yields while it streams.

Events are slotted dataclasses rather than pydantic models: thousands of them pass per
second on the hot path and they never cross a process boundary.
"""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(slots=True)
class Connected:
    """The back-end answered (response headers arrived, the model is loaded): the turn's
    clock records the connect time from it."""


ErrorKind = Literal["network", "http", "auth", "rate_limit", "stall", "protocol", "model", "cancelled"]


@dataclass(slots=True)
class Error:
    kind: ErrorKind
    message: str
    retryable: bool = False


@dataclass(slots=True)
class Done:
    finish_reason: str  # "stop", "length", "cancelled", "steered", "error", ...
    # figures only the server knows (llama-server, Groq and Cerebras send them); everything
    # the client can time itself is timed once, by the turn (app.core.session.Turn)
    server_tokens_per_s: float | None = None


Event = Connected | TextDelta | ReasoningDelta | Usage | Done | Error
