"""The OpenAI Responses API on the wire: what steer sends and what `steer serve` answers.

One place for the JSON shapes both sides of the WebSocket (and the SSE fallback) use, so the
client and the server cannot drift apart; tests validate every shape here against the event
models of the official `openai` package. Frames are plain dicts (or pre-formatted strings on
the hot path): pydantic per token would cost more than the rest of the stream.

steer's extension, understood by `steer serve` only: `prefill` in `response.create` is the
answer's first characters; the model continues from them and they are not streamed back (the
client already shows them). An automatic successor (a steered response) inherits it.
`grammar` is a GBNF grammar the answer must follow (as llama.cpp's server takes it); a
steered successor does not inherit it (it continues an answer the grammar began).
`seed` (an integer) seeds the embedded model's sampling, as Chat Completions' `seed` does:
parallel variants of one model ask with seeds 1..N. OpenAI's Responses API has no seed, so
steer sends it to `steer serve` only.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from app.core.provider import Capabilities, Request

# -- client side: chat messages <-> Responses input ---------------------------------------------


def to_input(messages: list[dict]) -> tuple[str | None, list[dict]]:
    """(instructions, input items) for chat-style messages: system messages become
    `instructions` (sent with every request: they are never carried over by
    previous_response_id), the rest EasyInputMessage items; an item already in the
    Responses' own shape (a look-up round's function_call and function_call_output) as is."""
    system = [m["content"] for m in messages if m.get("role") in ("system", "developer")]
    items = [m if "type" in m else message(m["role"], m["content"]) for m in messages
             if m.get("role") not in ("system", "developer")]
    return ("\n\n".join(system) if system else None), items


def message(role: str, content: str) -> dict:
    return {"type": "message", "role": role, "content": content}


def call_item(item: dict[str, Any]) -> dict[str, Any]:
    """A `function_call` output item as the next request sends it back (the input item)."""
    return {"type": "function_call", "call_id": item.get("call_id"), "name": item.get("name"),
            "arguments": str(item.get("arguments") or "")}


@dataclass
class Kept:
    """The last response a client saw complete: what the server keeps of it."""

    rid: str
    fields: dict
    input: list[dict]
    output: str
    calls: list[dict] = field(default_factory=list)  # its function calls (call_item)

    def continued_by(self, fields: dict, items: list[dict]) -> list[dict] | None:
        """The items a request sends after this response, when it continues it (the same
        model and instructions, its input extending this one's plus the answer, or plus its
        calls: a look-up round's next request): None when it does not. Settings per request
        (max tokens, temperature, the tools offered) do not matter."""
        if any(fields.get(k) != self.fields.get(k) for k in ("model", "instructions")):
            return None
        known = [*self.input, *(self.calls or [message("assistant", self.output)])]
        if len(items) > len(known) and items[: len(known)] == known:
            return items[len(known):]
        return None


def request_fields(req: Request, model: str, capabilities: Capabilities,
                   seed: int | None) -> tuple[dict, list[dict]]:
    """(the non-input fields, the input items) of a request to `model`; steer serve's
    extensions only where the back-end declares them."""
    instructions, items = to_input(req.messages)
    fields: dict = {"model": req.model or model}
    if instructions:
        fields["instructions"] = instructions
    if req.max_tokens is not None:
        fields["max_output_tokens"] = req.max_tokens
    if req.temperature is not None:
        fields["temperature"] = req.temperature
    if req.prefill and capabilities.prefill:
        fields["prefill"] = req.prefill
    if req.grammar and capabilities.grammar:
        fields["grammar"] = req.grammar
    if seed is not None and capabilities.seed:
        fields["seed"] = seed
    if req.tools and capabilities.tools:
        fields["tools"] = [{"type": "function", **spec} for spec in req.tools]
        fields["tool_choice"] = req.tool_choice
    return fields, items


def create_frame(fields: dict, items: list[dict], kept: Kept | None) -> dict:
    """`response.create`: only the new items and `previous_response_id` when the request
    continues `kept`, else the whole input."""
    frame = {"type": "response.create", **fields}
    new = kept.continued_by(fields, items) if kept is not None else None
    if kept is not None and new is not None:
        frame["previous_response_id"] = kept.rid
        frame["input"] = new
        return frame
    frame["input"] = items
    return frame


def ws_url(base_url: str) -> str:
    """https://host/v1 -> wss://host/v1/responses (http -> ws)."""
    base = base_url.rstrip("/")
    if base.startswith("https://"):
        base = "wss://" + base[8:]
    elif base.startswith("http://"):
        base = "ws://" + base[7:]
    return base + "/responses"


CLOSE_CODES = {1000: "normal closure", 1001: "going away", 1002: "protocol error",
               1003: "unsupported data", 1006: "dropped without a close frame",
               1007: "invalid data", 1008: "policy violation", 1009: "message too big",
               1011: "internal server error", 1012: "service restart", 1013: "try again later"}


def wire_status(obj: dict) -> int | None:
    """The HTTP status an `error` event stands for: its own, or the one its code implies."""
    status = obj.get("status")
    if isinstance(status, int):
        return status
    code = str((obj.get("error") or {}).get("code") or "")
    return {"invalid_api_key": 401, "forbidden": 403, "rate_limit_exceeded": 429}.get(code)


def from_input(raw: object) -> list[dict[str, str]]:
    """Input (a string or items) as chat messages {role, content}, for a chat template.
    Raises ValueError on shapes steer serve does not take (tool outputs, images)."""
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    if not isinstance(raw, list):
        raise ValueError("input must be a string or a list of items")
    out = []
    for item in raw:
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind == "function_call" and isinstance(item, dict):  # a look-up, as the template
            out.append({"role": "assistant",  # reads it (steer serve's model calls none)
                        "content": f"[{item.get('name')} {item.get('arguments')}]"})
            continue
        if kind == "function_call_output" and isinstance(item, dict):
            out.append({"role": "user", "content": str(item.get("output", ""))})
            continue
        if not isinstance(item, dict) or kind != "message":
            raise ValueError("only message and function call items are supported")
        role, content = item.get("role"), item.get("content")
        if role not in ("user", "assistant", "system", "developer"):
            raise ValueError(f"unknown role {role!r}")
        if isinstance(content, list):
            texts = []
            for part in content:
                if not isinstance(part, dict) or part.get("type") not in ("input_text", "output_text"):
                    raise ValueError("only text content parts are supported")
                texts.append(str(part.get("text", "")))
            content = "".join(texts)
        if not isinstance(content, str):
            raise ValueError("message content must be text")
        out.append({"role": "system" if role == "developer" else role, "content": content})
    return out


# -- server side: events ------------------------------------------------------------------------


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def response_object(rid: str, model: str, *, status: str, text: str | None = None,
                    msg_id: str | None = None, created_at: float | None = None,
                    settings: dict | None = None, previous_response_id: str | None = None,
                    usage: tuple[int, int] | None = None, incomplete_reason: str | None = None,
                    error: tuple[str, str] | None = None, calls: list[dict] | None = None) -> dict:
    """A `response` object as the Responses API returns it; `text` None = no output yet."""
    s = settings or {}
    output = []
    if text is not None and msg_id is not None:
        output.append({"id": msg_id, "type": "message", "role": "assistant",
                       "status": "completed" if status == "completed" else "incomplete",
                       "content": [{"type": "output_text", "text": text, "annotations": [],
                                    "logprobs": []}]})
    output += calls or []  # function calls (look-ups), when the answer made them
    return {
        "id": rid, "object": "response", "created_at": created_at or time.time(), "status": status,
        "model": model, "output": output, "parallel_tool_calls": False, "tool_choice": "none",
        "tools": [], "instructions": s.get("instructions"),
        "max_output_tokens": s.get("max_output_tokens"), "temperature": s.get("temperature"),
        "previous_response_id": previous_response_id,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "error": {"code": error[0], "message": error[1]} if error else None,
        "usage": None if usage is None else {
            "input_tokens": usage[0], "output_tokens": usage[1], "total_tokens": sum(usage),
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0}},
    }


class EventWriter:
    """Numbers the events of one connection (or one SSE stream) and formats them."""

    def __init__(self) -> None:
        self.seq = 0

    def event(self, type_: str, **fields: object) -> str:
        obj = {"type": type_, "sequence_number": self.seq, **fields}
        self.seq += 1
        return json.dumps(obj, separators=(",", ":"))

    def delta(self, item_id: str, text: str) -> str:
        # the hot path: one per token
        s = (f'{{"type":"response.output_text.delta","sequence_number":{self.seq},'
             f'"item_id":"{item_id}","output_index":0,"content_index":0,'
             f'"delta":{json.dumps(text)},"logprobs":[]}}')
        self.seq += 1
        return s

    def opening(self, response: dict, msg_id: str) -> list[str]:
        """created, in_progress, and the empty message the deltas go into."""
        return [
            self.event("response.created", response=response),
            self.event("response.in_progress", response=response),
            self.event("response.output_item.added", output_index=0, item={
                "id": msg_id, "type": "message", "role": "assistant", "status": "in_progress",
                "content": []}),
            self.event("response.content_part.added", item_id=msg_id, output_index=0,
                       content_index=0, part={"type": "output_text", "text": "",
                                              "annotations": [], "logprobs": []}),
        ]

    def closing(self, response: dict, msg_id: str, text: str) -> list[str]:
        """The text's done events and the response's terminal event (completed, incomplete
        or failed, as its status says)."""
        status = response["status"]
        part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
        terminal = {"completed": "response.completed", "incomplete": "response.incomplete",
                    "failed": "response.failed"}[status]
        return [
            self.event("response.output_text.done", item_id=msg_id, output_index=0,
                       content_index=0, text=text, logprobs=[]),
            self.event("response.content_part.done", item_id=msg_id, output_index=0,
                       content_index=0, part=part),
            self.event("response.output_item.done", output_index=0, item={
                "id": msg_id, "type": "message", "role": "assistant",
                "status": "completed" if status == "completed" else "incomplete",
                "content": [part]}),
            self.event(terminal, response=response),
        ]

    def calls(self, calls: list[dict], n: int) -> tuple[list[str], list[dict]]:
        """Scripted function calls as the Responses API streams them: each call's item added,
        its arguments in pieces, done; then the items (the response's output)."""
        out, items = [], []
        for i, call in enumerate(calls):
            args = call.get("arguments", {})
            text = args if isinstance(args, str) else json.dumps(args)
            item = {"id": f"fc_{n}_{i}", "type": "function_call", "call_id": f"call_{n}_{i}",
                    "name": call["name"], "arguments": "", "status": "in_progress"}
            out.append(self.event("response.output_item.added", output_index=i, item=item))
            half = len(text) // 2
            for piece in (text[:half], text[half:]):
                out.append(self.event("response.function_call_arguments.delta",
                                      item_id=item["id"], output_index=i, delta=piece))
            out.append(self.event("response.function_call_arguments.done", item_id=item["id"],
                                  output_index=i, name=call["name"], arguments=text))
            done = {**item, "arguments": text, "status": "completed"}
            out.append(self.event("response.output_item.done", output_index=i, item=done))
            items.append(done)
        return out, items

    def error(self, code: str, message: str, *, status: int = 400, param: str | None = None,
              type_: str = "invalid_request_error", headers: dict[str, str] | None = None) -> str:
        err: dict = {"type": type_, "code": code, "message": message, "param": param}
        if headers:
            err["headers"] = headers
        return self.event("error", status=status, error=err)
