"""OpenAI-compatible Chat Completions over SSE: OpenAI, Cerebras, Groq, OpenRouter, Ollama,
vLLM, llama.cpp's llama-server, LM Studio, and `steer serve`.

The SSE framing is parsed here rather than with httpx-sse: at 20,000 events/s its
per-line generator layers cost more than the rest of the client together, and the
framing we need (data lines, blank-line terminators) is a dozen lines.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx

from app.core.events import Connected, Done, Error, Event, ReasoningDelta, TextDelta, Usage
from app.core.provider import Capabilities, Provider, Request
from app.providers import retry


class OpenAIChat(Provider):
    name = "openai-chat"
    capabilities = Capabilities(predicted_outputs=True, cancel="close")

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *,
                 connect_timeout: float = 10.0, stall_timeout: float = 120.0, retries: int = 2,
                 client: httpx.AsyncClient | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._key = api_key  # never logged, never part of a message
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
            meta = m.get("meta") if isinstance(m.get("meta"), dict) else {}
            for value in (m.get("max_model_len"), m.get("context_length"), meta.get("n_ctx"),
                          meta.get("n_ctx_train")):
                if isinstance(value, int) and value > 0:
                    return value
        return None

    async def aclose(self) -> None:
        await self._client.aclose()

    def _redact(self, text: str) -> str:
        return retry.redact(text, self._key)

    def _body(self, req: Request) -> dict:
        body: dict = {
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

    async def stream(self, req: Request) -> AsyncIterator[Event]:
        headers = {"Accept": "text/event-stream"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        url = f"{self.base_url}/chat/completions"
        body = self._body(req)
        attempt = 0
        while True:
            finish: str | None = None
            speed: list[float] = []  # the server's own tokens/s, when it reports one
            got_text = False
            retry_after: float | None = None
            why = ""  # a failure retried (announced); "" for a resend the protocol asks for
            try:
                async with self._client.stream("POST", url, json=body, headers=headers) as resp:
                    yield Connected()
                    if resp.status_code != 200:
                        code = resp.status_code
                        refusal = await retry.read_refusal(resp, attempt, self.retries,
                                                           self.key_env, self._key)
                        if ("prediction" in body and code == 400
                                and "predict" in refusal.detail.lower()):
                            # not for this model (OpenAI takes it on gpt-4o/4.1 only): ask
                            # again without, and do not send it again
                            self.predicts = False
                            body = self._body(req)
                            retry_after = 0.0
                        elif refusal.wait is not None:
                            retry_after, why = refusal.wait, f"HTTP {code}"
                        else:
                            yield refusal.error
                            yield Done("error")
                            return
                    else:
                        async for data in _sse_data(resp):
                            if data == "[DONE]":
                                finish = finish or "stop"
                                break
                            if type(data) is retry.ErrorEvent:  # `event: error`, any data
                                yield retry.stream_error(data, resp.url.host, self._key)
                                yield Done("error")
                                return
                            try:
                                obj = json.loads(data)
                            except ValueError:
                                yield Error("protocol", self._redact(
                                    f"the server sent malformed JSON: {data[:120]!r}"))
                                yield Done("error")
                                return
                            if obj.get("error"):
                                yield retry.stream_error(obj, resp.url.host, self._key)
                                yield Done("error")
                                return
                            for ch in obj.get("choices") or ():
                                delta = ch.get("delta") or {}
                                text = delta.get("content")
                                if text:
                                    got_text = True
                                    yield TextDelta(text)
                                thought = delta.get("reasoning_content") or delta.get("reasoning")
                                if thought:
                                    yield ReasoningDelta(thought)
                                if ch.get("finish_reason"):
                                    finish = ch["finish_reason"]
                            usage = obj.get("usage") or (obj.get("x_groq") or {}).get("usage")
                            if usage:
                                yield _usage(usage)
                            if len(obj) > 5:  # speed fields ride on the last chunks only
                                rate = _server_speed(obj)
                                if rate is not None:
                                    speed.append(rate)
            except httpx.ReadTimeout:
                yield retry.stall_error(self.base_url, self._client.timeout.read or 0)
                yield Done("error")
                return
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                if attempt < self.retries and not got_text:
                    retry_after, why = retry.backoff(attempt), retry.connect_reason(exc)
                else:
                    yield retry.connect_error(self.base_url, exc, attempt + 1)
                    yield Done("error")
                    return
            except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
                yield Error("network", f"the connection to {self.base_url} dropped mid-answer "
                            f"({retry.reason(exc)}); the answer is incomplete", retryable=True)
                yield Done("error")
                return
            except httpx.HTTPError as exc:
                yield Error("network", f"{self.base_url}: {retry.reason(exc)}", retryable=True)
                yield Done("error")
                return
            if retry_after is not None:
                attempt += 1
                if why:  # never silent: the front-ends show it while we wait
                    yield retry.announce(attempt, self.retries, retry_after, why)
                await asyncio.sleep(retry_after)
                continue
            if finish is None:
                yield Error("network", f"the stream from {self.base_url} ended without a finish "
                            "reason; the answer is incomplete", retryable=True)
                yield Done("error")
                return
            yield Done(finish, speed[-1] if speed else None)
            return


def _usage(usage: dict) -> Usage:
    details = usage.get("completion_tokens_details") or {}
    return Usage(usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0,
                 details.get("accepted_prediction_tokens"), details.get("rejected_prediction_tokens"))


async def _sse_data(resp: httpx.Response) -> AsyncIterator[str]:
    """The `data:` payloads of an SSE stream (multi-line data joined with newlines); an
    event named `error` comes as a retry.ErrorEvent."""
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
                    yield retry.ErrorEvent("\n".join(data)) if named else "\n".join(data)
                    data = []
                named = False
            elif line.startswith(b"data:"):
                chunk = line[5:]
                data.append((chunk[1:] if chunk.startswith(b" ") else chunk).decode("utf-8"))
            elif line.startswith(b"event:"):
                named = line[6:].strip() == b"error"
            # comments (":keep-alive"), id:, retry: carry nothing we use
    if data:
        yield retry.ErrorEvent("\n".join(data)) if named else "\n".join(data)


def _server_speed(obj: dict) -> float | None:
    """The generation speed a server reports in its last chunk (llama-server, Cerebras, Groq)."""
    timings = obj.get("timings")  # llama-server
    if isinstance(timings, dict) and timings.get("predicted_per_second"):
        return float(timings["predicted_per_second"])
    info = obj.get("time_info")  # Cerebras
    usage = obj.get("usage") or {}
    if isinstance(info, dict) and info.get("completion_time") and usage.get("completion_tokens"):
        return usage["completion_tokens"] / float(info["completion_time"])
    groq = (obj.get("x_groq") or {}).get("usage") or {}
    if groq.get("completion_time") and groq.get("completion_tokens"):
        return groq["completion_tokens"] / float(groq["completion_time"])
    return None
