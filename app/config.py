"""Settings: defaults < config file (TOML in the user config dir) < STEER_* environment < flags.

What a provider name means (a preset, `preset:model`, a model, a base URL alone) is decided in
app/providers/resolve.py, from the data held here (the settings and the preset table).

API keys are never stored here: a provider names the *environment variable* that holds its
key (`api_key_env`), and STEER_API_KEY overrides it. Keys are read at the moment a provider
is built and live only inside that provider object.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from app.core.conversation.rules import ProjectRules
from app.core.disk.workspace import Workspace
from app.core.provider import STALL_TIMEOUT


class Preset(BaseModel):
    base_url: str | None  # None: the user's own endpoint (--base-url), e.g. an Azure resource
    key_env: str | None = None
    model: str = ""
    key_required: bool = True
    protocol: Literal["chat", "responses"] = "chat"  # Chat Completions (SSE) or Responses (WebSocket)
    base_url_hint: str = ""


PRESETS: dict[str, Preset] = {
    # the Responses API over a persistent WebSocket (app/providers/openai_responses.py)
    "openai": Preset(base_url="https://api.openai.com/v1", key_env="OPENAI_API_KEY",
                     model="gpt-5.3-codex", protocol="responses"),
    "azure": Preset(base_url=None, key_env="AZURE_OPENAI_API_KEY", protocol="responses",
                    base_url_hint="https://YOUR-RESOURCE.openai.azure.com/openai/v1"),
    "xai": Preset(base_url="https://api.x.ai/v1", key_env="XAI_API_KEY", model="grok-code-fast-1",
                  protocol="responses"),
    # Chat Completions over SSE (app/providers/openai_chat.py)
    "cerebras": Preset(base_url="https://api.cerebras.ai/v1", key_env="CEREBRAS_API_KEY", model="gpt-oss-120b"),
    "groq": Preset(base_url="https://api.groq.com/openai/v1", key_env="GROQ_API_KEY", model="openai/gpt-oss-120b"),
    "openrouter": Preset(base_url="https://openrouter.ai/api/v1", key_env="OPENROUTER_API_KEY",
                         model="openai/gpt-oss-120b"),
    "ollama": Preset(base_url="http://127.0.0.1:11434/v1", key_required=False),
    "vllm": Preset(base_url="http://127.0.0.1:8000/v1", key_env="VLLM_API_KEY", key_required=False),
    "llama-server": Preset(base_url="http://127.0.0.1:8080/v1", key_env="LLAMA_API_KEY",
                           model="default", key_required=False),
    "lmstudio": Preset(base_url="http://127.0.0.1:1234/v1", key_required=False),
}
ENV_PREFIX = "STEER_"  # a setting's environment variable: STEER_MODEL, STEER_BASE_URL...
API_KEY_ENV = "STEER_API_KEY"  # read before the variable a provider names for its key
DEFAULT_THEME = "steer-dark"  # the UI's theme when none is configured: themes/<name>.toml


def config_dir() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "steer"


def personal_rules() -> Path:
    """The user's own rules, sent with every request in every project (rules.py)."""
    return config_dir() / "AGENTS.md"


def config_file() -> Path:
    return config_dir() / "config.toml"


def config_file_shown() -> str:
    """The config file as a user would type its path: `~/.config/steer/config.toml`, or
    `$XDG_CONFIG_HOME/steer/config.toml` when that variable moves it."""
    return ("$XDG_CONFIG_HOME" if os.environ.get("XDG_CONFIG_HOME") else "~/.config") + "/steer/config.toml"


class ConfigError(ValueError):
    pass


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    provider: str | None = None
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None  # the variable holding the key, for providers without a preset
    format: str = "auto"
    model_path: str | None = None
    agent: str | None = None  # an ACP agent's command line: used instead of a model
    max_tokens: int | None = None
    temperature: float | None = None
    stall_timeout: float = STALL_TIMEOUT
    context_window: int | None = None  # the model's window in tokens, when steer cannot know it
    theme: str = DEFAULT_THEME
    keys: dict[str, str] = {}  # action -> key, overriding the defaults
    # the repository map and look-ups (app/core/knowledge): the map's tokens in a request (a
    # tiny model and a small window get less), whether the model may read, grep and list
    # files itself, and how much per turn (rounds of calls, tokens of answers)
    map_tokens: int = 1500
    tools: bool = True
    tool_rounds: int = 6
    tool_tokens: int = 16_000
    # parallel variants: one instruction answered N times at once (1..8), by the configured
    # model with seeds 1..N, or by the models named here (a preset, `preset:model`, or a
    # model of the configured provider); naming models alone sets N (variant_count)
    variants: int = 1
    variant_models: list[str] = []
    # the project's rules in every request (AGENTS.md, else CLAUDE.md, GEMINI.md or
    # CONVENTIONS.md, at the root and in the folders of the files shown), and your own in
    # ~/.config/steer/AGENTS.md (app/core/conversation/rules.py); false leaves them out
    rules: bool = True
    # the app's check (!): a command run on each finished variant in a throwaway worktree
    check: str | None = None
    check_timeout: float = 120.0
    # the check in bubblewrap: the system read-only, no network, writes only in its worktree
    # (`steer doctor` says whether it can run here)
    check_sandbox: bool = False

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource) -> tuple[PydanticBaseSettingsSource, ...]:
        toml = TomlConfigSettingsSource(settings_cls, toml_file=config_file())
        return (init_settings, env_settings, toml)


def load_settings(**flags: object) -> Settings:
    """The settings in effect: the config file, the STEER_* environment over it, and the
    command line's `flags` over both (None: a flag not given). The flags come typed from
    argparse; the file and the environment are validated here."""
    try:
        settings = Settings()
    except ValueError as exc:
        raise ConfigError(f"invalid configuration ({config_file()}): {exc}") from None
    return settings.model_copy(update={k: v for k, v in flags.items() if v is not None})


MAX_VARIANTS = 8


def variant_count(s: Settings) -> int:
    """How many variants the settings ask for, checked: `variants` when it was set (the
    config file, STEER_VARIANTS, --variants), else as many as `variant_models` names, else 1."""
    given = "variants" in s.model_fields_set
    n = s.variants if given or not s.variant_models else len(s.variant_models)
    if not 1 <= n <= MAX_VARIANTS:
        raise ConfigError(f"--variants takes 1 to {MAX_VARIANTS}, not {n}")
    if s.variant_models and len(s.variant_models) != n:
        count = len(s.variant_models)
        raise ConfigError(f"--variant-models names {count} model{'s' * (count != 1)} "
                          f"but --variants is {n}")
    return n


def project_rules(settings: Settings, ws: Workspace) -> ProjectRules | None:
    """Where a session's rules come from, or None when the settings leave them out."""
    return ProjectRules(ws, personal_rules()) if settings.rules else None
