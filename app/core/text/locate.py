"""Finding where a model's "old" lines sit in a file, without scanning the file.

A `LineIndex` maps each distinct line to its positions, built once per base snapshot, so
locating a block costs in proportion to how often its rarest line occurs, not to the
length of the file. Models often get indentation or trailing spaces slightly wrong; when the
exact text is not found we try again ignoring trailing, then surrounding, whitespace (the
same ladder codex's apply_patch uses).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

Normalise = Callable[[str], str]
LADDER: tuple[Normalise, ...] = (lambda s: s, str.rstrip, str.strip)


class LocateError(ValueError):
    pass


@dataclass(slots=True)
class LineIndex:
    lines: Sequence[str]
    _maps: dict[int, dict[str, list[int]]] = field(default_factory=dict)

    def positions(self, level: int, key: str) -> list[int]:
        table = self._maps.get(level)
        if table is None:  # built on first use: most lookups never leave level 0
            norm = LADDER[level]
            table = {}
            for i, line in enumerate(self.lines):
                table.setdefault(norm(line), []).append(i)
            self._maps[level] = table
        return table.get(key, [])

    def positions_map(self) -> dict[str, list[int]]:
        self.positions(0, "")
        return self._maps[0]

    def find(
        self, block: Sequence[str], start: int = 0, excluded: Callable[[int, int], bool] | None = None
    ) -> tuple[int, list[int]]:
        """(ladder level, positions >= start) where `block` matches, at the first ladder level
        that matches. `excluded(s, e)` drops candidates overlapping regions other edits own."""
        if not block:
            return 0, []
        for level, norm in enumerate(LADDER):
            keys = [norm(line) for line in block]
            # pivot on the rarest line of the block: the fewest candidates to verify
            pivot = min(range(len(keys)), key=lambda i: len(self.positions(level, keys[i])))
            hits = []
            for p in self.positions(level, keys[pivot]):
                s = p - pivot
                if s < start or s + len(block) > len(self.lines):
                    continue
                if all(norm(self.lines[s + i]) == keys[i] for i in range(len(block))):
                    if excluded is None or not excluded(s, s + len(block)):
                        hits.append(s)
            if hits:
                return level, sorted(hits)
        return 0, []


def find_in(lines: Sequence[str], block: Sequence[str]) -> tuple[int, list[int]]:
    """`LineIndex.find` for short sequences (another edit's new lines): a plain scan."""
    return LineIndex(lines).find(block)


def locate(index: LineIndex, block: Sequence[str], path: str, *, start: int = 0, first: bool = False,
           excluded: Callable[[int, int], bool] | None = None) -> tuple[int, int]:
    """(ladder level, the single position of `block`); `first` takes the earliest match
    (apply_patch seeks forward from the previous chunk) instead of refusing an ambiguous one."""
    level, hits = index.find(block, start, excluded)
    if not hits:
        raise LocateError(f"{path}: the lines to replace were not found:\n{_excerpt(block)}")
    if len(hits) > 1 and not first:
        where = ", ".join(str(h + 1) for h in hits[:5])
        raise LocateError(
            f"{path}: the lines to replace occur {len(hits)} times (lines {where}); "
            f"the edit is ambiguous:\n{_excerpt(block)}"
        )
    return level, hits[0]


def _excerpt(block: Sequence[str], n: int = 3) -> str:
    shown = "\n".join("    " + line for line in block[:n])
    return shown + (f"\n    … ({len(block) - n} more lines)" if len(block) > n else "")
