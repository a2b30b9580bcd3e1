"""OpenAI-compatible Chat Completions over SSE: OpenAI, Cerebras, Groq, OpenRouter, Ollama,
vLLM, llama.cpp's llama-server, LM Studio, and `steer serve`.

The request, its retries and the SSE framing are app/providers/http_stream.py's; here is what
Chat Completions puts in a request and in each chunk of its answer.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from app.core.events import Done, Error, Event, ReasoningDelta, TextDelta, Usage
from app.core.provider import STALL_TIMEOUT, Capabilities, Provider, Request
from app.core.text import masking
from app.providers import http_stream


class OpenAIChat(Provider):
    name = "openai-chat"
    capabilities = Capabilities(predicted_outputs=True, cancel="close")

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

    def _body(self, req: Request) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": req.model or self.model,
            "messages": req.messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if req.max_tokens is not None:
            body["max_tokens"] = req.max_tokens
        if req.temperature is not None:
            body["temperature"] = req.temperature
        if req.prediction and self.predicts:
            body["prediction"] = {"type": "content", "content": req.prediction}
        return body

    def stream(self, req: Request) -> AsyncIterator[Event]:
        to = http_stream.Endpoint(self._client, f"{self.base_url}/chat/completions",
                                  self.base_url, self._key, self.key_env, self.retries,
                                  self._client.timeout.read or 0)

        def resend(status: int, detail: str) -> bool:
            # a prediction is not for every model (OpenAI takes it on gpt-4o/4.1 only): ask
            # again without, and never send one again
            if status == 400 and req.prediction and self.predicts and "predict" in detail.lower():
                self.predicts = False
                return True
            return False

        return http_stream.stream(to, lambda: self._body(req),
                                  lambda: _Answer(self.base_url, self._key), resend=resend)


class _Answer:
    """One Chat Completions answer, chunk by chunk (http_stream.Reader)."""

    def __init__(self, where: str, key: str | None) -> None:
        self.where = where
        self.key = key
        self.finish: str | None = None
        self.speed: list[float] = []  # the server's own tokens/s, when it reports one
        self.failure: Error | None = None

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
