"""Settings -> a provider object: builds the back-end that resolve.py says the settings name
(or the ACP agent they name instead), one per variant for parallel variants."""

from __future__ import annotations

import os

from app.config import ConfigError, Settings, variant_count
from app.core.conversation.context_budget import known_window
from app.core.provider import Provider
from app.providers.resolve import resolve, variant_settings


def build_provider(s: Settings, cwd: str | os.PathLike[str] | None = None) -> Provider:
    """`cwd` is the workspace: an agent works there."""
    if s.agent:
        from app.providers.acp import AcpAgent

        try:
            return AcpAgent(s.agent, cwd or os.getcwd(), stall_timeout=s.stall_timeout)
        except ValueError as exc:  # an empty or badly quoted command line
            raise ConfigError(f"--agent: {exc}") from None
    at = resolve(s)
    provider: Provider
    if at.protocol == "local":  # the embedded model, served by a shared `steer serve`
        from app.providers.local_serve import ServedLocal

        provider = ServedLocal(s.model_path, stall_timeout=s.stall_timeout)
        provider.context_window = s.context_window or 8192  # steer serve's n_ctx
        return provider
    if at.protocol == "responses":
        from app.providers.openai_responses import OpenAIResponses

        provider = OpenAIResponses(at.base_url or "", at.model, at.key, stall_timeout=s.stall_timeout)
    else:
        from app.providers.openai_chat import OpenAIChat

        provider = OpenAIChat(at.base_url or "", at.model, at.key, stall_timeout=s.stall_timeout)
    provider.name = at.name  # presets keep their own name in the status line
    provider.key_env = at.key_env  # a refused key names the variable to check
    provider.context_window = s.context_window or known_window(at.model)
    return provider


def build_variant_providers(s: Settings, cwd: str | os.PathLike[str] | None = None) -> list[Provider]:
    """The providers of parallel variants, one per variant and each a fresh instance (its own
    connections, its own conversation with the server), seeded 1..N when N > 1. Without
    `variant_models`: the configured provider `variant_count(s)` times. With them, entry i is
    what resolve.variant_settings makes of it: a preset or provider name (its base URL, key
    variable and default model), `preset:model`, or a model of the configured provider (a
    GGUF path when that is the embedded model).
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
