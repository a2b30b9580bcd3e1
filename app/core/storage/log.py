"""Session logs that survive anything: every turn, streamed text, base snapshot and decision is
appended to a log, and a session is restored by replaying that log through the same parser,
pending diff and review code that built it (deterministic), then rebased onto the disk.

Why a log of events rather than a saved state: appending is cheap enough to do while an
answer streams at thousands of tokens per second, a kill -9 can only tear the last line
(which is detected and dropped), and a replay rebuilds hunk ids, states and notes exactly
because it runs the code that made them. What the code reads from outside is recorded: the
request sent, each base snapshot, each disk read a live rebase moved a file onto, the
outcome of each accept (the disk itself is the journal's business, app/core/disk/journal.py).

Where: the user's state dir, one folder per repository (never the tracked tree), one
`<id>.jsonl` per session plus a small `<id>.json` summary for `steer sessions`. The log is
append-only; a background thread writes and fsyncs it at turn boundaries, at each decision,
and at least once a second while text streams, so saving never blocks the event loop. A
session is owned by one process at a time (flock). Keys are never stored: the writer
redacts every API-key-looking string and every key value steer knows (app/core/text/masking.py).
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import stat
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ValidationError

from app.core.disk.journal import fsync_dir
from app.core.storage.records import RECORD, Info, Reasoning, Record, SessionError, Text
from app.core.text import masking

FLUSH_EVERY = 1.0  # seconds: streamed text reaches the disk at least this often


# -- keys never reach a session file ---------------------------------------------------------
_KEY_SHAPES = re.compile(
    r"(?:sk|gsk|xai|csk|sk-ant|sk-proj|pk)[-_][A-Za-z0-9_\-]{16,}"  # OpenAI, Groq, xAI, Cerebras...
    r"|(?:ghp|gho|ghs|github_pat)_[A-Za-z0-9_]{20,}"
    r"|AKIA[0-9A-Z]{16}"
    r"|(?i:bearer)\s+[A-Za-z0-9._\-]{16,}")
REDACTED = "[redacted]"


def redact(text: str, secrets_: Iterable[str] = ()) -> str:
    for s in secrets_:
        if s in text:
            text = text.replace(s, REDACTED)
    return _KEY_SHAPES.sub(REDACTED, text)


def dump(rec: BaseModel) -> str:
    return json.dumps(rec.model_dump(mode="python"), ensure_ascii=False, separators=(",", ":"))


# -- reading -------------------------------------------------------------------------------------
def read_log(path: Path) -> tuple[list[Record], int]:
    """The records of a log, and the byte length of its valid prefix. A last line torn by a
    crash (no newline, bad JSON, zeros) is dropped; so is any line that does not validate."""
    fd = _open_log(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        raw = b"".join(chunks)
    finally:
        os.close(fd)
    out: list[Record] = []
    good = 0
    pos = 0
    while pos < len(raw):
        end = raw.find(b"\n", pos)
        if end < 0:  # torn: the rest never got its newline
            break
        line = raw[pos:end]
        pos = end + 1
        try:
            out.append(RECORD.validate_python(json.loads(line.decode("utf-8", "surrogatepass"))))
        except (ValueError, ValidationError, UnicodeDecodeError):
            continue  # a torn or damaged line: dropped, the rest still counts
        good = pos
    return out, good


def _open_log(path: Path, flags: int, mode: int = 0o600) -> int:
    """Open a session log that is a regular file: never follow a symlink, never block on a
    FIFO put in its place."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except FileNotFoundError:
        raise SessionError(f"no session log at {path}") from None
    except FileExistsError:
        raise
    except OSError as exc:
        raise SessionError(f"{path} cannot be a session log: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SessionError(f"{path} is not a regular file; it is not a session log")
    os.set_blocking(fd, True)
    return fd


# -- writing -------------------------------------------------------------------------------------
class SessionLog:
    """One session's log file, owned by this process, and the thread that writes it."""

    def __init__(self, path: Path, *, fresh: bool, wait: float = 0.0) -> None:
        self.path = path
        self.info_path = path.with_suffix(".json")
        path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | (os.O_EXCL if fresh else 0)
        try:
            self._fd = _open_log(path, flags)
        except FileExistsError:
            raise SessionError(f"session {path.stem} exists already") from None
        deadline = time.monotonic() + wait  # a reloaded browser tab: the old process is ending
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(0.1)
                    continue
                os.close(self._fd)
                raise SessionError(f"session {path.stem} is open in another steer process") \
                    from None
        if not fresh:
            _, good = read_log(path)
            if good < os.fstat(self._fd).st_size:  # drop a torn tail before appending
                os.ftruncate(self._fd, good)
        else:
            fsync_dir(path.parent)
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[BaseModel] = []
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._urgent = False
        self._closed = False
        self._asked = self._done = 0  # flush requests made / written
        self._dead = False
        self._info: Info | None = None
        self._info_written: Info | None = None
        self.bytes_written = 0
        self.fsyncs = 0
        self.error: str | None = None  # the last write failure (the disk is full...)
        self._thread = threading.Thread(target=self._run, name="steer-session-log", daemon=True)
        self._thread.start()

    @property
    def id(self) -> str:
        return self.path.stem

    # -- the loop's side: never blocks on I/O ------------------------------------------------
    def text(self, s: str) -> None:
        with self._cond:
            if not self._text and not self._reasoning:
                self._cond.notify()
            self._text.append(s)

    def reasoning(self, s: str) -> None:
        with self._cond:
            if not self._text and not self._reasoning:
                self._cond.notify()
            self._reasoning.append(s)

    def append(self, rec: BaseModel, *, urgent: bool = True) -> None:
        """Queue a record after the text streamed so far; `urgent` writes it (and fsyncs) now."""
        with self._cond:
            self._seal()
            self._queue.append(rec)
            if urgent:
                self._urgent = True
            self._cond.notify()

    def summary(self, info: Info) -> None:
        with self._cond:
            self._info = info

    def flush(self, timeout: float = 10.0) -> bool:
        """Write and fsync everything queued so far, and wait for it (a rewind that reads
        the log back, a fork, the end of `steer run`). False if it timed out."""
        with self._cond:
            self._asked += 1
            mine = self._asked
            self._urgent = True
            self._cond.notify_all()
            return self._cond.wait_for(lambda: self._done >= mine or self._dead, timeout)

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify()
        self._thread.join(30)
        with contextlib.suppress(OSError):
            os.close(self._fd)

    # -- the writer thread ------------------------------------------------------------------
    def _seal(self) -> None:
        if self._text:
            self._queue.append(Text(s="".join(self._text)))
            self._text = []
        if self._reasoning:
            self._queue.append(Reasoning(s="".join(self._reasoning)))
            self._reasoning = []

    def _run(self) -> None:
        try:
            while self._cycle():
                pass
        finally:
            with self._cond:
                self._dead = True
                self._cond.notify_all()

    def _cycle(self) -> bool:
        with self._cond:
            self._cond.wait_for(lambda: self._urgent or self._closed or self._queue
                                or self._text or self._reasoning)
            if not (self._urgent or self._closed):  # text only: gather it up to a second
                self._cond.wait_for(lambda: self._urgent or self._closed, FLUSH_EVERY)
            self._seal()
            items, self._queue = self._queue, []
            closed, info, asked = self._closed, self._info, self._asked
            self._urgent = False
        self._write(items)
        if info is not None and info is not self._info_written:
            self._write_info(info)
        with self._cond:
            self._done = asked
            self._cond.notify_all()
        return not closed

    def _write(self, items: list[BaseModel]) -> None:
        if not items:
            return
        text = "".join(redact(dump(r), masking.known()) + "\n" for r in items)
        data = text.encode("utf-8", "surrogatepass")
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
            os.fsync(self._fd)
        except OSError as exc:  # a full disk: the session goes on in memory, saying so
            self.error = f"the session could not be saved: {exc.strerror or exc}"
            return
        self.bytes_written += len(data)
        self.fsyncs += 1

    def _write_info(self, info: Info) -> None:
        tmp = self.info_path.with_name(f".{self.info_path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(redact(info.model_dump_json(), masking.known()))
            os.replace(tmp, self.info_path)
            self._info_written = info
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()
