"""Settings -> a provider object: the one place that maps a provider name to a back-end."""

from __future__ import annotations

import os

from app.config import ConfigError, Settings, key_env_of, protocol_of, resolve_provider
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
