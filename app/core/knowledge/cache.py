"""The map's disk cache: every file's tags keyed by the hash of its content, so a second run
starts with the full map and re-reads only what changed since.

It lives in the user's state dir beside the saved sessions (`$XDG_STATE_HOME/steer/repomap/
<repo>-<hash>/`), never in the working tree. A file is trusted as unchanged when its stat
(mtime, size, inode) is the one recorded; otherwise it is read and hashed, and a content hash
the cache holds (a checkout that only touched it) is not parsed again. Like git's index, a
file modified within two seconds of the save is recorded without its stat, so a change in
the same clock tick cannot hide behind an equal mtime.

Format: a magic line, a blake2b digest of the rest, then frames of `marshal` data (the
fastest way to load a few hundred thousand tuples in Python; marshal is not meant for
untrusted input, hence the digest, and the file is the user's own). Frames keep each
`marshal.dumps` call short, so a save in a background thread never holds the GIL long.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import struct
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.core.knowledge.index import Entry
from app.core.knowledge.tags import TAGS_VERSION, Tags

MAGIC = b"steer-repomap %d\n" % TAGS_VERSION
FRAME = 4096  # entries per frame
RACY = 2.0  # seconds: a file this fresh at save time is recorded without its stat


def cache_dir(root: Path) -> Path:
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    key = hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:16]
    return base / "steer" / "repomap" / f"{Path(root).name}-{key}"


@dataclass
class Cached:
    """What a previous run knew: path -> (key, stat), key -> tags, and its global rank."""

    stats: dict[str, tuple[str, tuple[int, int, int]]] = field(default_factory=dict)
    tags: dict[str, Tags | None] = field(default_factory=dict)
    rank: dict[str, float] = field(default_factory=dict)
    # path -> key of a file recorded without its stat (fresh at save): it is read again, and
    # most likely hashes to that key, whose tags then serve without a parse
    unsure: dict[str, str] = field(default_factory=dict)


class TagCache:
    def __init__(self, directory: Path) -> None:
        self.path = directory / "tags.bin"

    def load(self) -> Cached:
        """The saved cache, or an empty one when there is none or it is damaged."""
        try:
            raw = self.path.read_bytes()
        except OSError:
            return Cached()
        head = len(MAGIC) + 32
        if not raw.startswith(MAGIC) or len(raw) < head:
            return Cached()
        body = memoryview(raw)[head:]
        if hashlib.blake2b(body, digest_size=32).digest() != raw[len(MAGIC):head]:
            return Cached()
        out = Cached()
        try:
            frames = list(_frames(body))
            out.rank = dict(marshal.loads(frames[0]))
            for frame in frames[1:]:
                for path, key, st, tags in marshal.loads(frame):
                    if st is not None:
                        out.stats[path] = (key, tuple(st))
                    else:
                        out.unsure[path] = key
                    out.tags[key] = tags
        except (ValueError, EOFError, TypeError, IndexError, struct.error):
            return Cached()
        return out

    def save(self, entries: Mapping[str, Entry], rank: Mapping[str, float]) -> None:
        """Write the cache atomically (temp file, rename); a failure leaves the old one."""
        now = time.time_ns()
        racy = int(RACY * 1e9)
        rows = []
        for path in sorted(entries):
            key, st, tags = entries[path]
            if key is None:
                continue
            fresh = st[0] >= now - racy
            rows.append((path, key, None if fresh else tuple(st), tags))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tags.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC + bytes(32))  # the digest goes here once the frames are written
                h = hashlib.blake2b(digest_size=32)
                frames: list[list[Any]] = [sorted(rank.items())]
                frames.extend(rows[i:i + FRAME] for i in range(0, len(rows), FRAME))
                for frame in frames:  # one at a time: the file is never held whole in memory
                    data = marshal.dumps(frame)
                    head = struct.pack("<I", len(data))
                    h.update(head)
                    h.update(data)
                    f.write(head)
                    f.write(data)
                f.seek(len(MAGIC))
                f.write(h.digest())
            os.replace(tmp, self.path)
        except BaseException:  # Ctrl+C too: no half-written cache file is left
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


def _frames(body: memoryview) -> Iterator[bytes]:
    pos = 0
    while pos < len(body):
        (size,) = struct.unpack_from("<I", body, pos)
        pos += 4
        if pos + size > len(body):
            raise ValueError("torn frame")
        yield bytes(body[pos:pos + size])
        pos += size
