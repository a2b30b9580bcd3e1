"""The names of the files steer puts beside a user's file while it writes it: its staged
content and the original moved aside (`.NAME.TAG.XXXXXXXX.steer-tmp`, hidden, tagged with the
journal step's id so that recovery after a crash knows whose they are), and a raced save kept
beside the file (`NAME.steer-saved-TAG`). File names are limited in bytes: long ones are cut."""

from __future__ import annotations

import os
import secrets

TMP_SUFFIX = ".steer-tmp"


def _short(name: str, limit: int) -> str:
    """`name` cut to `limit` bytes (file names are limited in bytes, not characters)."""
    return os.fsencode(name)[:limit].decode("utf-8", "ignore") or "f"


def tmp_head(name: str, tag: str) -> str:
    return f".{_short(name, 96)}.{tag}."


def tmp_name(name: str, tag: str) -> str:
    return f"{tmp_head(name, tag)}{secrets.token_hex(4)}{TMP_SUFFIX}"


def rescue_name(name: str, tag: str) -> str:
    return f"{_short(name, 200)}.steer-saved-{tag}"
