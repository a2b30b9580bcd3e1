"""Parallel variants, the back-end side: which back-ends can answer several at once, the seed
each variant's requests carry (on the wire, and into the embedded model's sampling), replays
streaming concurrently from `steer serve`, the --variants / --variant-models settings, and the
factory that builds one fresh provider per variant. Real servers on 127.0.0.1 throughout."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.cli.common import Parser, provider_flags, settings_from
from app.config import ConfigError, Settings, config_file, load_settings, variant_count
from app.core.events import Done, Event, TextDelta
from app.core.provider import Request
from app.providers.acp import AcpAgent
from app.providers.factory import build_variant_providers
from app.providers.local_serve import ServedLocal
from app.providers.openai_chat import OpenAIChat
from app.providers.openai_responses import OpenAIResponses
from app.server.chat_server import ChatServer
from app.server.generation import split_tokens

KEY = "sk-test-5a7c9e1b3d5f7a9c"
MESSAGES = [{"role": "user", "content": "Say something."}]
ROOT = Path(__file__).resolve().parents[1]


@contextlib.asynccontextmanager
async def serve(**kw: object) -> AsyncIterator[ChatServer]:
    kw.setdefault("token", KEY)
    server = ChatServer(**kw)  # type: ignore[arg-type]
    await server.start()
    try:
        yield server
    finally:
        await server.close()


async def answer(p, req: Request | None = None) -> str:
    events: list[Event] = [ev async for ev in p.stream(req or Request(MESSAGES))]
    assert type(events[-1]) is Done and events[-1].finish_reason in ("stop", "length"), events[-3:]
    return "".join(ev.text for ev in events if type(ev) is TextDelta)


def chat(server: ChatServer, seed: int | None = None) -> OpenAIChat:
    p = OpenAIChat(server.base_url, "m", KEY, stall_timeout=10.0)
    p.seed = seed
    return p


# -- capabilities --------------------------------------------------------------------------------


def test_model_back_ends_answer_in_parallel_and_the_acp_agent_does_not(tmp_path):
    assert OpenAIChat("http://127.0.0.1:9/v1", "m").capabilities.parallel
    assert OpenAIResponses("http://127.0.0.1:9/v1", "m").capabilities.parallel
    assert ServedLocal.capabilities.parallel
    assert not AcpAgent("some-agent --acp", tmp_path).capabilities.parallel
    # the seed goes where the wire takes one: not to OpenAI's Responses API
    assert OpenAIChat.capabilities.seed and ServedLocal.capabilities.seed
    assert not OpenAIResponses.capabilities.seed


# -- the seed on the wire ------------------------------------------------------------------------


async def test_the_seed_reaches_the_chat_completions_body():
    async with serve(replay=["one", "two"]) as server:
        seeded, plain = chat(server, seed=7), chat(server)
        try:
            await answer(seeded)
            await answer(plain)
        finally:
            await seeded.aclose()
            await plain.aclose()
    bodies = server.stats.bodies.kept
    assert bodies[0]["seed"] == 7
    assert "seed" not in bodies[1]


async def test_the_responses_frame_carries_the_seed_only_to_steer_serve():
    async with serve(replay="hi", record_frames=True) as server:
        openai = OpenAIResponses(server.base_url, "m", KEY, stall_timeout=10.0)
        openai.seed = 4
        # the same client as `local` speaks it (ServedLocal's capabilities, the server given)
        local = OpenAIResponses(server.base_url, "m", KEY, stall_timeout=10.0,
                                capabilities=ServedLocal.capabilities)
        local.seed = 5
        try:
            assert await answer(openai) == "hi"
            assert await answer(local) == "hi"
        finally:
            await openai.aclose()
            await local.aclose()
    creates = [json.loads(t) for d, t in server.stats.frames if d == "in"]
    creates = [f for f in creates if f.get("type") == "response.create"]
    assert len(creates) == 2
    assert "seed" not in creates[0]  # OpenAI's Responses API has no seed
    assert creates[1]["seed"] == 5


async def test_a_seed_that_is_not_an_integer_is_refused_by_both_protocols():
    import httpx

    async with serve(replay="x") as server:
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}) as http:
            r = await http.post(f"{server.base_url}/chat/completions",
                                json={"messages": MESSAGES, "seed": "7", "stream": True})
            assert r.status_code == 400 and "seed" in r.text
            r = await http.post(f"{server.base_url}/responses",
                                json={"input": "hi", "seed": 1.5, "stream": True})
            assert r.status_code == 400 and "seed" in r.text


def test_the_embedded_model_answers_by_its_seed_over_both_protocols(model_server):
    """The real model in `steer serve`: the seed of a Chat Completions body and of a
    response.create frame reaches its sampling; one seed gives one answer, another seed
    another, so N variants of the embedded model differ."""
    code = f"""
import asyncio, json
from app.core.provider import Request
from app.providers.openai_chat import OpenAIChat
from app.providers.openai_responses import OpenAIResponses
from app.providers.local_serve import ServedLocal

URL, TOKEN = {model_server.base_url!r}, {model_server.token!r}
REQ = Request([{{"role": "user", "content": "Write a short poem about the sea."}}], max_tokens=24)

async def text(p, seed):
    p.seed = seed
    try:
        return "".join([getattr(ev, "text", "") async for ev in p.stream(REQ)
                        if type(ev).__name__ == "TextDelta"])
    finally:
        await p.aclose()

async def main():
    chat = [await text(OpenAIChat(URL, "m", TOKEN), s) for s in (1, 1, 2)]
    ws = [await text(OpenAIResponses(URL, "m", TOKEN, capabilities=ServedLocal.capabilities), s)
          for s in (1, 1, 2)]
    unseeded = await text(OpenAIChat(URL, "m", TOKEN), None)
    print(json.dumps({{"chat": chat, "ws": ws, "greedy": unseeded}}))

asyncio.run(main())
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    for proto in ("chat", "ws"):
        a, again, other = got[proto]
        assert a.strip(), got
        assert a == again, f"{proto}: the same seed gave two answers: {got}"
        assert a != other, f"{proto}: seeds 1 and 2 gave one answer: {got}"
    assert got["chat"][0] == got["ws"][0]  # one seed, one sampling, whatever the protocol


# -- replays run concurrently ----------------------------------------------------------------------

ANSWERS = [f"answer {name}: " + " ".join(f"{name}{i}" for i in range(60)) for name in "abc"]


async def _together(make, server: ChatServer, n: int) -> tuple[list[str], list[int]]:
    """n answers asked at once: each one's text, and whose each text delta was, in the order
    the deltas arrived."""
    providers = [make(server) for _ in range(n)]
    order: list[int] = []

    async def one(i: int, p) -> str:
        events: list[Event] = []
        async for ev in p.stream(Request(MESSAGES)):
            events.append(ev)
            if type(ev) is TextDelta:
                order.append(i)
        assert type(events[-1]) is Done and events[-1].finish_reason == "stop", events[-3:]
        return "".join(ev.text for ev in events if type(ev) is TextDelta)

    try:
        texts = await asyncio.gather(*(one(i, p) for i, p in enumerate(providers)))
    finally:
        for p in providers:
            await p.aclose()
    return list(texts), order


def _responses(server: ChatServer) -> OpenAIResponses:
    return OpenAIResponses(server.base_url, "m", KEY, stall_timeout=10.0)


@pytest.mark.parametrize("make", [chat, _responses], ids=["chat-sse", "responses-ws"])
async def test_replays_stream_concurrently_each_request_its_own_answer(make):
    tokens = len(split_tokens(ANSWERS[0]))
    assert tokens >= 100  # half a second at rate 200: well above the connection overhead
    async with serve(replay=ANSWERS, rate=200) as server:
        texts, order = await _together(make, server, 3)
    assert sorted(texts) == sorted(ANSWERS), texts  # each its own answer, whole
    assert len(server.stats.started.kept) == 3
    # at once, not one after another: every answer's first delta came before any answer's
    # last (how long N at once take against one: `steer bench variants`)
    firsts = [order.index(i) for i in range(3)]
    lasts = [len(order) - 1 - order[::-1].index(i) for i in range(3)]
    assert max(firsts) < min(lasts), order


async def test_the_answer_follows_the_arrival_order_and_the_last_repeats():
    async with serve(replay=["first", "second"]) as server:
        p = chat(server)
        try:
            assert [await answer(p) for _ in range(3)] == ["first", "second", "second"]
        finally:
            await p.aclose()


# -- settings and flags ------------------------------------------------------------------------------


def _args(*argv: str) -> Settings:
    p = Parser(prog="steer")
    provider_flags(p)
    return settings_from(p.parse_args(list(argv)))


def test_variants_come_from_the_config_file():
    path = config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('variants = 3\nvariant_models = ["a", "b", "c"]\n')
    s = load_settings()
    assert s.variants == 3 and s.variant_models == ["a", "b", "c"]
    assert variant_count(s) == 3
    path.write_text('variants = 3\nvariant_models = ["a", "b"]\n')
    with pytest.raises(ConfigError, match="^--variant-models names 2 models but --variants is 3$"):
        variant_count(load_settings())


def test_the_flags_set_the_count_and_bad_counts_are_one_line_errors():
    assert variant_count(_args()) == 1
    assert variant_count(_args("--variants", "4")) == 4
    s = _args("--variant-models", "cerebras, groq:openai/gpt-oss-20b,my-model")
    assert s.variant_models == ["cerebras", "groq:openai/gpt-oss-20b", "my-model"]
    assert variant_count(s) == 3  # named models alone set N
    assert variant_count(_args("--variants", "2", "--variant-models", "a,b")) == 2
    for argv, message in [
        (("--variants", "9"), "--variants takes 1 to 8, not 9"),
        (("--variants", "0"), "--variants takes 1 to 8, not 0"),
        (("--variants", "3", "--variant-models", "a,b"),
         "--variant-models names 2 models but --variants is 3"),
        (("--variants", "1", "--variant-models", "a,b"),
         "--variant-models names 2 models but --variants is 1"),
        (("--variant-models", ",".join("abcdefghi")), "--variants takes 1 to 8, not 9"),
    ]:
        with pytest.raises(ConfigError) as exc:
            _args(*argv)
        assert str(exc.value) == message


def test_steer_run_reports_a_bad_count_in_one_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "app", "run", "--variants", "9", "-C", str(tmp_path),
                          "say hi"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines()[-1] == "steer: --variants takes 1 to 8, not 9"


# -- the factory --------------------------------------------------------------------------------


async def test_n_variants_of_the_configured_provider_are_fresh_and_seeded_1_to_n():
    async with serve(replay=ANSWERS) as server:
        s = load_settings(provider="openai-chat", base_url=server.base_url, model="m",
                          variants=3)
        os.environ["STEER_API_KEY"] = KEY
        try:
            providers = build_variant_providers(s)
        finally:
            del os.environ["STEER_API_KEY"]
        try:
            assert len({id(p) for p in providers}) == 3
            assert len({id(p._client) for p in providers}) == 3  # type: ignore[attr-defined]
            assert [p.seed for p in providers] == [1, 2, 3]
            assert [p.label for p in providers] == ["openai-chat:m #1", "openai-chat:m #2",
                                                    "openai-chat:m #3"]
            texts = await asyncio.gather(*(answer(p) for p in providers))
        finally:
            for p in providers:
                await p.aclose()
    assert sorted(texts) == sorted(ANSWERS)
    assert sorted(b["seed"] for b in server.stats.bodies) == [1, 2, 3]
    assert all(h["authorization"] == f"Bearer {KEY}" for h in server.stats.headers)


def test_one_variant_is_the_provider_as_configured():
    (p,) = build_variant_providers(load_settings(provider="ollama", model="qwen2.5-coder:7b"))
    assert p.seed is None and p.label == "ollama:qwen2.5-coder:7b"


def test_variant_models_name_presets_preset_models_and_plain_models(monkeypatch):
    monkeypatch.setenv("CEREBRAS_API_KEY", "csk-variant-test-1")
    monkeypatch.setenv("GROQ_API_KEY", "gsk-variant-test-2")
    s = load_settings(provider="openai-chat", base_url="http://127.0.0.1:9/v1", model="base-model",
                      api_key_env="MY_KEY",
                      variant_models=["cerebras", "groq:llama-3.3-70b", "qwen2.5-coder:7b",
                                      "openai-chat:other", "local"])
    providers = build_variant_providers(s)
    got = [(p.name, getattr(p, "base_url", None), p.model, p.key_env) for p in providers]
    assert got[:4] == [
        ("cerebras", "https://api.cerebras.ai/v1", "gpt-oss-120b", "CEREBRAS_API_KEY"),
        ("groq", "https://api.groq.com/openai/v1", "llama-3.3-70b", "GROQ_API_KEY"),
        # not a preset before the colon: a model of the configured provider
        ("openai-chat", "http://127.0.0.1:9/v1", "qwen2.5-coder:7b", "MY_KEY"),
        ("openai-chat", "http://127.0.0.1:9/v1", "other", "MY_KEY"),
    ]
    assert isinstance(providers[4], ServedLocal)
    assert [p.seed for p in providers] == [1, 2, 3, 4, 5]
    labels = [p.label for p in providers]
    assert labels[:4] == ["cerebras:gpt-oss-120b #1", "groq:llama-3.3-70b #2",
                          "openai-chat:qwen2.5-coder:7b #3", "openai-chat:other #4"]
    assert labels[4].startswith("local:") and labels[4].endswith(" #5")
    assert not any("test-1" in label or "test-2" in label for label in labels)


def test_a_preset_without_its_key_is_a_config_error(monkeypatch):
    monkeypatch.delenv("CEREBRAS_API_KEY", raising=False)
    s = load_settings(provider="ollama", model="m", variant_models=["m", "cerebras"])
    with pytest.raises(ConfigError, match="CEREBRAS_API_KEY"):
        build_variant_providers(s)


def test_the_acp_agent_takes_one_variant_only(tmp_path):
    s = load_settings(agent="some-agent --acp")
    (one,) = build_variant_providers(s, cwd=tmp_path)
    assert isinstance(one, AcpAgent)
    for more in (load_settings(agent="some-agent --acp", variants=2),
                 load_settings(agent="some-agent --acp", variant_models=["a", "b"])):
        with pytest.raises(ConfigError) as exc:
            build_variant_providers(more, cwd=tmp_path)
        assert str(exc.value) == (
            "--variants: the ACP agent runs one session at a time; parallel variants need a "
            "back-end that can answer several at once (--provider ...)")


def test_the_embedded_model_n_times_is_n_clients_of_one_server():
    providers = build_variant_providers(load_settings(variants=2))
    assert all(isinstance(p, ServedLocal) for p in providers)
    assert providers[0] is not providers[1] and providers[0].pool is not providers[1].pool
    assert [p.seed for p in providers] == [1, 2]
