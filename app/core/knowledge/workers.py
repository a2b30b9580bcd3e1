"""The cold build's parsing, spread over worker processes.

py-tree-sitter holds the GIL while it parses, so threads would not add a core, and a long
parse in the app's own process would stall the UI's thread. Each worker is a plain
`python -m app.core.knowledge.workers ROOT` child (not multiprocessing: that re-imports the
parent's main script in every child, which for `steer` means the whole CLI), at a lower CPU
priority, talking over its stdin/stdout in length-prefixed marshal frames:

    parent -> child: the content keys the cache holds (once), then lists of paths
    child -> parent: for each list, its `Parsed` tuples (tags.read_and_extract)

A child exits when its stdin closes, so a parent that dies (even by kill -9) leaves none
behind. `parse` feeds every worker from one queue of chunks, from a thread per worker that
blocks on the pipe (the GIL is free meanwhile).
"""

from __future__ import annotations

import contextlib
import marshal
import os
import struct
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import IO, Any

from app.core.knowledge.tags import Parsed, read_and_extract


def _send(stream: IO[bytes], obj: Any) -> None:
    data = marshal.dumps(obj)
    stream.write(struct.pack("<I", len(data)) + data)
    stream.flush()


def _recv(stream: IO[bytes]) -> object:
    head = stream.read(4)
    if len(head) < 4:
        raise EOFError("worker closed its pipe")
    (size,) = struct.unpack("<I", head)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("worker closed its pipe")
    return marshal.loads(data)


def parse(root: str, chunks: Iterable[list[str]], known: frozenset[str], workers: int,
          progress: Callable[[int], None], stop: threading.Event, nice: int = 10) -> list[Parsed]:
    """Every chunk read and tagged by `workers` child processes. A chunk a worker could not
    finish (it died, or could not start) is parsed here instead, so the result is always
    complete unless `stop` is set."""
    todo = deque(chunks)
    out: list[Parsed] = []
    lock = threading.Lock()
    failed: list[list[str]] = []

    def feed() -> None:
        try:
            child = subprocess.Popen(
                [sys.executable, "-m", "app.core.knowledge.workers", root, str(nice)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                close_fds=True)
        except OSError:
            return
        assert child.stdin is not None and child.stdout is not None
        chunk: list[str] | None = None
        try:
            _send(child.stdin, sorted(known))
            while not stop.is_set():
                with lock:
                    if not todo:
                        break
                    chunk = todo.popleft()
                _send(child.stdin, chunk)
                got = _recv(child.stdout)
                assert isinstance(got, list)
                with lock:
                    out.extend(got)
                progress(len(chunk))
                chunk = None
        except (OSError, EOFError, ValueError, AssertionError):
            if chunk is not None:
                with lock:
                    failed.append(chunk)
        finally:
            with contextlib.suppress(OSError):
                child.stdin.close()
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            child.stdout.close()

    threads = [threading.Thread(target=feed, name=f"steer-repomap-feed-{i}", daemon=True)
               for i in range(max(1, workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for chunk in [*failed, *todo]:  # what no worker took or finished
        if stop.is_set():
            break
        out.extend(read_and_extract(root, chunk, known))
        progress(len(chunk))
    return out


def main(argv: list[str]) -> int:
    root = argv[0]
    with contextlib.suppress(OSError, IndexError, ValueError):
        os.nice(int(argv[1]))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    try:
        keys = _recv(stdin)
        assert isinstance(keys, list)
        known = frozenset(str(k) for k in keys)
        while True:
            rels = _recv(stdin)
            assert isinstance(rels, list)
            _send(stdout, read_and_extract(root, rels, known))
    except (EOFError, BrokenPipeError):
        return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
