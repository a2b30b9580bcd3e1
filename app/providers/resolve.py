"""What the settings name as a back-end: the one place a provider name gets its meaning.

A name is `local` (the embedded model), `openai-chat` or `openai-responses` (an endpoint the
settings give), or a preset (config.PRESETS: its endpoint, key variable, default model and
protocol). With no name configured, a configured base URL means Chat Completions there, and
nothing at all means the embedded model. A --variant-models entry is a preset or provider
name, `name:model`, or a model of the configured provider (`variant_settings`).

config.py holds the data (the settings, the preset table) and asks nothing of this module;
the factory (factory.py) builds what `resolve` returns, and `steer doctor` and the command
line ask here for the same answers. The key itself is read only by `resolve`, and kept out
of the Backend's repr; everything else names the variable it comes from.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

from app.config import API_KEY_ENV, PRESETS, ConfigError, Settings

PROVIDERS = ("local", "openai-chat", "openai-responses", *PRESETS)


@dataclass(frozen=True)
class Backend:
    """A provider name resolved: everything the factory needs to build the back-end."""

    name: str  # the provider's name (a preset keeps its own in the status line)
    protocol: Literal["local", "chat", "responses"]  # the embedded model, or the wire protocol
    base_url: str | None  # None for the embedded model
    model: str
    key_env: str | None = None  # the variable the key is read from (for messages)
    key: str | None = field(default=None, repr=False)  # never shown


def provider_name(s: Settings) -> str:
    """The provider in effect: the one configured, else Chat Completions at a configured base
    URL, else the embedded model."""
    return s.provider or ("openai-chat" if s.base_url else "local")


def base_url_of(s: Settings, name: str) -> str | None:
    """The endpoint of provider `name`: configured, else its preset's (None for the embedded
    model, or a provider without one)."""
    preset = PRESETS.get(name)
    return None if name == "local" else s.base_url or (preset.base_url if preset else None)


def key_env_of(s: Settings) -> str | None:
    """The name of the variable the API key is read from (for messages: never its value)."""
    if os.environ.get(API_KEY_ENV):
        return API_KEY_ENV
    preset = PRESETS.get(provider_name(s))
    return s.api_key_env or (preset.key_env if preset else None)


def resolve(s: Settings) -> Backend:
    """The provider the settings name, with its endpoint, model and key from the settings and
    the environment; ConfigError says what is missing."""
    name = provider_name(s)
    if name not in PROVIDERS:
        raise ConfigError(f"unknown provider {name!r}; choose one of {', '.join(PROVIDERS)}")
    if name == "local":
        return Backend(name, "local", None, s.model or "")
    preset = PRESETS.get(name)
    base_url = base_url_of(s, name)
    if not base_url:
        hint = f", e.g. {preset.base_url_hint}" if preset and preset.base_url_hint else ""
        raise ConfigError(f"provider {name} needs --base-url (or base_url in the config file){hint}")
    model = s.model or (preset.model if preset else "")
    if not model:
        raise ConfigError(f"provider {name} needs --model (or model in the config file)")
    key_env = key_env_of(s)
    key = os.environ.get(key_env) if key_env else None
    if not key and preset is not None and preset.key_required:
        raise ConfigError(f"provider {name} needs an API key: set {preset.key_env} (or {API_KEY_ENV})")
    protocol: Literal["chat", "responses"] = (
        "responses" if name == "openai-responses" else preset.protocol if preset else "chat")
    return Backend(name, protocol, base_url, model, key_env, key)


def variant_settings(s: Settings, entry: str) -> Settings:
    """The settings of one --variant-models entry: `preset`, `preset:model` (any provider
    name works as the preset), or a model name for the configured provider; a name that only
    looks like a preset (`name:` with nothing after it) is a model."""
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
