"""OpenAI-compatible Chat Completions over SSE: OpenAI, Cerebras, Groq, OpenRouter, Ollama,
vLLM, llama.cpp's llama-server, LM Studio, and `steer serve`.

The request, its retries and the SSE framing are app/providers/http_stream.py's; here is what
Chat Completions puts in a request and in each chunk of its answer.

Look-ups (Request.tools): offered as `tools` (function tools). A chunk's `delta.tool_calls`
carries each call's id and name first, then its arguments in pieces, by `index` (a new id at
an index already used opens another call: Ollama numbers every call 0); the answer ends with
finish_reason "tool_calls". Each call goes to the session as a LookupCall; with every reply
in, the assistant's `tool_calls` message and one `tool` message per call are appended and the
request goes again, until the model answers in text. After `tool_rounds` rounds the tools
stay in the request (the conversation holds calls) with tool_choice "none". A server that
refuses `tools` with HTTP 400 gets the request again without them, and this endpoint is never
offered tools again in this process (ToolsRefused, said once).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from app.core.events import (
    Done,
    Error,
    Event,
    LookupCall,
    ReasoningDelta,
    TextDelta,
    ToolRound,
    ToolsRefused,
    Usage,
)
from app.core.provider import STALL_TIMEOUT, Capabilities, Provider, Request
from app.core.text import masking
from app.providers import http_stream


class OpenAIChat(Provider):
    name = "openai-chat"
    capabilities = Capabilities(predicted_outputs=True, cancel="close", tools=True, parallel=True,
                                seed=True)

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *,
                 connect_timeout: float = http_stream.CONNECT_TIMEOUT,
                 stall_timeout: float = STALL_TIMEOUT, retries: int = http_stream.RETRIES,
                 client: httpx.AsyncClient | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._key = api_key  # never logged, never part of a message
        masking.remember(api_key)  # masked in whatever steer shows or saves
        self.predicts = True  # send Request.prediction (until the server refuses it)
        self.retries = retries
        self._client = client or httpx.AsyncClient(
            timeout=httpx.Timeout(connect=connect_timeout, read=stall_timeout, write=30.0, pool=30.0),
            limits=httpx.Limits(max_keepalive_connections=4),
        )

    async def probe_context_window(self) -> int | None:
        """`GET /models`: vLLM says `max_model_len`, OpenRouter and LM Studio
        `context_length`, llama-server `meta.n_ctx_train` (and `steer serve` the same)."""
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        try:
            resp = await self._client.get(f"{self.base_url}/models", headers=headers, timeout=3.0)
            data = resp.json().get("data") or []
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        for m in data if isinstance(data, list) else []:
            if not isinstance(m, dict) or (self.model and m.get("id") not in (self.model, None)
                                           and len(data) > 1):
                continue
            meta = m.get("meta")
            if not isinstance(meta, dict):
                meta = {}
            for value in (m.get("max_model_len"), m.get("context_length"), meta.get("n_ctx"),
                          meta.get("n_ctx_train")):
                if isinstance(value, int) and value > 0:
                    return value
        return None

    async def aclose(self) -> None:
        await self._client.aclose()

    def _body(self, req: Request, messages: list[dict[str, Any]] | None = None,
              tools: str | None = None) -> dict[str, Any]:
        """`tools`: "auto" offers them, "none" keeps them but asks for an answer."""
        body: dict[str, Any] = {
            "model": req.model or self.model,
            "messages": req.messages if messages is None else messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if req.max_tokens is not None:
            body["max_tokens"] = req.max_tokens
        if req.temperature is not None:
            body["temperature"] = req.temperature
        if self.seed is not None and self.capabilities.seed:
            body["seed"] = self.seed
        if req.prediction and self.predicts:
            body["prediction"] = {"type": "content", "content": req.prediction}
        if tools and req.tools:
            body["tools"] = [{"type": "function", "function": spec} for spec in req.tools]
            body["tool_choice"] = tools
        return body

    @property
    def offers_tools(self) -> bool:
        return self.base_url not in NO_TOOLS

    def stream(self, req: Request) -> AsyncIterator[Event]:
        if req.tools and self.offers_tools:
            return self._rounds(req)
        return self._once(req)

    def _endpoint(self) -> http_stream.Endpoint:
        return http_stream.Endpoint(self._client, f"{self.base_url}/chat/completions",
                                    self.base_url, self._key, self.key_env, self.retries,
                                    self._client.timeout.read or 0)

    async def _rounds(self, req: Request) -> AsyncIterator[Event]:
        """The answer with look-ups: a request per round until the model answers in text."""
        messages = list(req.messages)
        rounds = 0
        said = 0  # answer text so far, over every round
        while True:
            offer = "auto" if rounds < req.tool_rounds else "none"
            one = _Round(self, req, messages, offer)
            held: Done | None = None
            async for ev in http_stream.stream(self._endpoint(), one.body, one.reader,
                                               resend=one.resend):
                if one.refused:
                    yield ToolsRefused(f"{self.base_url} refused look-up tools (HTTP 400: "
                                       f"{one.refused.pop()[:120]}); the repository map alone "
                                       "from now on")
                if type(ev) is TextDelta:
                    said += len(ev.text)
                elif type(ev) is Done and one.answers and one.answers[-1].calls \
                        and ev.finish_reason in ("tool_calls", "stop", "function_call"):
                    held = ev
                    continue
                yield ev
            if held is None:
                return
            if rounds > req.tool_rounds:  # it calls on after "none": end it, as it ended
                yield Error("model", f"the model kept calling look-ups after {rounds} rounds "
                            "(the limit) instead of answering")
                yield Done(held.finish_reason)
                return
            ans = one.answers[-1]
            calls = ans.tool_calls()
            loop = asyncio.get_running_loop()
            futures = []
            for c in calls:
                fut: asyncio.Future[str] = loop.create_future()
                futures.append(fut)
                yield LookupCall(c["id"], c["function"]["name"], c["function"]["arguments"], fut)
            results = [await f for f in futures]  # cancelled with the answer (Esc)
            items: list[dict[str, Any]] = [
                {"role": "assistant", "content": ans.text or None, "tool_calls": calls},
                *({"role": "tool", "tool_call_id": c["id"], "content": r}
                  for c, r in zip(calls, results, strict=True))]
            messages += items
            rounds += 1
            yield ToolRound(items, said)

    def _resend(self, req: Request, status: int, detail: str) -> bool:
        # a prediction is not for every model (OpenAI takes it on gpt-4o/4.1 only): ask
        # again without, and never send one again
        if status == 400 and req.prediction and self.predicts and "predict" in detail.lower():
            self.predicts = False
            return True
        return False

    def _once(self, req: Request) -> AsyncIterator[Event]:
        return http_stream.stream(self._endpoint(), lambda: self._body(req),
                                  lambda: _Answer(self.base_url, self._key),
                                  resend=lambda status, detail: self._resend(req, status, detail))


class _Round:
    """One round's request: its body, its readers (one per attempt), and a refusal of
    `tools` it answers by sending the request again without them."""

    def __init__(self, chat: OpenAIChat, req: Request, messages: list[dict[str, Any]],
                 offer: str) -> None:
        self.chat, self.req, self.messages, self.offer = chat, req, messages, offer
        self.answers: list[_Answer] = []
        self.refused: list[str] = []

    def reader(self) -> _Answer:
        self.answers.append(_Answer(self.chat.base_url, self.chat._key))
        return self.answers[-1]

    def body(self) -> dict[str, Any]:
        return self.chat._body(self.req, self.messages,
                               self.offer if self.chat.offers_tools else None)

    def resend(self, status: int, detail: str) -> bool:
        if status == 400 and self.chat.offers_tools and any(
                w in detail.lower() for w in ("tool", "function")):
            NO_TOOLS.add(self.chat.base_url)  # remembered for this endpoint
            self.refused.append(detail)
            return True
        return self.chat._resend(self.req, status, detail)


# endpoints that refused `tools` with HTTP 400 (this process): the map alone for them
NO_TOOLS: set[str] = set()


class _Answer:
    """One Chat Completions answer, chunk by chunk (http_stream.Reader)."""

    def __init__(self, where: str, key: str | None) -> None:
        self.where = where
        self.key = key
        self.finish: str | None = None
        self.speed: list[float] = []  # the server's own tokens/s, when it reports one
        self.failure: Error | None = None
        self.calls: list[dict[str, Any]] = []  # tool calls: id, name, argument pieces
        self._at: dict[int, int] = {}  # a call's index in the stream -> its place in calls
        self._text: list[str] = []

    @property
    def text(self) -> str:
        return "".join(self._text)

    def tool_calls(self) -> list[dict[str, Any]]:
        """The calls as the assistant message that made them carries them."""
        return [{"id": c["id"] or f"call_{i}", "type": "function",
                 "function": {"name": c["name"], "arguments": "".join(c["args"])}}
                for i, c in enumerate(self.calls)]

    def _call(self, tc: dict[str, Any]) -> None:
        index = tc.get("index", 0) if isinstance(tc.get("index"), int) else 0
        fn = tc.get("function") or {}
        cid = tc.get("id") or ""
        at = self._at.get(index)
        if at is None or (cid and self.calls[at]["id"] and cid != self.calls[at]["id"]):
            self.calls.append({"id": cid, "name": "", "args": []})
            at = self._at[index] = len(self.calls) - 1
        call = self.calls[at]
        call["id"] = call["id"] or cid
        if fn.get("name"):
            call["name"] += fn["name"] if not call["name"].endswith(fn["name"]) else ""
        if isinstance(fn.get("arguments"), str):
            call["args"].append(fn["arguments"])

    def feed(self, data: str) -> tuple[list[Event], bool]:
        if data == "[DONE]":
            self.finish = self.finish or "stop"
            return [], True
        try:
            obj = json.loads(data)
        except ValueError:
            self.failure = Error("protocol", http_stream.redact(
                f"the server sent malformed JSON: {data[:120]!r}", self.key))
            return [], True
        if obj.get("error"):
            self.failure = http_stream.stream_error(obj, self.where, self.key)
            return [], True
        out: list[Event] = []
        for ch in obj.get("choices") or ():
            delta = ch.get("delta") or {}
            text = delta.get("content")
            if text:
                out.append(TextDelta(text))
                self._text.append(text)
            for tc in delta.get("tool_calls") or ():
                if isinstance(tc, dict):
                    self._call(tc)
            thought = delta.get("reasoning_content") or delta.get("reasoning")
            if thought:
                out.append(ReasoningDelta(thought))
            if ch.get("finish_reason"):
                self.finish = ch["finish_reason"]
        usage = obj.get("usage") or (obj.get("x_groq") or {}).get("usage")
        if usage:
            out.append(_usage(usage))
        if len(obj) > 5:  # speed fields ride on the last chunks only
            rate = _server_speed(obj)
            if rate is not None:
                self.speed.append(rate)
        return out, False

    def end(self, attempts: int) -> list[Event]:
        if self.failure is not None:
            return [self.failure, Done("error")]
        if self.finish is None:
            return [Error("network", f"the stream from {self.where} ended without a finish "
                          "reason; the answer is incomplete", retryable=True), Done("error")]
        return [Done(self.finish, self.speed[-1] if self.speed else None)]


def _usage(usage: dict[str, Any]) -> Usage:
    details = usage.get("completion_tokens_details") or {}
    return Usage(usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0,
                 details.get("accepted_prediction_tokens"), details.get("rejected_prediction_tokens"))


def _server_speed(obj: dict[str, Any]) -> float | None:
    """The generation speed a server reports in its last chunk (llama-server, Cerebras, Groq)."""
    timings = obj.get("timings")  # llama-server
    if isinstance(timings, dict) and timings.get("predicted_per_second"):
        return float(timings["predicted_per_second"])
    info = obj.get("time_info")  # Cerebras
    usage = obj.get("usage") or {}
    if isinstance(info, dict) and info.get("completion_time") and usage.get("completion_tokens"):
        return float(usage["completion_tokens"]) / float(info["completion_time"])
    groq = (obj.get("x_groq") or {}).get("usage") or {}
    if groq.get("completion_time") and groq.get("completion_tokens"):
        return float(groq["completion_tokens"]) / float(groq["completion_time"])
    return None
