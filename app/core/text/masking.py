"""Secrets are never shown: the API key values steer knows are masked as `***` in whatever it
prints, writes to a log or saves (DESIGN rule 6), whoever wrote them there: a model that
echoes the key in its answer, an agent that prints it on stderr and exits, a server that
quotes it back in an error.

The values known: every environment variable whose name says it holds one (KEY, TOKEN,
SECRET, PASSWORD; 8 characters or more, so that no short word is masked everywhere), and the
key each provider was given (`remember`, by the provider factory: a configured `api_key_env`
may have any name). Masking is by value, not by shape: a value the user never configured is
text like any other.

Text written piece by piece (a streamed answer) can cut a key in two: `StreamMask` holds
back the end of a piece while it could be the start of a key, so no write shows a part of one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence

MASK = "***"
MIN_ENV = 8  # a variable's value shorter than this is not taken for a key
MIN_GIVEN = 6  # nor a key given to a provider

_SECRET_VARS = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.I)
_given: set[str] = set()
_known: list[str] | None = None  # cached: the environment read once, again after remember()


def env_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of the environment's secret-named variables, longest first."""
    env = os.environ if environ is None else environ
    return sorted({v for k, v in env.items() if _SECRET_VARS.search(k) and len(v) >= MIN_ENV},
                  key=len, reverse=True)


def remember(key: str | None) -> None:
    """A key a provider was given: masked from now on, whatever its variable is called."""
    global _known
    if key and len(key) >= MIN_GIVEN and key not in _given:
        _given.add(key)
        _known = None


def known() -> list[str]:
    """Every key value to mask, longest first (a key inside another is masked with it)."""
    global _known
    if _known is None:
        _known = sorted({*env_secrets(), *_given}, key=len, reverse=True)
    return _known


def mask(text: str, secrets: Iterable[str] | None = None) -> str:
    """`text` with every known key value (or each of `secrets`) replaced by ***."""
    for s in known() if secrets is None else secrets:
        if s and s in text:
            text = text.replace(s, MASK)
    return text


def mask_tree(obj: object) -> object:
    """Every string in a JSON-like tree masked (before it is serialised: an escaped key, a
    quote or a backslash in it, would no longer read as the key)."""
    if isinstance(obj, str):
        return mask(obj)
    if isinstance(obj, dict):
        return {mask_tree(k): mask_tree(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [mask_tree(v) for v in obj]
    return obj


def held_back(text: str, secrets: Sequence[str]) -> int:
    """How many characters at the end of `text` could be the start of a key (to hold back)."""
    keep = 0
    for s in secrets:  # the longest end of `text` that begins some key
        for k in range(min(len(s) - 1, len(text)), keep, -1):
            if text.endswith(s[:k]):
                keep = k
                break
    return keep


def mask_shown(text: str) -> str:
    """`text` masked for a screen that redraws it whole as it grows (an answer's last line):
    keys masked, and an end that could be the start of one left out until the rest comes."""
    secrets = known()
    if not secrets:
        return text
    out = mask(text, secrets)
    keep = held_back(out, secrets)
    return out[: len(out) - keep]


class StreamMask:
    """Masks text that arrives in pieces: what `feed` returns never holds a key, nor the start
    of one whose rest may follow; `end` gives back what was held."""

    def __init__(self, secrets: Sequence[str] | None = None) -> None:
        self._secrets = secrets
        self._held = ""

    def feed(self, text: str) -> str:
        secrets = known() if self._secrets is None else self._secrets
        if not secrets:
            out, self._held = self._held + text, ""
            return out
        out = mask(self._held + text, secrets)
        keep = held_back(out, secrets)
        self._held = out[len(out) - keep:] if keep else ""
        return out[: len(out) - keep]

    def end(self) -> str:
        held, self._held = self._held, ""
        return held
