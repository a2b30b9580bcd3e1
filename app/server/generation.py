"""What `steer serve` generates, apart from the protocols that carry it: recorded answers
replayed at a chosen rate, or the embedded model; the faults injected into them; and the
figures kept for benchmarks and tests.

The protocol services (Chat Completions in chat_server.py, the Responses API in
responses.py) take their tokens from a `Backend`, so neither needs the other.
"""

from __future__ import annotations

import asyncio
import hmac
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar, overload

from app.core.faults import stop_point
from app.server.http import HttpResponse

if TYPE_CHECKING:
    from app.providers.local import LocalModel

T = TypeVar("T")
_TOKEN = re.compile(r" ?[A-Za-z]+| ?\d{1,3}| ?[^\sA-Za-z\d]{1,3}|\s+")


def split_tokens(text: str) -> list[str]:
    """Cut text roughly where a BPE tokenizer would (~4 characters a token), so recorded
    answers replay with realistic chunk sizes."""
    return _TOKEN.findall(text)


def prediction_usage(prediction: str, answer: list[str]) -> dict:
    """OpenAI's figures for a predicted output: the prediction's tokens that appear in the
    answer (in order) were accepted, the others rejected."""
    import difflib

    pred = split_tokens(prediction)
    kept = sum(b.size for b in difflib.SequenceMatcher(None, pred, answer, autojunk=False)
               .get_matching_blocks())
    return {"reasoning_tokens": 0, "accepted_prediction_tokens": kept,
            "rejected_prediction_tokens": len(pred) - kept}


@dataclass
class Faults:
    drop_after: int | None = None  # close the connection mid-answer, no finish, no [DONE]
    stall_after: int | None = None  # stop sending, keep the connection open
    stall_seconds: float = 3600.0  # ... for this long, then go on
    resume: asyncio.Event | None = None  # ... or until this is set: a test ends the stall
    # when what it waits for has happened, not after a guessed time (the server in its loop)
    status: int | None = None  # answer with this HTTP status instead (429 gets Retry-After)
    retry_after: float = 0.0
    malformed_after: int | None = None  # send a chunk that is not JSON
    fail_first: int = 0  # fail only this many requests with `status`, then serve normally
    only_first: int = 0  # the stream faults (drop, stall, malformed) hit only the first N requests
    close_after: int | None = None  # WebSocket: close with `close_code` after N tokens
    close_code: int = 1011
    error_event: int | None = None  # WebSocket: answer response.create with an `error` event
    forget_previous: bool = False  # no previous_response_id is ever found
    connection_limit: int | None = None  # WebSocket: after N responses, the 60-minute-limit error
    refuse_prediction: bool = False  # Chat Completions: a body with `prediction` gets OpenAI's 400
    refuse_tools: bool = False  # a body with `tools` gets a 400, as llama-server without --jinja


async def stall(f: Faults) -> None:
    """The stall `f` asks for: `stall_seconds`, or less when `f.resume` is set first."""
    if f.resume is None:
        await asyncio.sleep(f.stall_seconds)
        return
    try:
        await asyncio.wait_for(f.resume.wait(), f.stall_seconds)
    except TimeoutError:
        pass


class Recent(Generic[T]):
    """The last `keep` items appended, indexed as if none had been dropped: len() counts
    every item ever appended, `[i]` and `[i:]` take those absolute positions (an item no
    longer kept raises IndexError; a slice gives what is kept of it), iteration and `==`
    see the kept items, oldest first. So code that notes `len(stats.started)` and reads
    `stats.started[n:]` later keeps working after thousands of requests, in bounded memory."""

    __slots__ = ("_items", "_dropped")

    def __init__(self, keep: int) -> None:
        self._items: deque[T] = deque(maxlen=keep)
        self._dropped = 0

    def append(self, item: T) -> None:
        if len(self._items) == self._items.maxlen:
            self._dropped += 1
        self._items.append(item)

    @property
    def kept(self) -> list[T]:
        return list(self._items)

    def __len__(self) -> int:
        return self._dropped + len(self._items)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __iter__(self) -> Iterator[T]:
        return iter(self._items)

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> list[T]: ...

    def __getitem__(self, i: int | slice) -> T | list[T]:
        if isinstance(i, slice):
            return [self._items[j - self._dropped] for j in range(*i.indices(len(self)))
                    if j >= self._dropped]
        j = i + len(self) if i < 0 else i
        if not self._dropped <= j < len(self):
            raise IndexError(f"index {i} is not kept (the last {self._items.maxlen} of "
                             f"{len(self)} are)")
        return self._items[j - self._dropped]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Recent):
            other = other.kept
        return isinstance(other, list) and self.kept == other

    __hash__ = None  # type: ignore[assignment]  # compares like a list, so unhashable like one

    def __repr__(self) -> str:
        return f"Recent({self.kept!r}, total={len(self)})"


KEEP_REQUESTS = 64  # bodies and headers kept (each up to a body or head cap of app/server/http.py)
KEEP_TIMES = 1024  # arrival times and generation timings
KEEP_FRAMES = 100_000  # with record_frames (tests)


@dataclass
class ServerStats:
    """What the server saw, for tests and benchmarks: the recent part of it (see Recent)."""

    requests: Recent[float] = field(default_factory=lambda: Recent(KEEP_TIMES))  # arrival, wall clock
    bodies: Recent[dict] = field(default_factory=lambda: Recent(KEEP_REQUESTS))
    headers: Recent[dict[str, str]] = field(  # names lower-cased; requests past the token only
        default_factory=lambda: Recent(KEEP_REQUESTS))
    # requests refused by the HTTP server: {"status", "method", "path", "headers" read so far}
    refused: Recent[dict] = field(default_factory=lambda: Recent(KEEP_REQUESTS))
    # perf_counter times, for benchmarks: a generation began / sent its first token / was
    # stopped early (the client interrupted, steered or went away)
    started: Recent[float] = field(default_factory=lambda: Recent(KEEP_TIMES))
    first_token: Recent[float] = field(default_factory=lambda: Recent(KEEP_TIMES))
    stopped: Recent[float] = field(default_factory=lambda: Recent(KEEP_TIMES))
    upgrades: int = 0  # WebSocket connections accepted
    # with record_frames: WebSocket frames ("in"|"out", text)
    frames: Recent[tuple[str, str]] = field(default_factory=lambda: Recent(KEEP_FRAMES))


@dataclass
class Generation:
    """One answer's tokens and how it ended (filled in as they stream)."""

    finish: str = "stop"
    prompt_tokens: int = 0
    tokens: int = 0


class Backend:
    """The tokens every protocol serves: a replay (request n gets answer n, the last one
    repeating), any number of them at once, each at the full `rate` (parallel variants are
    N requests in flight); or the embedded model, one generation at a time in arrival order
    (it has one context), the others waiting their turn."""

    def __init__(self, *, replay: str | list[str] | None = None, rate: float = 0.0,
                 model_path: str | None = None, faults: Faults | None = None,
                 model_name: str | None = None, token: str | None = None,
                 first_token_delay: float = 0.0, record_frames: bool = False,
                 tool_calls: dict[int, list[dict]] | None = None) -> None:
        answers = [replay] if isinstance(replay, str) else replay
        # scripted look-ups: request n answers with these calls ({"name", "arguments"})
        # instead of text, when the request offers tools
        self.tool_calls = tool_calls or {}
        self.replays = [split_tokens(a) for a in answers] if answers else None
        self.replay_tokens = self.replays[0] if self.replays else None
        self.rate = rate
        self.model_path = model_path
        self.faults = faults or Faults()
        self.model_name = model_name or ("replay" if replay is not None else "smollm2-135m-instruct")
        # the embedded model runs with an 8k window (providers/local.py); a replay has no limit
        self.context_window = None if replay is not None else 8192
        self.stats = ServerStats()
        self.token = token  # required as Bearer when set
        self.first_token_delay = first_token_delay  # replay: the "model's" own time to first token
        self.record_frames = record_frames
        self._served = 0
        self._local: LocalModel | None = None
        # FIFO: the embedded model's generations run one at a time, in arrival order (a replay
        # takes no turn: its requests stream concurrently)
        self._model_turn = asyncio.Lock()
        self.last_activity = time.monotonic()

    async def load(self) -> None:
        """Load the embedded model (a replay has nothing to load) and keep it warm."""
        if self.replay_tokens is None:
            from app.providers.local import LocalModel, warm

            self._local = LocalModel(self.model_path)
            await asyncio.to_thread(warm, self._local.model_path)

    def authorized(self, authorization: str | None) -> bool:
        """Whether a request with this Authorization header (None: none) may go on; the HTTP
        server asks before it reads the rest of the request (app/server/http.py)."""
        if not self.token:
            return True
        if authorization is None:
            return False
        # bytes: a header may hold any latin-1 character, compare_digest takes ASCII str only
        return hmac.compare_digest(authorization.encode("latin-1"),
                                   f"Bearer {self.token}".encode("latin-1", "replace"))

    def unauthorized(self) -> HttpResponse:
        return HttpResponse.json({"error": {"message": "missing or wrong token: steer serve needs "
                                            "the token from its state file as Bearer",
                                            "type": "invalid_request_error",
                                            "code": "invalid_api_key"}}, 401)

    def next_request(self) -> int:
        """Count a request (an answer asked for): replays and faults go by this number."""
        self._served += 1
        return self._served

    def injected_status(self, n: int) -> HttpResponse | None:
        """The `status` fault for the n-th request, if it applies."""
        f = self.faults
        if f.status and (f.fail_first == 0 or n <= f.fail_first):
            headers = {"Retry-After": f"{f.retry_after:g}"} if f.status == 429 else {}
            return HttpResponse.json({"error": {"message": "injected failure", "type": "server_error"}},
                                     f.status, **headers)
        return None

    def stream_faults(self, n: int) -> Faults:
        f = self.faults
        return Faults() if f.only_first and n > f.only_first else f

    def tokens(self, n: int, messages: list[dict], *, prefill: str = "",
               max_tokens: int | None = None, temperature: float | None = None,
               gen: Generation | None = None, grammar: str | None = None,
               seed: int | None = None) -> AsyncIterator[str]:
        """The n-th request's tokens from the back-end; "" marks the end of a batch due by now.
        `seed` reaches the embedded model (a replay is the same whatever the seed)."""
        self.last_activity = time.monotonic()
        if self.replays:
            tokens = self.replays[min(max(n, 1), len(self.replays)) - 1]
            if max_tokens is not None and len(tokens) > max_tokens:
                tokens = tokens[:max_tokens]
                if gen is not None:
                    gen.finish = "length"
            return self._replay(tokens)
        return self._generate(messages, prefill, max_tokens, temperature, gen or Generation(),
                              grammar, seed)

    async def health(self) -> dict:
        import os

        return {"status": "ok", "pid": os.getpid(), "model": self.model_name,
                "model_path": self._local.model_path if self._local is not None else None,
                "rss_bytes": rss_bytes()}

    async def _replay(self, tokens: list[str]) -> AsyncIterator[str]:
        """The recorded tokens, paced: every wake-up sends all tokens due by then (one SSE
        event each, as a real server would), then yields "" to flush the batch."""
        self.stats.started.append(time.perf_counter())
        if self.first_token_delay:
            await asyncio.sleep(self.first_token_delay)
        if tokens:
            self.stats.first_token.append(time.perf_counter())
        try:
            async for tok in self._paced(tokens):
                yield tok
        except (asyncio.CancelledError, GeneratorExit):
            self.stats.stopped.append(time.perf_counter())
            raise

    async def _paced(self, tokens: list[str]) -> AsyncIterator[str]:
        if self.rate <= 0:
            for i, tok in enumerate(tokens):
                yield tok
                if i % 64 == 63:
                    yield ""
                    await asyncio.sleep(0)
            return
        t0 = time.perf_counter()
        i = 0
        while i < len(tokens):
            due = min(len(tokens), int((time.perf_counter() - t0) * self.rate) + 1)
            while i < due:
                yield tokens[i]
                i += 1
            yield ""
            await asyncio.sleep(min(0.001, max(0.0, (i / self.rate) - (time.perf_counter() - t0))))

    async def _generate(self, messages: list[dict], prefill: str, max_tokens: int | None,
                        temperature: float | None, gen: Generation,
                        grammar: str | None = None, seed: int | None = None) -> AsyncIterator[str]:
        from app.core.events import Done, Error, TextDelta, Usage
        from app.core.provider import Request

        assert self._local is not None
        req = Request(messages, max_tokens=max_tokens, temperature=temperature, prefill=prefill,
                      grammar=grammar)
        async with self._model_turn:  # FIFO: whoever asked first is served first
            self.stats.started.append(time.perf_counter())
            stream = self._local.stream(req, seed=seed)
            ended = False
            try:
                async for ev in stream:
                    if isinstance(ev, TextDelta):
                        if gen.tokens == 0:
                            self.stats.first_token.append(time.perf_counter())
                        elif gen.tokens == 3:  # three tokens sent: a crash test's moment
                            stop_point("serve:generating")
                        gen.tokens += 1
                        yield ev.text
                        yield ""
                    elif isinstance(ev, Usage):
                        gen.prompt_tokens = ev.prompt
                    elif isinstance(ev, Done):
                        gen.finish = ev.finish_reason
                    elif isinstance(ev, Error):
                        raise RuntimeError(ev.message)
                ended = True
            finally:
                if not ended:
                    self.stats.stopped.append(time.perf_counter())
                await stream.aclose()  # the client left or steered: the model stops at its next token


def rss_bytes() -> int | None:
    """This process's resident memory now (the model's weights count once they are read)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None
