"""Settings -> a provider object: the one place that maps a provider name to a back-end."""

from __future__ import annotations

import os

from app.config import (
    PRESETS,
    PROVIDERS,
    ConfigError,
    Settings,
    key_env_of,
    protocol_of,
    provider_name,
    resolve_provider,
    variant_count,
)
from app.core.conversation.context_budget import known_window
from app.core.provider import Provider


def build_provider(s: Settings, cwd: str | os.PathLike[str] | None = None) -> Provider:
    """`cwd` is the workspace: an agent works there."""
    if s.agent:
        from app.providers.acp import AcpAgent

        try:
            return AcpAgent(s.agent, cwd or os.getcwd(), stall_timeout=s.stall_timeout)
        except ValueError as exc:  # an empty or badly quoted command line
            raise ConfigError(f"--agent: {exc}") from None
    name, base_url, model, key = resolve_provider(s)
    provider: Provider
    if name == "local":  # the embedded model, served by a shared `steer serve`
        from app.providers.local_serve import ServedLocal

        provider = ServedLocal(s.model_path, stall_timeout=s.stall_timeout)
        provider.context_window = s.context_window or 8192  # steer serve's n_ctx
        return provider
    if protocol_of(name) == "responses":
        from app.providers.openai_responses import OpenAIResponses

        provider = OpenAIResponses(base_url or "", model, key, stall_timeout=s.stall_timeout)
    else:
        from app.providers.openai_chat import OpenAIChat

        provider = OpenAIChat(base_url or "", model, key, stall_timeout=s.stall_timeout)
    provider.name = name  # presets keep their own name in the status line
    provider.key_env = key_env_of(s)  # a refused key names the variable to check
    provider.context_window = s.context_window or known_window(model)
    return provider


def build_variant_providers(s: Settings, cwd: str | os.PathLike[str] | None = None) -> list[Provider]:
    """The providers of parallel variants, one per variant and each a fresh instance (its own
    connections, its own conversation with the server), seeded 1..N when N > 1. Without
    `variant_models`: the configured provider `variant_count(s)` times. With them, entry i is
    a preset or provider name (its base URL, key variable and default model), `preset:model`,
    or a model of the configured provider (a GGUF path when that is the embedded model); a
    name that only looks like a preset is a model.
    Each one's label says which variant it is. A back-end that cannot answer several at once
    (an ACP agent) is refused for N > 1 (ConfigError). Built, not started: nothing connects
    before warm() or the first request."""
    n = variant_count(s)
    settings = [variant_settings(s, entry) for entry in s.variant_models] or [s] * n
    first = build_provider(settings[0], cwd)
    if n > 1 and not first.capabilities.parallel:
        raise ConfigError(SERIAL_AGENT)
    providers = [first, *(build_provider(v, cwd) for v in settings[1:])]
    if n > 1:  # seeds tell one model's answers apart (also a model named twice), and the
        for i, p in enumerate(providers, 1):  # label shows them as #i
            p.seed = i
    return providers


SERIAL_AGENT = ("--variants: the ACP agent runs one session at a time; parallel variants need "
                "a back-end that can answer several at once (--provider ...)")


def variant_settings(s: Settings, entry: str) -> Settings:
    """The settings of one --variant-models entry: `preset`, `preset:model` (any provider
    name works as the preset), or a model name for the configured provider."""
    name, sep, model = entry.partition(":")
    if name not in PROVIDERS or (sep and not model):
        if provider_name(s) == "local" and not s.agent:  # the embedded model: another GGUF
            return s.model_copy(update={"model_path": entry, "variant_models": []})
        return s.model_copy(update={"model": entry, "variant_models": []})
    if name == "local":  # the embedded model, or the GGUF named after the colon
        return s.model_copy(update={"provider": "local", "model_path": model or s.model_path,
                                    "variant_models": []})
    if name == provider_name(s):  # the configured one: keep its endpoint and key variable
        return s.model_copy(update={"model": model or s.model, "variant_models": []})
    # another provider: its own preset's endpoint, key variable and default model; a provider
    # without a preset (openai-chat, openai-responses) keeps the configured endpoint
    keep = name not in PRESETS
    return s.model_copy(update={
        "provider": name, "model": model or None, "variant_models": [],
        "base_url": s.base_url if keep else None,
        "api_key_env": s.api_key_env if keep else None})

