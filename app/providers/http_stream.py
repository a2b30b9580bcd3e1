"""Streaming a request over HTTP, as every HTTP back-end does it: Chat Completions over SSE
(app/providers/openai_chat.py) and the Responses API's SSE fallback (openai_responses.py)
run `stream` here; the Responses WebSocket shares its retry policy and error wording.

- `stream` posts the request and reads the answer's SSE `data:` payloads (`sse_data`: the
  framing is parsed here rather than with httpx-sse, whose per-line generator layers cost
  more at 20,000 events/s than the rest of the client together); a back-end's `Reader`
  turns each payload into events and says how the answer ended.
- A request is sent again only while no answer text has arrived (no token lost or doubled),
  at most `retries` times: after a status that may pass (429, 5xx), a refused or timed-out
  connection, or a socket that closed before it answered. `retries + 1` requests at most.
- Every retry is announced, before the wait, with a `Retrying` event (app/core/events.py):
  the app's answer title and `steer run`'s status line say "retrying 2/3 in 1 s (HTTP 500)".
- The wait is what the server asks (Retry-After in seconds or as an HTTP date, or OpenAI's
  retry-after-ms), else exponential backoff (0.5 s, 1 s, 2 s…). A server that asks for more
  than MAX_WAIT is not waited for: the error says how long, and the user retries when ready.
- An error says what happened and what to do next, in one line, and names the variable the
  key is read from (never the key); whatever the server says is shown with the key masked.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

import httpx

from app.config import API_KEY_ENV
from app.core.events import Connected, Done, Error, Event, Retrying

MAX_WAIT = 20.0  # seconds: longer than this, the user decides when to send again
RETRIES = 2  # requests sent again at most, after the first
CONNECT_TIMEOUT = 10.0  # seconds to connect (and, over a WebSocket, to upgrade)


def backoff(attempt: int) -> float:
    return 0.5 * 2**attempt


def server_wait(headers: Mapping[str, str] | None) -> float | None:
    """The wait the server asks for (seconds, >= 0), or None when it does not say."""
    if not headers:
        return None
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    ms = lower.get("retry-after-ms", "").strip()
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = lower.get("retry-after", "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:  # an HTTP date
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def delay(asked: float | None, attempt: int) -> float | None:
    """Seconds to wait before the next attempt: the server's wish, else the backoff; None
    when the server asks for longer than MAX_WAIT (no automatic retry then)."""
    wait = backoff(attempt) if asked is None else asked
    return wait if wait <= MAX_WAIT else None


def announce(retry: int, retries: int, wait: float, reason: str) -> Retrying:
    """The `retry`-th retry (1-based) is coming: request retry + 1 of retries + 1."""
    return Retrying(retry + 1, retries + 1, wait, reason)


async def wait_out(seconds: float) -> None:
    """The wait before a retry. Every provider waits here, so a test can see what was waited
    for and when, in order, instead of timing it."""
    await asyncio.sleep(seconds)


def redact(text: str, key: str | None) -> str:
    """Server-sent text with the API key masked (an error body may quote it back)."""
    return text.replace(key, "***") if key else text


def reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def connect_reason(exc: BaseException) -> str:
    """Why a connection could not be made, in two or three words."""
    seen: BaseException | None = exc
    while seen is not None:  # httpx and websockets wrap the OSError
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, TimeoutError) or "timeout" in type(seen).__name__.lower():
            return "connect timed out"
        seen = seen.__cause__ or seen.__context__
    text = reason(exc)
    if "refused" in text.lower() or "all connection attempts failed" in text.lower():
        return "connection refused"
    if "name or service not known" in text.lower() or "nodename" in text.lower():
        return "unknown host"
    return text


def detail_of(raw: bytes | bytearray) -> str:
    """The server's own reason in an error body (OpenAI's `{"error": {"message"}}` or text)."""
    try:
        detail = json.loads(raw).get("error", {})
        detail = detail.get("message", "") if isinstance(detail, dict) else str(detail)
    except (ValueError, AttributeError):
        detail = raw.decode("utf-8", "replace").strip()
    return detail[:300]


def _attempts(n: int) -> str:
    return f" ({n} attempts)" if n > 1 else ""


def _wait_words(asked: float | None) -> str:
    return f"{math.ceil(asked)} s" if asked is not None and asked >= 1 else "a moment"


def key_advice(key_env: str | None) -> str:
    if key_env:
        return f"Check the API key in ${key_env} (steer reads it at start)"
    return f"Set an API key in ${API_KEY_ENV} (or name its variable with api_key_env)"


def status_error(code: int, host: str, detail: str, *, key_env: str | None = None,
                 asked: float | None = None, attempts: int = 1) -> Error:
    """An error status as an Error that says what to do next."""
    head = f"HTTP {code} from {host}{_attempts(attempts)}" + (f": {detail}" if detail else "")
    head = head.rstrip(".")
    if code in (401, 403):
        return Error("auth", f"{head}. {key_advice(key_env)}")
    if code == 429:
        return Error("rate_limit", f"{head}. Rate limited: wait {_wait_words(asked)}, then retry",
                     retryable=True)
    if code >= 500:
        later = f"in {_wait_words(asked)}" if asked is not None and asked >= 1 else "in a moment"
        return Error("http", f"{head}. The server failed: retry {later}, or use another endpoint",
                     retryable=True)
    if code == 404:
        return Error("http", f"{head}. Check --base-url and --model")
    return Error("http", f"{head}. The server refused the request")


@dataclass(slots=True)
class Refusal:
    """An HTTP answer that is not 200: the error, the server's reason, and the wait before
    the next attempt (None: no retry, the error is final)."""

    error: Error
    detail: str
    wait: float | None


async def read_refusal(resp: httpx.Response, attempt: int, retries: int,
                       key_env: str | None, key: str | None) -> Refusal:
    """Read an error answer of an HTTP stream request (`attempt` counts from 0); the key is
    masked in what the server said (some servers quote it back)."""
    detail = redact(detail_of((await resp.aread())[:2000]), key)
    asked = server_wait(resp.headers)
    err = status_error(resp.status_code, resp.url.host, detail, key_env=key_env, asked=asked,
                       attempts=attempt + 1)
    wait = delay(asked, attempt) if err.retryable and attempt < retries else None
    return Refusal(err, detail, wait)


def connect_error(where: str, exc: BaseException, attempts: int = 1) -> Error:
    return Error("network", f"cannot connect to {where}{_attempts(attempts)}: "
                 f"{connect_reason(exc)}. Is the server running? Check --base-url, or use "
                 "another endpoint", retryable=True)


def stall_error(where: str, seconds: float) -> Error:
    return Error("stall", f"no data from {where} for {seconds:g} s; the answer was cut off. "
                 "Retry, or allow longer with --stall-timeout", retryable=True)


class ErrorEvent(str):
    """The data of an SSE event named `error` (`event: error`), as `sse_data` yields it; any
    other event's data comes as a plain str."""

    __slots__ = ()


def stream_error(data: str | dict, host: str, key: str | None = None) -> Error:
    """An error the server reported mid-stream (after its 200: the generation failed), as
    the Error the answer ends with: its message (`{"message"}`, `{"error": {"message"}}`,
    `{"error": "..."}` or plain text), the key masked."""
    obj: object = data
    if isinstance(data, str):
        try:
            obj = json.loads(data)
        except ValueError:
            obj = data
    inner = obj.get("error") if isinstance(obj, dict) else None
    source = inner if isinstance(inner, dict) else obj
    if isinstance(source, dict):
        message = source.get("message") or (inner if isinstance(inner, str) else None) \
            or json.dumps(source)[:200]
    else:
        message = source
    text = redact(str(message).strip()[:300], key)
    return Error("model", f"{host} reported an error mid-answer: {text or 'no reason given'}")


# -- the stream ----------------------------------------------------------------------------------
async def sse_data(resp: httpx.Response) -> AsyncIterator[str]:
    """The `data:` payloads of an SSE stream (multi-line data joined with newlines); an event
    named `error` comes as an ErrorEvent."""
    buf = b""
    data: list[str] = []
    named = False  # the event being read has an `event:` line naming it `error`
    async for raw in resp.aiter_raw():
        buf += raw
        if b"\n" not in raw:
            continue
        lines = buf.split(b"\n")
        buf = lines.pop()
        for line in lines:
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if data:
                    yield ErrorEvent("\n".join(data)) if named else "\n".join(data)
                    data = []
                named = False
            elif line.startswith(b"data:"):
                chunk = line[5:]
                data.append((chunk[1:] if chunk.startswith(b" ") else chunk).decode("utf-8"))
            elif line.startswith(b"event:"):
                named = line[6:].strip() == b"error"
            # comments (":keep-alive"), id:, retry: carry nothing we use
    if data:
        yield ErrorEvent("\n".join(data)) if named else "\n".join(data)


class Reader(Protocol):
    """One attempt's answer, as one back-end reads it."""

    def feed(self, data: str) -> tuple[list[Event], bool]:
        """The events of one `data:` payload, and whether the answer is over (stop reading:
        it ended, or the payload makes no sense)."""
        ...

    def end(self, attempts: int) -> list[Event]:
        """How the answer ended, once the stream is closed: `Done`, or an error and
        `Done("error")` (`attempts`: the requests it took)."""
        ...


@dataclass
class Endpoint:
    """Where a back-end posts its requests, and how it tells of them."""

    client: httpx.AsyncClient
    url: str
    where: str  # how errors name the server
    key: str | None  # sent as the bearer token, masked in anything the server says
    key_env: str | None  # the variable it is read from (named in an error, never the key)
    retries: int  # requests sent again at most, after the first
    stall: float  # seconds without data that end the answer (the client's read timeout)


async def stream(to: Endpoint, body: Callable[[], dict[str, Any]], reader: Callable[[], Reader], *,
                 resend: Callable[[int, str], bool] | None = None) -> AsyncIterator[Event]:
    """POST `body()` to `to.url` and yield the answer's events, sending the request again
    (announced) while the policy above allows. `resend(status, detail)`: a refusal the
    back-end answers by changing the request (True: it is sent again at once, unannounced)."""
    headers = {"Accept": "text/event-stream"}
    if to.key:
        headers["Authorization"] = f"Bearer {to.key}"
    attempt = 0
    while True:
        ans = reader()
        wait: float | None = None
        why = ""  # a failure retried (announced); "" for a resend the back-end asked for
        try:
            async with to.client.stream("POST", to.url, json=body(), headers=headers) as resp:
                yield Connected()
                if resp.status_code != 200:
                    refusal = await read_refusal(resp, attempt, to.retries, to.key_env, to.key)
                    if resend is not None and resend(resp.status_code, refusal.detail):
                        wait = 0.0
                    elif refusal.wait is not None:
                        wait, why = refusal.wait, f"HTTP {resp.status_code}"
                    else:
                        yield refusal.error
                        yield Done("error")
                        return
                else:
                    async for data in sse_data(resp):
                        if type(data) is ErrorEvent:  # `event: error`, whatever its data
                            yield stream_error(data, resp.url.host, to.key)
                            yield Done("error")
                            return
                        events, over = ans.feed(data)
                        for ev in events:
                            yield ev
                        if over:
                            break
        except httpx.ReadTimeout:
            yield stall_error(to.where, to.stall)
            yield Done("error")
            return
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            if attempt >= to.retries:
                yield connect_error(to.where, exc, attempt + 1)
                yield Done("error")
                return
            wait, why = backoff(attempt), connect_reason(exc)
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            yield Error("network", f"the connection to {to.where} dropped mid-answer "
                        f"({reason(exc)}); the answer is incomplete", retryable=True)
            yield Done("error")
            return
        except httpx.HTTPError as exc:
            yield Error("network", f"{to.where}: {reason(exc)}", retryable=True)
            yield Done("error")
            return
        if wait is not None:
            attempt += 1
            if why:  # never silent: the front-ends show it while we wait
                yield announce(attempt, to.retries, wait, why)
            await wait_out(wait)
            continue
        for ev in ans.end(attempt + 1):
            yield ev
        return
