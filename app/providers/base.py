"""The one interface every back-end implements.

`stream(request)` yields TextDelta / ReasoningDelta / Usage events and ends with exactly one
Done (preceded by an Error when it failed). Cancelling the task that iterates cancels the
generation upstream: each provider closes its HTTP stream or stops its model loop there.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol

from app.core.events import Event, Timings


@dataclass
class Request:
    messages: list[dict[str, str]]
    model: str = ""
    max_tokens: int | None = None
    temperature: float | None = None
    prefill: str = ""  # text the answer must start with (the local provider continues it)
    prediction: str | None = None  # OpenAI predicted outputs: the expected answer text
    extra: dict[str, object] = field(default_factory=dict)


class Provider(Protocol):
    name: str
    model: str

    def stream(self, request: Request) -> AsyncIterator[Event]: ...

    async def aclose(self) -> None: ...


class Clock:
    """Times one generation: request sent, first response, first token, last event."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.timings = Timings()
        self.deltas = 0

    def connected(self) -> None:
        if self.timings.connect_s is None:
            self.timings.connect_s = time.perf_counter() - self.t0

    def token(self) -> None:
        self.deltas += 1
        if self.timings.ttft_s is None:
            self.timings.ttft_s = time.perf_counter() - self.t0

    def done(self, completion_tokens: int | None = None) -> Timings:
        self.timings.total_s = time.perf_counter() - self.t0
        self.timings.tokens = completion_tokens if completion_tokens else self.deltas
        return self.timings
