"""The saved sessions of one repository (the user's state dir, never the working tree): ids,
summaries for `steer sessions`, forks, and the resolvers a replay reads its bases through."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import stat
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path

from pydantic import BaseModel

from app.core.disk.snapshot import Snapshot
from app.core.disk.state_home import ensure, state_home, why_unusable
from app.core.storage.log import SessionLog, read_log
from app.core.storage.records import (
    Base,
    Info,
    Meta,
    Record,
    Rewind,
    SessionError,
    Snap,
    TurnRec,
    fold,
)
from app.core.text.textfile import NotText


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
                why = why_unusable(self.dir)  # none can be there: say why
                raise SessionError(f"no session to resume for {self.root}" + (
                    f" (sessions cannot be kept in {self.dir}: {why})" if why else ""))
            return last
        ids = self.ids()
        if sid in ids:
            return sid
        hits = [i for i in ids if i.startswith(sid) or i.endswith(sid)]
        if len(hits) == 1:
            return hits[0]
        raise SessionError(f"no session {sid!r} for {self.root}" if not hits else
                           f"{sid!r} matches several sessions: {', '.join(hits)}")

    def writable(self) -> Path:
        """The directory, once it is known to lie outside the working tree by its real path
        (a symlink, or $XDG_STATE_HOME, pointing into the tree would put session files, the
        conversation and every base, among the user's files), made if need be. Raises
        SessionError for a directory in the tree (refused), StateUnusable (an OSError) for
        one that cannot be made or written."""
        real, tree = self.dir.resolve(), self.root.resolve()
        if real == tree or tree in real.parents:
            raise SessionError(
                f"the session directory {self.dir} is inside the working tree ({real}); steer "
                "writes no session files there. Point $XDG_STATE_HOME elsewhere, or run "
                "without saving (--no-save)")
        return ensure(self.dir, "sessions")

    def create(self, meta: Meta) -> SessionLog:
        """A new session's log (StateUnusable: sessions cannot be saved here; the caller
        says so and goes on without)."""
        self.writable()
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
        (waiting up to `wait` seconds for another process to let it go). A log saved for
        another repository (copied in) is refused: its bases and decisions are not this
        tree's."""
        self.writable()
        log = SessionLog(self.log_path(sid), fresh=False, wait=wait)
        try:
            records = fold(self.load(sid))
            self._check_root(sid, records)
        except BaseException:  # Ctrl+C too: the log is closed, so its lock is released
            log.close()
            raise
        return records, log

    def _check_root(self, sid: str, records: list[Record]) -> None:
        meta = next((r for r in records if type(r) is Meta), None)
        if meta is None:
            raise SessionError(f"session {sid} has no header; it cannot be resumed")
        if Path(meta.root).resolve() != self.root.resolve():
            raise SessionError(f"session {sid} was saved for {meta.root}, not for {self.root}; "
                               "steer resumes a session only in its own repository")

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
        self.writable()
        records = fold(self.load(sid))
        self._check_root(sid, records)
        meta = next((r for r in records if type(r) is Meta), None)
        assert meta is not None  # (checked)
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
    key = hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:16]
    return state_home() / "sessions" / f"{Path(root).name}-{key}"


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
