"""Deterministic recorded answers for benchmarks and tests: a large Python-like file and a
search/replace answer that edits it, sized in tokens."""

from __future__ import annotations

import random

from app.server.generation import split_tokens


def big_file(lines: int, seed: int = 7) -> list[str]:
    rnd = random.Random(seed)
    out: list[str] = []
    n = 0
    while len(out) < lines:
        n += 1
        args = ", ".join(f"arg{k}" for k in range(rnd.randint(0, 3)))
        out.append(f"def function_{n}({args}):")
        out.append(f'    """Compute value number {n} from its inputs."""')
        for k in range(rnd.randint(2, 8)):
            out.append(f"    value_{k} = compute_{rnd.randint(0, 999)}(value_{max(0, k - 1)}, {rnd.randint(0, 99)})")
        out.append(f"    return value_{rnd.randint(0, 1)}")
        out.append("")
        out.append("")
    return out[:lines]


def search_replace_answer(path: str, lines: list[str], target_tokens: int, seed: int = 11,
                          max_edits: int | None = None) -> tuple[str, int]:
    """An answer of about `target_tokens` tokens: prose and SEARCH/REPLACE blocks spread over
    the file, each changing a few lines of one function. Returns (text, number of edits)."""
    rnd = random.Random(seed)
    starts = [i for i, line in enumerate(lines) if line.startswith("def ")]
    rnd.shuffle(starts)
    parts = ["I'll make the requested changes across the file.\n\n"]
    tokens = len(split_tokens(parts[0]))
    used = 0
    for s in sorted(starts):
        if tokens >= target_tokens or (max_edits is not None and used >= max_edits):
            break
        body = lines[s : s + 4]
        if len(body) < 4 or any(not b for b in body):
            continue
        new = [body[0], body[1].replace("Compute", "Calculate"),
               body[2] + "  # checked", "    assert value_0 is not None", body[3]]
        block = (f"Update function at line {s + 1}.\n\n{path}\n```python\n<<<<<<< SEARCH\n"
                 + "\n".join(body) + "\n=======\n" + "\n".join(new) + "\n>>>>>>> REPLACE\n```\n\n")
        parts.append(block)
        tokens += len(split_tokens(block))
        used += 1
    parts.append("These changes make each function easier to check.\n")
    return "".join(parts), used
