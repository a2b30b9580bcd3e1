"""A count and its noun, agreeing: `plural(1, "hunk")` is "1 hunk", `plural(3, "hunk")` "3
hunks", `plural(2, "match", "matches")`. The one place steer writes a count in words, so no
message says "1 hunk(s)" or "1 unchanged lines"."""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None, *, sep: str = ",") -> str:
    """`n` (with thousands separated by `sep`; "" for none) and `word`, or `many` (default:
    `word` + "s") when `n` is not 1."""
    number = f"{n:,}".replace(",", sep) if sep != "," else f"{n:,}"
    return f"{number} {word if n == 1 else many or word + 's'}"
