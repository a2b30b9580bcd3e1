"""PageRank, written here: the whole power iteration and a personalised push are some 50 lines,
and the libraries that have them (networkx, scipy) would add ~40 MB and a graph copy of the
repository for one function each. The power iteration does its arithmetic with numpy (already
installed with llama-cpp-python); the push is plain Python, since it only touches the
neighbourhood of a request. Both are deterministic: nodes and edges are visited in the order
given, so one graph gives one vector, byte for byte, on a given machine.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Sequence
from itertools import repeat
from typing import TypeVar

SMALL_GRAPH = 5_000  # edges: at most this many, the rank is computed without numpy (~0.1 s)

N = TypeVar("N", bound=Hashable)

DAMPING = 0.85


def pagerank(rows: Sequence[Sequence[tuple[int, float]]], *, damping: float = DAMPING,
             iterations: int = 100, tol: float = 1e-7) -> list[float]:
    """The stationary vector of a random walk over `rows` (node i's out-edges as (j, weight),
    weights summing to 1), jumping to a uniform node with probability 1 - damping and from
    nodes without out-edges. Sums to 1."""
    src: list[int] = []
    dst: list[int] = []
    weight: list[float] = []
    for i, row in enumerate(rows):
        if row:
            targets, ws = zip(*row, strict=True)
            src.extend(repeat(i, len(row)))
            dst.extend(targets)
            weight.extend(ws)
    return pagerank_edges(len(rows), src, dst, weight, damping=damping, iterations=iterations,
                          tol=tol)


def pagerank_edges(n: int, src: Sequence[int], dst: Sequence[int], weight: Sequence[float], *,
                   damping: float = DAMPING, iterations: int = 100, tol: float = 1e-7) -> list[float]:
    """`pagerank` over edges given as three parallel lists (each node's out-weights summing
    to 1). The edges go to numpy arrays once; a step is then a gather and a bincount: ~10 ms
    for a million edges, against ~200 ms in Python. A small graph is ranked in Python: numpy's
    import alone (~0.2 s, holding the GIL) would cost a launch more than the whole rank."""
    if n == 0:
        return []
    if len(src) <= SMALL_GRAPH:
        return _pagerank_python(n, src, dst, weight, damping, iterations, tol)
    import numpy as np

    s = np.asarray(src, dtype=np.int64)
    d = np.asarray(dst, dtype=np.int64)
    w = np.asarray(weight, dtype=np.float64) * damping
    dangling = np.bincount(s, minlength=n) == 0
    rank = np.full(n, 1.0 / n)
    for _ in range(iterations):
        jump = (1.0 - damping + damping * float(rank[dangling].sum())) / n
        new = np.bincount(d, weights=rank[s] * w, minlength=n).astype(np.float64) + jump
        delta = float(np.abs(new - rank).sum())
        rank = new
        if delta < tol:
            break
    return [float(x) for x in rank]


def _pagerank_python(n: int, src: Sequence[int], dst: Sequence[int], weight: Sequence[float],
                     damping: float, iterations: int, tol: float) -> list[float]:
    """The same iteration as numpy's below, step for step."""
    has_out = [False] * n
    for u in src:
        has_out[u] = True
    dangling = [i for i in range(n) if not has_out[i]]
    w = [x * damping for x in weight]
    rank = [1.0 / n] * n
    for _ in range(iterations):
        jump = (1.0 - damping + damping * sum(rank[i] for i in dangling)) / n
        new = [jump] * n
        for u, v, x in zip(src, dst, w, strict=True):
            new[v] += rank[u] * x
        delta = sum(abs(a - b) for a, b in zip(new, rank, strict=True))
        rank = new
        if delta < tol:
            break
    return rank


def push(seeds: dict[N, float], out: Callable[[N], Sequence[tuple[N, float]]], *,
         damping: float = DAMPING, eps: float = 1e-3, max_pushes: int = 1000) -> dict[N, float]:
    """Personalised PageRank from `seeds` (weights summing to 1), by forward push (Andersen,
    Chung, Lang 2006): local, so its cost depends on `eps` and the seeds' neighbourhood, not on
    the size of the graph; `max_pushes` bounds it outright. `out(u)` gives u's out-edges with
    weights summing to 1. The mass a dangling node holds stays with it."""
    alpha = 1.0 - damping
    estimate: dict[N, float] = {}
    residual: dict[N, float] = dict(seeds)
    queue = deque(seeds)
    queued = set(seeds)
    pushes = 0
    while queue and pushes < max_pushes:
        u = queue.popleft()
        queued.discard(u)
        mass = residual.get(u, 0.0)
        if mass <= eps:
            continue
        pushes += 1
        residual[u] = 0.0
        row = out(u)
        if not row:
            estimate[u] = estimate.get(u, 0.0) + mass
            continue
        estimate[u] = estimate.get(u, 0.0) + alpha * mass
        spread = damping * mass
        for v, w in row:
            got = residual.get(v, 0.0) + spread * w
            residual[v] = got
            if got > eps and v not in queued:
                queued.add(v)
                queue.append(v)
    for u, mass in residual.items():  # what was left unpushed, where it lies
        if mass > 0.0:
            estimate[u] = estimate.get(u, 0.0) + alpha * mass
    return estimate
