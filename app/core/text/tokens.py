"""How many tokens a text costs, estimated without a tokenizer: the one estimate the context
budget, the repository map's budget and the look-ups' cards share (a tokenizer per model
would cost more than the estimate is worth at the sizes involved)."""

from __future__ import annotations

CHARS_PER_TOKEN = 3.5


def estimate_tokens(text: str) -> int:
    return int(len(text) / CHARS_PER_TOKEN) + 1 if text else 0
