"""`steer bench transport`: what the persistent WebSocket buys, measured against `steer serve`.

The server runs in its own thread and event loop (so its timestamps sit on the client's
clock) with TLS on loopback, from a self-signed certificate made here with openssl, so every
new connection pays a real TCP + TLS handshake.

1. 100 sequential short requests (a one-token answer, so the time is all overhead): over the
   persistent WebSocket (opened beforehand, as the app does at start) vs a new HTTPS
   connection per request (POST /v1/responses, SSE). Request time and time to first token.
2. Redirect -> first new token, through the real Session: native steer (`response.steer`,
   the server cuts the answer and its successor starts on the same socket) vs cancel and
   resend (the socket is closed, the spare takes the new request). The replayed "model"
   takes `first_token_delay` to its first token; `added_ms` is what the redirect costs
   beyond that, as the server timed the generation.
3. Esc -> generation stopped in the server: session.interrupt() to the moment the server's
   generation was stopped (it saw the close and cancelled the token loop).
4. With --model, the embedded model: KV-cache reuse (time to first token of a follow-up that
   shares its prompt prefix, vs the same prompt cold) and the same redirect/Esc figures.
5. Prefix continuation: a scripted session of 20 turns through the real Session (accepts,
   rejects with reasons, reject-all, follow-ups on open hunks, files edited outside steer
   between turns), over the persistent WebSocket and over Chat Completions SSE. The rate is
   read from what the server received: a turn continues the last when its request carries
   `previous_response_id` of the last response (WebSocket), or when its messages begin, byte
   for byte, with the last request's and the answer (SSE: what a server prefix cache needs).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
import ssl
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from app.core.conversation.session import Session
from app.core.disk.workspace import Workspace
from app.core.edits.hunks import OPEN
from app.core.events import Done, TextDelta
from app.core.provider import Capabilities, Provider, Request
from app.providers.openai_chat import OpenAIChat
from app.providers.openai_responses import OpenAIResponses
from app.providers.responses_wire import from_input
from app.server.chat_server import ServerThread

TOKEN = "bench-token-0123456789abcdefghijklmnopqrstuvwxyz"
LONG = "word " * 20000
MESSAGES = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "ping"}]


def make_cert(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
                    "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


def _ms(xs: list[float]) -> dict:
    if not xs:
        return {}
    s = sorted(xs)
    return {"median_ms": round(statistics.median(s) * 1000, 3),
            "p90_ms": round(s[min(len(s) - 1, int(len(s) * 0.9))] * 1000, 3),
            "min_ms": round(s[0] * 1000, 3), "n": len(s)}


async def _one(p: OpenAIResponses) -> tuple[float, float]:
    t0 = time.perf_counter()
    first = None
    async for ev in p.stream(Request(MESSAGES)):
        if type(ev) is TextDelta and first is None:
            first = time.perf_counter()
        elif type(ev) is Done and ev.finish_reason != "stop":
            raise RuntimeError(f"request failed: {ev}")
    end = time.perf_counter()
    return end - t0, (first or end) - t0


async def _requests(base_url: str, client_ctx: ssl.SSLContext, n: int) -> dict:
    ws = OpenAIResponses(base_url, "bench", TOKEN, ssl=client_ctx)
    await ws.warm()
    await _one(ws)  # the first request opens the spare socket: not part of the steady state
    ws_req, ws_ttft = [], []
    for _ in range(n):
        r, f = await _one(ws)
        ws_req.append(r)
        ws_ttft.append(f)
    await ws.aclose()
    https_req, https_ttft = [], []
    for _ in range(n):
        p = OpenAIResponses(base_url, "bench", TOKEN, ssl=client_ctx, transport="sse")
        r, f = await _one(p)  # a new httpx client: a new TCP + TLS connection
        await p.aclose()
        https_req.append(r)
        https_ttft.append(f)
    ws_med, https_med = statistics.median(ws_req), statistics.median(https_req)
    return {
        "requests": n,
        "websocket_persistent": {"request": _ms(ws_req), "ttft": _ms(ws_ttft)},
        "https_new_connection": {"request": _ms(https_req), "ttft": _ms(https_ttft)},
        "overhead_reduction": round(1 - ws_med / https_med, 3),
        "ttft_reduction": round(1 - statistics.median(ws_ttft) / statistics.median(https_ttft), 3),
        "target_overhead_reduction": 0.8,
    }


def _workspace(tmp: Path) -> Workspace:
    root = tmp / "repo"
    root.mkdir()
    (root / "calc.py").write_text("def total(items):\n    return 0\n")
    return Workspace(root)


async def _wait(cond, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise RuntimeError("timed out")
        await asyncio.sleep(0.001)


async def _redirects(server, base_url: str, ctx: ssl.SSLContext, ws: Workspace, trials: int,
                     native: bool, caps: Capabilities, max_tokens: int | None = None) -> dict:
    caps = dataclasses.replace(caps, native_steer=native)
    added, total, model_ttft = [], [], []
    steered = 0
    for _ in range(trials):
        p = OpenAIResponses(base_url, "bench", TOKEN, ssl=ctx, capabilities=caps)
        await p.warm()
        session = Session(ws, p, fmt=caps.preferred_format or "search_replace",
                          context=["calc.py"], max_tokens=max_tokens)
        old = session.start("annotate everything")
        await _wait(lambda old=old: old.deltas >= 8 or not old.live)
        await _wait(lambda p=p: bool(p.pool.idle))  # the spare socket is open, as it is in use
        if not old.live:
            await p.aclose()
            continue
        n_started = len(server.stats.started)
        turn = session.redirect("stop; fix total() instead")
        await _wait(lambda turn=turn: turn.first_token is not None or not turn.live
                    or turn.error is not None)
        ttft = turn.ttft
        if ttft is not None:
            starts = server.stats.started[n_started:]
            firsts = [t for t in server.stats.first_token if starts and t >= starts[0]]
            if starts and firsts:
                mt = firsts[0] - starts[0]  # the model's own time to its first token
                model_ttft.append(mt)
                added.append(ttft - mt)
                total.append(ttft)
            steered += turn.steered_at is not None
        session.interrupt()
        await session.wait()
        await p.aclose()
    return {"redirect_to_first_token": _ms(total), "model_ttft": _ms(model_ttft),
            "added": _ms(added), "natively_steered": steered, "trials": trials}


async def _escs(server, base_url: str, ctx: ssl.SSLContext, ws: Workspace, trials: int,
                caps: Capabilities) -> dict:
    stops = []
    for _ in range(trials):
        p = OpenAIResponses(base_url, "bench", TOKEN, ssl=ctx, capabilities=caps)
        await p.warm()
        session = Session(ws, p, fmt=caps.preferred_format or "search_replace", context=["calc.py"])
        turn = session.start("annotate everything")
        await _wait(lambda turn=turn: turn.deltas >= 8 or not turn.live)
        n = len(server.stats.stopped)
        t0 = time.perf_counter()
        if session.interrupt():  # (a short answer may have ended by itself)
            await _wait(lambda n=n: len(server.stats.stopped) > n, timeout=10)
            stops.append(server.stats.stopped[n] - t0)
        await session.wait()
        await p.aclose()
    return {"esc_to_generation_stopped": _ms(stops), "target_ms": 50}


async def _kv_cache(base_url: str, ctx: ssl.SSLContext, server) -> dict:
    """Time to first token of a follow-up sharing its prefix (previous_response_id) vs the
    same full prompt after the cache was taken by another conversation."""
    p = OpenAIResponses(base_url, "bench", TOKEN, ssl=ctx)
    code = "\n".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(120))
    first = [{"role": "system", "content": "You are terse."},
             {"role": "user", "content": f"{code}\n\nWhat does f7 return?"}]

    async def ask(messages) -> tuple[str, float]:
        n = len(server.stats.started)
        text = []
        async for ev in p.stream(Request(messages, max_tokens=16, temperature=0.0)):
            if type(ev) is TextDelta:
                text.append(ev.text)
        return "".join(text), server.stats.first_token[n] - server.stats.started[n]

    answer, cold1 = await ask(first)
    follow = [*first, {"role": "assistant", "content": answer},
              {"role": "user", "content": "And f8?"}]
    _, warm = await ask(follow)
    await ask([{"role": "user", "content": "Say something else entirely, " * 40}])  # evict
    _, cold2 = await ask(follow)
    await p.aclose()
    return {"prompt_chars": len(first[1]["content"]), "turn1_cold_ttft_ms": round(cold1 * 1000, 1),
            "turn2_shared_prefix_ttft_ms": round(warm * 1000, 1),
            "turn2_cold_ttft_ms": round(cold2 * 1000, 1)}


# -- 5. prefix continuation ---------------------------------------------------------------------
SLOTS = 64  # a file of anchors, so every scripted answer applies whatever was decided before


def slot_answer(n: int) -> str:
    """Turn n's answer: two search/replace blocks, each adding a function after its anchor."""
    blocks = [f"slots.py\n```python\n<<<<<<< SEARCH\n# slot {k}\n=======\n# slot {k}\n"
              f"def f{k}():\n    return {k}\n>>>>>>> REPLACE\n```\n" for k in (2 * n, 2 * n + 1)]
    return f"Two more helpers (turn {n + 1}).\n\n" + "\n".join(blocks)


def scripted_repo(root: Path) -> Workspace:
    root.mkdir(parents=True, exist_ok=True)
    (root / "slots.py").write_text("".join(f"# slot {k}\n" for k in range(SLOTS)) + "# end\n")
    (root / "notes.md").write_text("# Notes\n")
    return Workspace(root)


async def scripted_session(ws: Workspace, provider: Provider, turns: int = 20) -> list[str]:
    """Drive `turns` requests through a Session as a user would, deciding each answer by a
    fixed script: accept all; accept one and reject one with a reason; reject all with a
    reason (then a new change set); accept one and leave one open (then a follow-up); and
    every third turn the user edits both context files outside steer. Returns the answers."""
    session = Session(ws, provider, fmt="search_replace", context=["slots.py", "notes.md"])
    answers = []
    try:
        for n in range(turns):
            turn = await session.ask(f"add helpers f{2 * n} and f{2 * n + 1}")
            if turn.state != "done":
                raise RuntimeError(f"turn {n + 1} ended {turn.state}: {turn.error}")
            answers.append(turn.text)
            review, pending = session.review, session.pending
            assert review is not None and pending is not None
            new = [h.id for h in pending.hunks if h.state in OPEN]
            step = n % 4
            if step == 0:
                review.accept_all()
            elif step == 1:
                review.accept(new[:1])
                review.reject(new[1:], f"name it g{2 * n + 1}, not f")
            elif step == 2:
                review.reject_all("not now")
            else:
                review.accept(new[:1])  # the other stays open: the next message follows up
            if n % 3 == 2:  # the user edits the files while steer waits
                with (ws.root / "notes.md").open("a") as f:
                    f.write(f"- note {n}\n")
                text = (ws.root / "slots.py").read_text()
                (ws.root / "slots.py").write_text(text.replace("# end\n", f"# end {n}\n"))
    finally:
        await session.aclose()
    return answers


def _prefix(before: object, after: object) -> bool:
    """`after` serialised begins, byte for byte, with `before` serialised (a list less its
    closing bracket): what a server's prefix cache sees as shared."""
    a, b = json.dumps(before, ensure_ascii=False), json.dumps(after, ensure_ascii=False)
    return b.startswith(a[:-1])


def continuations(bodies: list[dict], answers: list[str], kept: list[str] | None = None
                  ) -> list[bool]:
    """For each request after the first, whether it continued the one before, from what the
    server received: Chat Completions `messages`, or Responses `input` (with `kept`, the ids
    of the responses as the server completed them: the WebSocket's previous_response_id)."""
    convs: list[list[dict]] = []
    out = []
    for i, body in enumerate(bodies):
        if "messages" in body:
            conv = [{"role": m["role"], "content": m["content"]} for m in body["messages"]]
        else:
            conv = [{"role": "system", "content": body.get("instructions") or ""}]
            prev = body.get("previous_response_id")
            if prev is not None:
                if i == 0 or kept is None or prev != kept[i - 1]:
                    out.append(False)  # not the last response: a server prefix is lost
                    convs.append(conv + from_input(body["input"]))
                    continue
                conv = [*convs[-1], {"role": "assistant", "content": answers[i - 1]}]
            conv = conv + from_input(body["input"])
        if i:
            last = [*convs[-1], {"role": "assistant", "content": answers[i - 1]}]
            grew = _prefix(last, conv) and len(conv) > len(last)
            out.append(grew and (kept is None or "messages" in body
                                 or body.get("previous_response_id") == kept[i - 1]))
        convs.append(conv)
    return out


async def _continuation(turns: int, tmp: Path) -> dict:
    out: dict = {"turns": turns, "target_rate": 1.0}
    for name in ("websocket", "chat_sse"):
        answers = [slot_answer(n) for n in range(turns)]
        with ServerThread(replay=answers, token=TOKEN) as server:
            ws = scripted_repo(tmp / f"continuation-{name}")
            p: Provider = (OpenAIResponses(server.base_url, "bench", TOKEN) if name == "websocket"
                           else OpenAIChat(server.base_url, "bench", TOKEN))
            got = await scripted_session(ws, p, turns)
            bodies = list(server.stats.bodies)
            kept = list(server.responses.kept) if name == "websocket" else None
        flags = continuations(bodies, got, kept)
        out[name] = {"requests": len(bodies), "continued": sum(flags),
                     "rate": round(sum(flags) / max(1, len(flags)), 3),
                     "request_chars_last": len(json.dumps(bodies[-1])) if bodies else 0}
    return out


async def _main(requests: int, trials: int, first_token_delay: float, model: bool,
                turns: int = 20, only: str | None = None) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="steer-bench-transport-"))
    try:
        cert, key = make_cert(tmp)
        server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_ctx.load_cert_chain(cert, key)
        client_ctx = ssl.create_default_context(cafile=str(cert))
        ws = _workspace(tmp)
        result: dict = {"bench": "transport", "tls": "loopback, self-signed P-256"}
        result["prefix_continuation"] = await _continuation(turns, tmp)
        if only == "continuation":
            return result
        with ServerThread(replay="ok", token=TOKEN, ssl=server_ctx) as server:
            result.update(await _requests(server.base_url, client_ctx, requests))
        caps = OpenAIResponses.capabilities
        with ServerThread(replay=[LONG, "Fixed.\n"] * (4 * trials + 4), rate=2000, token=TOKEN,
                          ssl=server_ctx, first_token_delay=first_token_delay) as server:
            native = await _redirects(server, server.base_url, client_ctx, ws, trials, True, caps)
            resend = await _redirects(server, server.base_url, client_ctx, ws, trials, False, caps)
            result["redirect"] = {"replay_first_token_delay_ms": first_token_delay * 1000,
                                  "native_steer": native, "cancel_and_resend": resend,
                                  "target_added_ms": 5}
        with ServerThread(replay=LONG, rate=2000, token=TOKEN, ssl=server_ctx) as server:
            result["esc"] = await _escs(server, server.base_url, client_ctx, ws, trials, caps)
        if model:
            local = Capabilities(warm_up=True, prefill=True, native_steer=True, cancel="close",
                                 preferred_format="whole")
            with ServerThread(token=TOKEN, ssl=server_ctx) as server:
                m: dict = {"kv_cache": await _kv_cache(server.base_url, client_ctx, server)}
                m["redirect_native_steer"] = await _redirects(
                    server, server.base_url, client_ctx, ws, max(3, trials // 4), True, local, 200)
                m["redirect_cancel_and_resend"] = await _redirects(
                    server, server.base_url, client_ctx, ws, max(3, trials // 4), False, local, 200)
                m["esc"] = await _escs(server, server.base_url, client_ctx, ws, max(3, trials // 4),
                                       local)
                result["embedded_model"] = m
        return result
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(requests: int = 100, trials: int = 20, first_token_delay: float = 0.02,
        model: bool = False, turns: int = 20, only: str | None = None) -> dict:
    return asyncio.run(_main(requests, trials, first_token_delay, model, turns, only))
