"""What a provider yields while it streams, and what it records about each generation.

Events are slotted dataclasses rather than pydantic models: thousands of them pass per
second on the hot path and they never cross a process boundary.
"""

from __future__ import annotations

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


@dataclass(slots=True)
class Timings:
    """Measured by the client; `server_*` figures are copied from the back-end when it sends them."""

    connect_s: float | None = None  # request sent -> response headers (or model loaded)
    ttft_s: float | None = None  # request sent -> first token
    total_s: float | None = None  # request sent -> last event
    tokens: int = 0  # completion tokens (from Usage when the server tells, else counted deltas)
    server_tokens_per_s: float | None = None

    @property
    def tokens_per_s(self) -> float | None:
        """Generation speed after the first token: what the user feels while watching."""
        if self.total_s is None or self.ttft_s is None or self.tokens < 2:
            return None
        span = self.total_s - self.ttft_s
        return (self.tokens - 1) / span if span > 0 else None


ErrorKind = Literal["network", "http", "auth", "rate_limit", "stall", "protocol", "model", "cancelled"]


@dataclass(slots=True)
class Error:
    kind: ErrorKind
    message: str
    retryable: bool = False


@dataclass(slots=True)
class Done:
    finish_reason: str  # "stop", "length", "cancelled", "error", ...
    timings: Timings = field(default_factory=Timings)


Event = TextDelta | ReasoningDelta | Usage | Done | Error
