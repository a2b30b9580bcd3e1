"""How big a request is against the model's context window, and what to send of a file that
does not fit.

Token counts are estimates (about 3.5 characters a token for code and English, on the
tokenizers of the models steer targets; the status line marks them with ≈): exact counts
would need each model's tokenizer, and the point is to see an overflow coming, not to pack
the window to the last token. Nothing is ever truncated silently: a file that would not fit
is sent whole, as its outline, or not at all, as the user chooses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.core.disk.snapshot import Snapshot
from app.core.text.tokens import CHARS_PER_TOKEN, estimate_tokens  # noqa: F401 - context.py reads both here

RESERVE = 0.25  # of the window, kept free for the answer

# Context windows of the presets' usual models (tokens), as their providers publish them;
# a configured `context_window`, or what the server reports, comes first.
KNOWN_WINDOWS: list[tuple[re.Pattern[str], int]] = [
    (re.compile(r"(^|/)gpt-5"), 400_000),
    (re.compile(r"(^|/)gpt-oss-(120|20)b"), 131_072),
    (re.compile(r"(^|/)grok-code-fast"), 256_000),
    (re.compile(r"(^|/)gpt-4\.1"), 1_047_576),
    (re.compile(r"(^|/)o[34](-mini)?\b"), 200_000),
    (re.compile(r"smollm2", re.IGNORECASE), 8_192),
    (re.compile(r"(^|/)qwen3-coder", re.IGNORECASE), 262_144),
]

_DEFINITION = re.compile(
    r"^\s*(?:export\s+)?(?:async\s+)?(?:def|class|fn|func|function|interface|struct|enum|impl|trait"
    r"|type|module|public|private|protected|static)\b|^(?:[A-Za-z_][\w.]*\s*=|#{1,6}\s)")



def known_window(model: str) -> int | None:
    for pattern, window in KNOWN_WINDOWS:
        if pattern.search(model or ""):
            return window
    return None


def outline(snap: Snapshot) -> list[str]:
    """The file's definitions (classes, functions, top-level names, headings) with their
    line numbers: enough for the model to see the shape and ask for, or edit, a part."""
    return [f"{i + 1}: {line.rstrip()}" for i, line in enumerate(snap.lines)
            if line.strip() and _DEFINITION.match(line)]


@dataclass
class Budget:
    used: int  # estimated tokens of the next request
    window: int | None  # the model's context window, when known
    files: dict[str, int]  # estimated tokens per context file (as it would be sent)

    @property
    def room(self) -> int | None:
        """Tokens the request may take (the window less what the answer needs)."""
        return None if self.window is None else int(self.window * (1 - RESERVE))

    @property
    def over(self) -> bool:
        return self.room is not None and self.used > self.room

    def fits(self, more: int) -> bool:
        return self.room is None or self.used + more <= self.room

    def text(self) -> str:
        used = _k(self.used)
        if self.window is None:
            return f"≈{used} tokens (window unknown)"
        return f"≈{used} of {_k(self.window)} tokens" + (" — over: the answer has no room" if self.over else "")


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)
