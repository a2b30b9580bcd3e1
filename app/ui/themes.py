"""Themes: the built-in ones (themes/*.toml), the user's (<config dir>/themes/*.toml), and
the remembered choice.

What a theme leaves out (the diff's colours, the syntax style) comes from the default theme
(config.DEFAULT_THEME, its file themes/<name>.toml): those values are written there and nowhere
else, so a user's theme, Textual's own themes and the fallbacks in the widgets all agree."""

from __future__ import annotations

import json
import os
import tomllib
from importlib.resources import files
from pathlib import Path

from textual.theme import Theme

from app.config import DEFAULT_THEME, config_dir
from app.core.disk.state_home import state_home


def _builtin(name: str) -> dict:
    return tomllib.loads(files("app.themes").joinpath(f"{name}.toml").read_text())


# variable -> value for every theme variable steer's stylesheet and widgets read
THEME_DEFAULTS: dict[str, str] = {k: str(v) for k, v in _builtin(DEFAULT_THEME)["variables"].items()}
SYNTAX_FALLBACK = THEME_DEFAULTS["syntax"]  # the pygments style where a theme names none
_FIELDS = {"name", "primary", "secondary", "warning", "error", "success", "accent", "foreground",
           "background", "surface", "panel", "boost", "dark", "luminosity_spread", "text_alpha"}


def stylesheet() -> Path:
    return Path(str(files("app.themes").joinpath("steer.tcss")))


def _theme(data: dict, origin: str) -> Theme:
    unknown = set(data) - _FIELDS - {"variables"}
    if unknown or "name" not in data or "primary" not in data:
        raise ValueError(f"{origin}: a theme needs name and primary; unknown keys: {sorted(unknown)}")
    variables = {**THEME_DEFAULTS, **{k: str(v) for k, v in (data.get("variables") or {}).items()}}
    return Theme(**{k: v for k, v in data.items() if k != "variables"}, variables=variables)


def load_themes() -> tuple[list[Theme], list[str]]:
    """(themes, problems): built-ins first, then user themes; a broken user theme is skipped
    with a message instead of stopping the app."""
    themes, problems = [], []
    for entry in sorted(files("app.themes").iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".toml"):
            themes.append(_theme(tomllib.loads(entry.read_text()), entry.name))
    user = config_dir() / "themes"
    for path in sorted(user.glob("*.toml")) if user.is_dir() else ():
        try:
            themes.append(_theme(tomllib.loads(path.read_text()), str(path)))
        except (ValueError, TypeError, tomllib.TOMLDecodeError) as exc:
            problems.append(f"theme {path.name} skipped: {exc}")
    return themes, problems


def _state_file() -> Path:
    return state_home() / "ui.json"


def remembered_theme() -> str | None:
    try:
        return json.loads(_state_file().read_text()).get("theme")
    except (OSError, ValueError):
        return None


def remember_theme(name: str) -> None:
    path = _state_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        state = json.loads(path.read_text()) if path.exists() else {}
        state["theme"] = name
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, path)
    except (OSError, ValueError):
        pass  # an unwritable state dir costs the memory of a theme, nothing more
