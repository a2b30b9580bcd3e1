"""`steer bench model`: the embedded model through steer against a direct llama-cpp-python
call, on the same prompt, so the cost of steer's path (the shared `steer serve`, the
Responses WebSocket, the client) is measured and not assumed.

- direct: a child process loads the GGUF with the settings `steer serve` uses and calls
  `Llama.create_completion(stream=True)` itself;
- steer: a `steer serve` started as the `local` provider starts it (its own state dir), and
  a Responses WebSocket client, as the app uses it.

Each trial's prompt starts with its own number, so neither side reuses the previous
trial's KV cache (a follow-up in a conversation would; `steer bench transport --model`
measures that). Time to first token runs from the request to the first text; tokens/s
from the first token to the last. Medians over the trials (the first, which also loads or
warms the model, is reported apart).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROMPT = ("Write a Python function `mean(xs)` that returns the arithmetic mean of a list of "
          "numbers, with a docstring, and explain it in two sentences.")

_DIRECT = r"""
import json, os, sys, time
from llama_cpp import Llama
from llama_cpp.llama_chat_format import Jinja2ChatFormatter
path, trials, max_tokens, prompt = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
t = time.perf_counter()
llm = Llama(model_path=path, n_ctx=8192, verbose=False, n_threads=max(1, os.cpu_count() or 2))
load = time.perf_counter() - t
template = llm.metadata.get("tokenizer.chat_template")
fmt = Jinja2ChatFormatter(template, "<|im_end|>", "")
rows = []
for i in range(trials):
    text = fmt(messages=[{"role": "user", "content": f"({i + 1}) {prompt}"}]).prompt
    n_prompt = len(llm.tokenize(text.encode(), special=True))
    t0 = time.perf_counter()
    first = last = None
    n = 0
    for chunk in llm.create_completion(text, max_tokens=max_tokens, stream=True, temperature=0.0,
                                       stop=["<|im_end|>", "<|endoftext|>"]):
        if chunk["choices"][0].get("text"):
            n += 1
            last = time.perf_counter()
            first = first or last
    rows.append({"prompt_tokens": n_prompt, "tokens": n, "ttft": first - t0,
                 "tok_s": (n - 1) / (last - first) if n > 1 and last > first else None})
print(json.dumps({"load_s": load, "rows": rows}))
"""


async def _through_steer(model_path: str, trials: int, max_tokens: int) -> dict:
    from app.core.events import TextDelta, Usage
    from app.core.provider import Request
    from app.providers.local_serve import ensure_server
    from app.providers.openai_responses import OpenAIResponses

    t = time.perf_counter()
    url, token, entry = await asyncio.to_thread(ensure_server, model_path)
    start = time.perf_counter() - t
    client = OpenAIResponses(url, "smollm2", token, stall_timeout=600)
    await client.warm()
    rows = []
    try:
        for i in range(trials):
            req = Request([{"role": "user", "content": f"({i + 1}) {PROMPT}"}],
                          max_tokens=max_tokens, temperature=0.0)
            t0 = time.perf_counter()
            first = last = None
            n, prompt_tokens = 0, None
            async for ev in client.stream(req):
                if type(ev) is TextDelta:
                    n += 1
                    last = time.perf_counter()
                    first = first or last
                elif type(ev) is Usage:
                    prompt_tokens = ev.prompt
            rows.append({"prompt_tokens": prompt_tokens, "tokens": n,
                         "ttft": None if first is None else first - t0,
                         "tok_s": (n - 1) / (last - first)
                         if n > 1 and first is not None and last is not None and last > first
                         else None})
    finally:
        await client.aclose()
        os.kill(entry["pid"], 15)
    return {"server_start_s": start, "rows": rows}


def _summary(rows: list[dict]) -> dict:
    warm = rows[1:] or rows
    ttfts = [r["ttft"] * 1000 for r in warm if r["ttft"] is not None]
    rates = [r["tok_s"] for r in warm if r["tok_s"]]
    return {"first_trial": {"ttft_ms": round(rows[0]["ttft"] * 1000, 1) if rows[0]["ttft"] else None,
                            "tok_s": round(rows[0]["tok_s"], 1) if rows[0]["tok_s"] else None},
            "ttft_ms_median": round(statistics.median(ttfts), 1) if ttfts else None,
            "tok_s_median": round(statistics.median(rates), 1) if rates else None,
            "tokens_median": statistics.median(r["tokens"] for r in warm),
            "prompt_tokens": warm[0]["prompt_tokens"]}


def run(trials: int = 6, max_tokens: int = 64, model_path: str | None = None) -> dict:
    from importlib.metadata import version

    from app.providers.local import default_model_path

    path = model_path or default_model_path()
    child = subprocess.run([sys.executable, "-X", "faulthandler", "-c", _DIRECT, path, str(trials),
                            str(max_tokens), PROMPT], capture_output=True, text=True, timeout=1800)
    if child.returncode != 0:
        return {"error": f"the direct call failed (exit {child.returncode})",
                "stderr": child.stderr[-2000:]}
    direct = json.loads(child.stdout.strip().splitlines()[-1])
    with tempfile.TemporaryDirectory() as state:
        os.environ["XDG_STATE_HOME"] = state  # a server of its own, not the user's
        steer = asyncio.run(_through_steer(path, trials, max_tokens))
    d, s = _summary(direct["rows"]), _summary(steer["rows"])
    ratio = {}
    if d["ttft_ms_median"] and s["ttft_ms_median"]:
        ratio["ttft_steer_over_direct"] = round(s["ttft_ms_median"] / d["ttft_ms_median"], 3)
    if d["tok_s_median"] and s["tok_s_median"]:
        ratio["tok_s_steer_over_direct"] = round(s["tok_s_median"] / d["tok_s_median"], 3)
    return {"model": Path(path).name, "llama_cpp_python": version("llama-cpp-python"),
            "trials": trials, "max_tokens": max_tokens, "cpus": os.cpu_count(),
            "direct": {"load_s": round(direct["load_s"], 3), **d},
            "steer": {"server_start_s": round(steer["server_start_s"], 3), **s},
            "ratio": ratio}
