"""The map's first build, the part that reads: which files the cache vouches for, what the
rest weigh, and parsing them, in worker processes or (a small tree, or a one-shot caller
whose parse is quick) in the builder's own thread. builder.py runs it and publishes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Collection

from app.core.knowledge import workers as worker_processes
from app.core.knowledge.cache import Cached
from app.core.knowledge.index import Entry
from app.core.knowledge.tags import MAX_PARSE_BYTES, Parsed, read_and_extract

CHUNK = 64  # files per task handed to a worker process (the progress moves per chunk)
CHUNK_BYTES = 256 << 10  # ... or fewer, when they are big
IN_THREAD = 256  # fewer files than this to parse: no worker processes
# What a parse in this thread costs, measured on the standard library with the other core
# busy (1.3-1.4 MB/s, ~0.15 ms a file however small), rounded down: `estimate` is the
# seconds a build's parse would take, to decide whether a one-shot caller waits for it.
PARSE_RATE = 1.0e6  # bytes a second
PER_FILE = 0.3e-3  # seconds
HASH_RATE = 100e6  # bytes a second read and hashed (a file whose cached tags serve)
PER_READ = 0.05e-3  # seconds
# A one-shot caller (`steer run`: no screen to keep free) parses in its own thread when that
# takes at most this long: worker processes cost about a second to start.
ONE_SHOT_IN_THREAD = 1.2


def sizes(root: str, todo: list[str]) -> list[tuple[int, str]]:
    """(bytes to parse, path) of each file (0 for one too big to be parsed)."""
    sized = []
    for rel in todo:
        try:
            size = os.stat(os.path.join(root, rel), follow_symlinks=False).st_size
        except OSError:
            size = 0
        sized.append((size if size <= MAX_PARSE_BYTES else 0, rel))  # too big: not parsed
    return sized


def estimate(sized: list[tuple[int, str]], hashed: Collection[str] = ()) -> float:
    """Seconds a parse of these files in one thread takes (PARSE_RATE, PER_FILE); those in
    `hashed` (their cached key is likely still theirs) cost a read and a hash instead."""
    parse = [n for n, rel in sized if rel not in hashed]
    hash_ = len(sized) - len(parse)
    return (sum(parse) / PARSE_RATE + len(parse) * PER_FILE
            + (sum(n for n, _ in sized) - sum(parse)) / HASH_RATE + hash_ * PER_READ)


def chunks(sized: list[tuple[int, str]]) -> list[list[str]]:
    """The files in tasks for the workers, the biggest first (so the last tasks are small
    and the workers finish together), each at most CHUNK files or CHUNK_BYTES."""
    sized = sorted(sized, key=lambda x: (-x[0], x[1]))
    chunks: list[list[str]] = []
    chunk: list[str] = []
    held = 0
    for size, rel in sized:
        chunk.append(rel)
        held += size
        if len(chunk) >= CHUNK or held >= CHUNK_BYTES:
            chunks.append(chunk)
            chunk, held = [], 0
    if chunk:
        chunks.append(chunk)
    return chunks


def reuse(root: str, paths: list[str], cached: Cached) -> tuple[dict[str, Entry], list[str]]:
    """Entries the cache vouches for (same stat as recorded), and the paths to read."""
    entries: dict[str, Entry] = {}
    todo = []
    for rel in paths:
        hit = cached.stats.get(rel)
        if hit is not None:
            try:
                st = os.stat(os.path.join(root, rel), follow_symlinks=False)
            except OSError:
                st = None
            if st is not None and (st.st_mtime_ns, st.st_size, st.st_ino) == hit[1] \
                    and hit[0] in cached.tags:
                entries[rel] = (hit[0], hit[1], cached.tags[hit[0]])
                continue
        todo.append(rel)
    return entries, todo


def parse(root: str, sized: list[tuple[int, str]], known: frozenset[str], *, workers: int,
          progress: Callable[[int], None], stop: threading.Event, nice: int) -> list[Parsed]:
    """The files' tags: in `workers` processes when there are many (IN_THREAD), else here
    (holding the GIL while each file parses)."""
    tasks = chunks(sized)
    if len(sized) >= IN_THREAD and workers >= 1:
        return worker_processes.parse(root, tasks, known, workers, progress, stop, nice)
    out: list[Parsed] = []
    for chunk in tasks:
        if stop.is_set():
            break
        out.extend(read_and_extract(root, chunk, known))
        progress(len(chunk))
    return out
