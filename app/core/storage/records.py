"""What a session log holds: one pydantic record per event (a turn, streamed text, a base,
a decision, a rewind...), and folding a log's records to the session as it stands.

Why a log of events rather than a saved state: see app/core/storage/log.py."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, TypeAdapter

from app.core.disk.snapshot import Snapshot
from app.core.events import ErrorKind
from app.core.text.textfile import TextFormat

SCHEMA = 1

# where an answer stands (app/core/conversation/turn.py); an End record keeps how it ended
TurnState = Literal["connecting", "streaming", "done", "interrupted", "error"]


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
    # a new change set: True when it goes on with the conversation so far (its message holds
    # only what is new), False when it starts the conversation afresh; None in logs written
    # before the conversation only grew (then it went on only after a cut-short answer)
    continues: bool | None = None
    full: str = ""  # why it was sent in full when the conversation could have gone on
    steered_at: int | None = None
    time: float = 0.0
    map: list[str] = []  # repository map items sent before `content` (app/core/knowledge)
    rules: list[str] = []  # the project's rules, sent before those when new or changed


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
    state: TurnState
    finish_reason: str | None = None
    error: tuple[ErrorKind, str] | None = None  # kind, message
    usage: tuple[int, int] | None = None
    deltas: int = 0
    server_tps: float | None = None
    ttft: float | None = None
    connect: float | None = None
    elapsed: float = 0.0
    plan: list[tuple[str, str, str]] = []
    tools: list[tuple[str, str, str | None, str | None]] = []
    retries: list[tuple[int, int, float, str]] = []  # attempt, attempts, delay, reason
    response_id: str | None = None  # the server keeps the answer by this id (Done.response_id)
    lookups: list[dict] = []  # look-up rounds' items, as sent (Turn.lookups)
    lookup_chars: int = 0


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
RECORD: TypeAdapter[Record] = TypeAdapter(Record)


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
