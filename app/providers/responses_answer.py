"""One response of the Responses API as the client reads it (app/providers/openai_responses.py,
over the WebSocket and over the SSE fallback alike): its parse state (`Answer`), each server
event as steer's events (`read_event`), and how it ended, as a Done or as an Error that says
what to do next (`outcome`, and the errors of a closed socket or a refused upgrade).

The JSON shapes themselves are responses_wire.py's; the WebSocket session (sending, retrying,
steering) is openai_responses.py's. Every message here passes the provider's `redact` (the
key masked) before anyone sees it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from websockets.exceptions import InvalidStatus

from app.core.events import Connected, Done, Error, Event, ReasoningDelta, TextDelta, Usage
from app.providers import http_stream
from app.providers.responses_wire import CLOSE_CODES, wire_status
from app.providers.ws_pool import Closed


@dataclass
class Answer:
    """Parse state of one response."""

    connected: bool = False
    rid: str | None = None
    text: list[str] = field(default_factory=list)
    finish: str | None = None
    usage: Usage | None = None
    error: Error | None = None
    wire_error: dict | None = None  # an `error` event, for the caller to decide on a retry


@dataclass(frozen=True)
class Server:
    """The server as the messages name it."""

    url: str  # its WebSocket URL (responses_wire.ws_url)
    key_env: str | None  # the variable the key came from: a refused key names it
    redact: Callable[[str], str]  # masks the key in whatever the server said

    @property
    def host(self) -> str:
        return self.url.split("/")[2]


def read_event(obj: dict, ans: Answer, calls: list[dict],
               redact: Callable[[str], str]) -> tuple[list[Event], bool]:
    """A server event as provider events, and whether it ends the response. A function call
    (a look-up) goes into `calls`, answered once the response completes."""
    kind = obj["type"]
    if kind == "response.output_text.delta" or kind == "response.refusal.delta":
        d = obj.get("delta")
        if d:
            ans.text.append(d)
            return [TextDelta(d)], False
        return [], False
    if kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
        return ([ReasoningDelta(obj["delta"])] if obj.get("delta") else []), False
    if kind == "response.created":
        ans.rid = (obj.get("response") or {}).get("id")
        if not ans.connected:
            ans.connected = True
            return [Connected()], False
        return [], False
    if kind in ("response.completed", "response.incomplete", "response.failed"):
        out: list[Event] = []
        resp = obj.get("response") or {}
        usage = resp.get("usage")
        if isinstance(usage, dict):
            ans.usage = Usage(usage.get("input_tokens") or 0, usage.get("output_tokens") or 0)
            out.append(ans.usage)
        if kind == "response.completed":
            ans.finish = "stop"
        elif kind == "response.incomplete":
            why = (resp.get("incomplete_details") or {}).get("reason") or "incomplete"
            ans.finish = "length" if why == "max_output_tokens" else str(why)
        else:
            e = resp.get("error") or {}
            ans.error = Error("model", redact(
                f"the model failed: {e.get('message') or 'no reason given'}"
                + (f" ({e['code']})" if e.get("code") else "")))
            ans.finish = "error"
        return out, True
    if kind == "error":
        ans.wire_error = obj
        return [], True
    if kind == "response.output_item.done" and (obj.get("item") or {}).get("type") \
            == "function_call":
        calls.append(obj["item"])
        return [], False
    return [], False  # item/part bookkeeping, annotations, queued, in_progress...


def closed_error(server: Server, obj: Closed, ans: Answer) -> Error:
    why = CLOSE_CODES.get(obj.code or 1006, "closed")
    reason = f": {obj.reason}" if obj.reason else ""
    return Error("network", server.redact(
        f"{server.url} closed the connection (code {obj.code or 1006}, {why}"
        f"{reason})" + ("; the answer is incomplete" if ans.text else "")), retryable=True)


def outcome(server: Server, ans: Answer, attempts: int = 1) -> list[Event]:
    """How a response ended, as events (over the WebSocket or SSE)."""
    err = (wire_error(server, ans.wire_error, attempts) if ans.wire_error is not None else
           ans.error if ans.error is not None else
           None if ans.finish is not None else
           Error("network", "the stream ended without a terminal event; the answer is "
                 "incomplete", retryable=True))
    kept = ans.rid if ans.finish in ("stop", "length") else None
    return [Done(ans.finish or "stop", response_id=kept)] if err is None else [
        err, Done("error")]


def wire_error(server: Server, obj: dict, attempts: int = 1) -> Error:
    """An `error` event (its status, or one its code implies) as an Error that says what
    to do next."""
    e = obj.get("error") or {}
    code = str(e.get("code") or "")
    msg = f"{e.get('message') or 'error'}" + (f" ({code})" if code else "")
    status = wire_status(obj)
    if status is None:
        err = Error("http", f"{server.url} refused the request: {msg}")
    else:
        asked = http_stream.server_wait(e.get("headers"))
        err = http_stream.status_error(status, server.host, msg, key_env=server.key_env,
                                       asked=asked, attempts=attempts)
    err.message = server.redact(err.message)
    return err


def upgrade_error(server: Server, exc: InvalidStatus, asked: float | None, attempts: int) -> Error:
    """A refused WebSocket upgrade (its HTTP status and body) as an Error."""
    r = exc.response
    err = http_stream.status_error(r.status_code, server.host, http_stream.detail_of(r.body or b""),
                                   key_env=server.key_env, asked=asked, attempts=attempts)
    err.message = server.redact(err.message)
    return err
