"""Sessions that survive anything: every turn, streamed text, base snapshot and decision is
appended to a log, and a session is restored by replaying that log through the same parser,
pending diff and review code that built it (deterministic), then rebased onto the disk.

Why a log of events rather than a saved state: appending is cheap enough to do while an
answer streams at thousands of tokens per second, a kill -9 can only tear the last line
(which is detected and dropped), and a replay rebuilds hunk ids, states and notes exactly
because it runs the code that made them. What the code reads from outside is recorded: the
request sent, each base snapshot, each disk read a live rebase moved a file onto, the
outcome of each accept (the disk itself is the journal's business, app/core/journal.py).

Where: the user's state dir, one folder per repository (never the tracked tree), one
`<id>.jsonl` per session plus a small `<id>.json` summary for `steer sessions`. The log is
append-only; a background thread writes and fsyncs it at turn boundaries, at each decision,
and at least once a second while text streams, so saving never blocks the event loop. A
session is owned by one process at a time (flock). Keys are never stored: the writer
redacts every API-key-looking string and every key the environment holds.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
import stat
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from app.core.journal import fsync_dir
from app.core.snapshot import Snapshot
from app.core.textfile import NotText, TextFormat

FLUSH_EVERY = 1.0  # seconds: streamed text reaches the disk at least this often
SCHEMA = 1


class SessionError(RuntimeError):
    """A session cannot be opened: unknown id, owned by another process, unreadable."""


# -- records ------------------------------------------------------------------------------------
class Snap(BaseModel):
    """A file as a base: lines and format exactly as Workspace.snapshot read them."""

    path: str
    exists: bool
    lines: list[str] = []
    encoding: str = "utf-8"
    bom: str = ""  # hex
    newline: str = "\n"
    final_newline: bool = True
    eols: list[str] | None = None
    digest: str | None = None
    mode: int | None = None

    @classmethod
    def of(cls, s: Snapshot) -> Snap:
        f = s.fmt
        return cls(path=s.path, exists=s.exists, lines=s.lines, encoding=f.encoding,
                   bom=f.bom.hex(), newline=f.newline, final_newline=f.final_newline,
                   eols=list(f.eols) if f.eols is not None else None, digest=s.digest,
                   mode=s.mode)

    def snapshot(self) -> Snapshot:
        fmt = TextFormat(self.encoding, bytes.fromhex(self.bom), self.newline, self.final_newline,
                         tuple(self.eols) if self.eols is not None else None)
        return Snapshot(self.path, self.exists, list(self.lines), fmt, self.digest, self.mode)


class Meta(BaseModel):
    t: Literal["meta"] = "meta"
    v: int = SCHEMA
    id: str
    created: float
    root: str
    branch: str | None = None
    provider: str = ""
    forked_from: str | None = None


class TurnRec(BaseModel):
    """A request: what was sent (the user message as the model saw it) and, for the first
    turn of a change set, the bases of the files in context."""

    t: Literal["turn"] = "turn"
    kind: Literal["ask", "redirect", "follow-up"]
    instruction: str
    content: str
    fmt: str
    agent: bool = False
    prefill: str = ""
    bases: list[Snap] | None = None  # set: this turn starts a new change set
    steered_at: int | None = None
    time: float = 0.0


class Text(BaseModel):
    t: Literal["text"] = "text"
    s: str


class Reasoning(BaseModel):
    t: Literal["reasoning"] = "reasoning"
    s: str


class Base(BaseModel):
    """A file's base read while the answer streamed (a file not in context)."""

    t: Literal["base"] = "base"
    path: str
    snap: Snap | None = None
    error: str | None = None  # the file could not be read as text: why


class AgentRec(BaseModel):
    t: Literal["agent"] = "agent"
    kind: Literal["edit", "write"]
    path: str
    old: str | None = None
    new: str


class End(BaseModel):
    t: Literal["end"] = "end"
    state: str
    finish_reason: str | None = None
    error: tuple[str, str] | None = None  # kind, message
    usage: tuple[int, int] | None = None
    deltas: int = 0
    server_tps: float | None = None
    ttft: float | None = None
    connect: float | None = None
    elapsed: float = 0.0
    plan: list[tuple[str, str, str]] = []
    tools: list[tuple[str, str, str | None, str | None]] = []
    retries: list[tuple[int, int, float, str]] = []  # attempt, attempts, delay, reason


class Rebase(BaseModel):
    """A live rebase moved a file onto the disk as it was read then (None: it was gone)."""

    t: Literal["rebase"] = "rebase"
    path: str
    snap: Snap | None = None
    reason: str = ""


class Reject(BaseModel):
    t: Literal["reject"] = "reject"
    ids: list[int]
    reason: str = ""
    mine: bool = False  # a conflict resolved by keeping the disk's version


class Accept(BaseModel):
    t: Literal["accept"] = "accept"
    entry: str | None = None  # the journal step that wrote them
    turn: int = 0  # the turn that was the latest when it was accepted (its checkpoint)
    hunks: list[tuple[int, list[str], str]] = []  # id, lines written, note
    conflicts: list[tuple[int, str]] = []  # id, why not written


class Undo(BaseModel):
    t: Literal["undo"] = "undo"
    written: list[str] | None = None  # files the undo reverted (None: all)


class Queue(BaseModel):
    t: Literal["queue"] = "queue"
    items: list[str]


class Context(BaseModel):
    t: Literal["context"] = "context"
    items: list[str]


class Rewind(BaseModel):
    """The conversation went back to before turn `turn` (0-based): what followed is gone."""

    t: Literal["rewind"] = "rewind"
    turn: int


class Files(BaseModel):
    """Files rewound to before a turn (journal undo steps), or such a rewind redone."""

    t: Literal["files"] = "files"
    op: Literal["rewind", "redo"]
    turn: int
    steps: list[str]  # journal entry ids of the steps performed
    redone: list[str] = []  # redo: the rewind steps it took back


Record = Annotated[Meta | TurnRec | Text | Reasoning | Base | AgentRec | End | Rebase | Reject
                   | Accept | Undo | Queue | Context | Rewind | Files, Field(discriminator="t")]
_RECORD: TypeAdapter[Record] = TypeAdapter(Record)


class Info(BaseModel):
    """The summary `steer sessions` lists (a sidecar of the log, rewritten as it changes)."""

    id: str
    root: str
    branch: str | None = None
    created: float
    updated: float
    first: str = ""
    turns: int = 0
    open: int = 0
    forked_from: str | None = None


# -- keys never reach a session file ---------------------------------------------------------
_KEY_SHAPES = re.compile(
    r"(?:sk|gsk|xai|csk|sk-ant|sk-proj|pk)[-_][A-Za-z0-9_\-]{16,}"  # OpenAI, Groq, xAI, Cerebras...
    r"|(?:ghp|gho|ghs|github_pat)_[A-Za-z0-9_]{20,}"
    r"|AKIA[0-9A-Z]{16}"
    r"|(?i:bearer)\s+[A-Za-z0-9._\-]{16,}")
_SECRET_VARS = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.I)
REDACTED = "[redacted]"


def env_secrets(environ: dict[str, str] | None = None) -> list[str]:
    env = os.environ if environ is None else environ
    return sorted({v for k, v in env.items() if _SECRET_VARS.search(k) and len(v) >= 8},
                  key=len, reverse=True)


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
            out.append(_RECORD.validate_python(json.loads(line.decode("utf-8", "surrogatepass"))))
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


def fold(records: list[Record]) -> list[Record]:
    """The session as it stands: each Rewind cuts the records back to before its turn. What
    happened to files (Files) is kept: it is about the disk, not the conversation."""
    out: list[Record] = []
    turns: list[int] = []  # index in `out` of each turn record
    for r in records:
        if type(r) is Rewind:
            if 0 <= r.turn < len(turns):
                kept = [x for x in out[turns[r.turn]:] if type(x) is Files]
                del out[turns[r.turn]:]
                del turns[r.turn:]
                out += kept
            continue
        if type(r) is TurnRec:
            turns.append(len(out))
        out.append(r)
    return out


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
        self._secrets = env_secrets()
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
        text = "".join(redact(dump(r), self._secrets) + "\n" for r in items)
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
            tmp.write_text(redact(info.model_dump_json(), self._secrets))
            os.replace(tmp, self.info_path)
            self._info_written = info
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()


# -- the store ------------------------------------------------------------------------------------
def new_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


class SessionStore:
    """The sessions of one repository, in the user's state dir."""

    def __init__(self, root: Path, directory: Path | None = None) -> None:
        self.root = Path(root)
        self.dir = directory or store_dir(self.root)

    def log_path(self, sid: str) -> Path:
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,80}", sid) or sid.startswith("."):
            raise SessionError(f"not a session id: {sid!r}")
        return self.dir / f"{sid}.jsonl"

    def ids(self) -> list[str]:
        try:
            return sorted((p.stem for p in self.dir.glob("*.jsonl")),
                          key=lambda s: self._mtime(s))
        except FileNotFoundError:
            return []

    def _mtime(self, sid: str) -> float:
        try:
            return self.log_path(sid).stat().st_mtime
        except OSError:
            return 0.0

    def last(self) -> str | None:
        ids = self.ids()
        return ids[-1] if ids else None

    def resolve(self, sid: str | None) -> str:
        """An id as the user typed it (a unique prefix will do), or the last session."""
        if sid is None:
            last = self.last()
            if last is None:
                raise SessionError(f"no session to resume for {self.root}")
            return last
        ids = self.ids()
        if sid in ids:
            return sid
        hits = [i for i in ids if i.startswith(sid) or i.endswith(sid)]
        if len(hits) == 1:
            return hits[0]
        raise SessionError(f"no session {sid!r} for {self.root}" if not hits else
                           f"{sid!r} matches several sessions: {', '.join(hits)}")

    def create(self, meta: Meta) -> SessionLog:
        log = SessionLog(self.log_path(meta.id), fresh=True)
        log.append(meta)
        log.summary(Info(id=meta.id, root=meta.root, branch=meta.branch, created=meta.created,
                         updated=meta.created, forked_from=meta.forked_from))
        return log

    def load(self, sid: str) -> list[Record]:
        records, _ = read_log(self.log_path(sid))
        return records

    def open(self, sid: str, wait: float = 0.0) -> tuple[list[Record], SessionLog]:
        """Take a session over: its records (folded) and its log, owned by this process
        (waiting up to `wait` seconds for another process to let it go)."""
        log = SessionLog(self.log_path(sid), fresh=False, wait=wait)
        try:
            records = fold(self.load(sid))
        except BaseException:
            log.close()
            raise
        return records, log

    def info(self, sid: str) -> Info:
        side = self.log_path(sid).with_suffix(".json")
        try:
            if not stat.S_ISREG(os.lstat(side).st_mode):  # a FIFO would block the listing
                raise OSError(f"{side} is not a regular file")
            return Info.model_validate_json(side.read_text())
        except (OSError, ValueError):
            return summarize(sid, fold(self.load(sid)), self._mtime(sid))

    def list(self) -> list[Info]:
        out = []
        for sid in self.ids():
            with contextlib.suppress(SessionError, OSError):
                out.append(self.info(sid))
        return out

    def fork(self, sid: str, at_turn: int | None = None) -> str:
        """A new session with this one's records (up to before turn `at_turn`)."""
        records = fold(self.load(sid))
        meta = next((r for r in records if type(r) is Meta), None)
        if meta is None:
            raise SessionError(f"session {sid} has no header; it cannot be forked")
        if at_turn is not None:
            records = fold([*records, Rewind(turn=at_turn)])
        fresh = meta.model_copy(update={"id": new_id(), "created": time.time(), "forked_from": sid})
        log = SessionLog(self.log_path(fresh.id), fresh=True)
        try:
            log.append(fresh, urgent=False)
            for r in records:
                if type(r) is not Meta:
                    log.append(r, urgent=False)
            log.summary(summarize(fresh.id, [fresh, *records[1:]], time.time(), fresh))
        finally:
            log.close()
        return fresh.id


def summarize(sid: str, records: list[Record], updated: float, meta: Meta | None = None) -> Info:
    """Info from the records alone (no replay: open hunks are counted from the last summary
    the log kept, else unknown as 0)."""
    meta = meta or next((r for r in records if type(r) is Meta), None)
    turns = [r for r in records if type(r) is TurnRec]
    return Info(id=sid, root=meta.root if meta else "", branch=meta.branch if meta else None,
                created=meta.created if meta else updated, updated=updated,
                first=turns[0].instruction if turns else "", turns=len(turns),
                forked_from=meta.forked_from if meta else None)


def store_dir(root: Path) -> Path:
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    key = hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:16]
    return base / "steer" / "sessions" / f"{Path(root).name}-{key}"


# -- replaying -----------------------------------------------------------------------------------
class ReplayResolver:
    """What the pending diff asks the workspace while a log is replayed: path checks go to
    the workspace, base snapshots come from the log in the order they were taken."""

    def __init__(self, ws, records: Iterable[Record]) -> None:
        self.ws = ws
        self.bases: dict[str, deque[Base]] = {}
        for r in records:
            if type(r) is Base:
                self.bases.setdefault(r.path, deque()).append(r)
        self._checked: dict[tuple[str, str, bool], str | Exception] = {}

    def _check(self, how: str, raw: str, delete: bool) -> str:
        """A path's check, once per replay (an answer names its files again and again)."""
        key = (how, raw, delete)
        got = self._checked.get(key)
        if got is None:
            try:
                got = self.ws.check_path(raw) if how == "path" else self.ws.check_edit(
                    raw, delete=delete)
            except (ValueError, OSError) as exc:
                got = exc
            self._checked[key] = got
        if isinstance(got, Exception):
            raise got
        return got

    def check_path(self, raw: str) -> str:
        return self._check("path", raw, False)

    def check_edit(self, raw: str, *, delete: bool = False) -> str:
        return self._check("edit", raw, delete)

    def snapshot(self, rel: str) -> Snapshot:
        queue = self.bases.get(rel)
        if not queue:  # the log never saw it (a replay that went its own way): the disk
            return self.ws.snapshot(rel)
        b = queue.popleft()
        if b.snap is None:
            raise NotText(b.error or f"{rel} could not be read")
        return b.snap.snapshot()


class RecordingResolver:
    """The workspace for a live pending diff: every base snapshot it takes is logged."""

    def __init__(self, ws, log: Callable[[BaseModel], None]) -> None:
        self.ws = ws
        self.log = log

    def check_path(self, raw: str) -> str:
        return self.ws.check_path(raw)

    def check_edit(self, raw: str, *, delete: bool = False) -> str:
        return self.ws.check_edit(raw, delete=delete)

    def snapshot(self, rel: str) -> Snapshot:
        try:
            snap = self.ws.snapshot(rel)
        except NotText as exc:
            self.log(Base(path=rel, error=str(exc)))
            raise
        self.log(Base(path=rel, snap=Snap.of(snap)))
        return snap

