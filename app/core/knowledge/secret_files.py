"""Which files look like secrets, so a look-up never hands them to a model on its own.

By name: `.env*`, `*.pem`, `*.key`, SSH keys (`id_*`, though a source file such as
`id_map.py` is not one), and a few well-known credential files. By content: a file holding
the value of a key steer was configured with. The user can still share any of them by adding
the file to the context: the rule guards against the model reaching for them, not the user.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

from app.core.knowledge.tags import language

SECRET_NAMES: tuple[str, ...] = (".env", ".env.*", "*.pem", "*.key", "id_*", "*.p12", "*.pfx",
                                 "*.jks", "*.keystore", ".netrc", ".pgpass")
MIN_KEY = 8  # a configured "key" shorter than this would match ordinary text


def secret_name(path: str, patterns: Sequence[str] = SECRET_NAMES) -> str | None:
    """The pattern `path`'s file name matches, or None."""
    name = path.rpartition("/")[2].lower()
    for pattern in patterns:
        if fnmatch.fnmatchcase(name, pattern):
            if pattern == "id_*" and language(name) is not None:
                continue  # id_map.py is code, not a key
            return pattern
    return None


def holds_key(data: bytes, key_values: Sequence[str]) -> bool:
    """`data` contains one of the configured key values."""
    return any(len(k) >= MIN_KEY and k.encode() in data for k in key_values)


def refusal(path: str, *, pattern: str | None = None, key: bool = False) -> str:
    """The reason a model reads when it asked for a secret-looking file."""
    why = (f"its name looks like a secret ({pattern})" if pattern
           else "it holds the value of an API key steer is configured with")
    return (f"refused {path}: {why}. steer does not show such files to the model; the user can "
            "add it to the context if it should be shared.")
