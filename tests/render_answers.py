"""Render a base -> target change as a model would write it, in each edit format. Used by the
property tests: whatever the texts, the engine must turn these answers back into target."""

from __future__ import annotations

from collections.abc import Callable

from diff_oracle import regions, splice


def _hits(base: list[str], block: list[str], start: int = 0) -> list[int]:
    n = len(block)
    return [p for p in range(start, len(base) - n + 1) if base[p : p + n] == block]


def _blocks(base: list[str], target: list[str], ctx: int,
            good: Callable[[list[list], int], bool]) -> list[list]:
    """Blocks [s, e, regions] of base covering every change, each widened (never cutting a
    region) until `good(blocks, i)`; blocks that come to overlap are merged."""
    blocks = [[max(0, a1 - ctx), min(len(base), a2 + ctx), [(a1, a2, b1, b2)]]
              for a1, a2, b1, b2 in regions(base, target)]
    while True:
        merged: list[list] = []
        for blk in blocks:
            if merged and blk[0] < merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], blk[1])
                merged[-1][2] = merged[-1][2] + blk[2]
            else:
                merged.append(blk)
        blocks = merged
        grew = False
        for i, blk in enumerate(blocks):
            turn = 0
            while not good(blocks, i):
                lo = blocks[i - 1][1] if i else 0
                if (turn % 2 == 0 or blk[0] <= lo) and blk[1] < len(base):
                    blk[1] += 1
                elif blk[0] > 0:
                    blk[0] -= 1  # into the previous block, if need be: then they merge
                else:
                    break
                turn += 1
                if i + 1 < len(blocks) and blk[1] > blocks[i + 1][0]:
                    grew = True
                    break
                if i and blk[0] < blocks[i - 1][1]:
                    grew = True
                    break
            if grew:
                break
        if not grew:
            return blocks


def _apply(base: list[str], target: list[str], blk: list) -> list[str]:
    """The new text of a block: its base lines with its regions applied."""
    s, e, regs = blk
    return splice(base[s:e], [(a1 - s, a2 - s, target[b1:b2]) for a1, a2, b1, b2 in regs])


def fence(*texts: list[str] | None) -> str:
    """The fence a careful model writes around these lines (as the prompts ask): longer than
    any run of backticks a line of them starts with, so no inner fence closes the block."""
    runs = [len(t) - len(t.lstrip("`")) for lines in texts for t in lines or ()]
    return "`" * max(3, max(runs, default=0) + 1) if any(r >= 3 for r in runs) else "```"


def whole(path: str, base: list[str] | None, target: list[str]) -> str:
    body = "".join(line + "\n" for line in target)
    f = fence(target)
    return f"Here is the new file.\n\n{path}\n{f}\n{body}{f}\n\nThat is all.\n"


def search_replace(path: str, base: list[str] | None, target: list[str]) -> str:
    if not base:
        body = "".join(line + "\n" for line in target)
        f = fence(target)
        return f"Creating it.\n\n{path}\n{f}\n<<<<<<< SEARCH\n=======\n{body}>>>>>>> REPLACE\n{f}\n"

    def unique(blocks: list[list], i: int) -> bool:
        s, e, _ = blocks[i]
        return e > s and len(_hits(base, base[s:e])) == 1

    out = ["I'll make these changes.\n\n"]
    for blk in _blocks(base, target, 0, unique):
        old = "".join(t + "\n" for t in base[blk[0] : blk[1]])
        new = "".join(t + "\n" for t in _apply(base, target, blk))
        f = fence(base[blk[0] : blk[1]], _apply(base, target, blk))
        out.append(f"{path}\n{f}\n<<<<<<< SEARCH\n{old}=======\n{new}>>>>>>> REPLACE\n{f}\n\n")
    out.append("Done.\n")
    return "".join(out)


def apply_patch(path: str, base: list[str] | None, target: list[str]) -> str:
    if base is None:
        body = "".join(f"+{t}\n" for t in target)
        return f"Adding it.\n*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch\n"

    def first_after_previous(blocks: list[list], i: int) -> bool:
        # chunks are sought in order, each from the end of the previous one
        s, e, _ = blocks[i]
        if e == s:
            return not base  # no context at all only works for an empty file
        hits = _hits(base, base[s:e], blocks[i - 1][1] if i else 0)
        return bool(hits) and hits[0] == s

    out = ["Patching.\n*** Begin Patch\n", f"*** Update File: {path}\n"]
    for s, e, regs in _blocks(base, target, 3, first_after_previous):
        out.append("@@\n")
        pos = s
        for a1, a2, b1, b2 in sorted(regs):
            out += [f" {t}\n" for t in base[pos:a1]]
            out += [f"-{t}\n" for t in base[a1:a2]]
            out += [f"+{t}\n" for t in target[b1:b2]]
            pos = a2
        out += [f" {t}\n" for t in base[pos:e]]
    out.append("*** End Patch\n")
    return "".join(out)


RENDERERS = {"whole": whole, "search_replace": search_replace, "apply_patch": apply_patch}
