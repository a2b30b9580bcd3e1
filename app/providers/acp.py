"""Any coding agent that speaks the Agent Client Protocol on stdio: `steer --agent "COMMAND"`.

steer is the client (the `agent-client-protocol` package, `acp`). It starts the agent, opens
one ACP session in the workspace, and sends each instruction as a `session/prompt`; the
agent keeps its own conversation. What the agent streams becomes core's events: message
chunks TextDelta, thoughts ReasoningDelta, plans Plan, tool calls ToolCall, and the diff
content of a tool call FileEdit. steer advertises fs.readTextFile and fs.writeTextFile, so
the agent reads and writes through steer: each read, write and permission request becomes
an event carrying a future, which the Session resolves (a write once the user decided on its
hunks) and this module turns into the agent's answer. Cancelling the stream sends
`session/cancel`.

Faults end the turn with an Error and leave the agent's partial edits reviewable: the process
exiting, a line on its stdout that is not JSON-RPC (acp itself would log and skip it), and
silence longer than the stall timeout while steer is not the one keeping the agent waiting.
After a fault the process is stopped; the next turn starts a fresh one. A `session/update`
that acp's schema cannot read (a kind newer than the schema, `params: null`) is skipped and
the turn goes on, as acp would, but named in one line (a failed step of the turn, shown
once per reason) instead of acp logging pydantic's traceback on stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, RequestError
from acp.core import ClientSideConnection
from acp.helpers import resource_link_block, text_block
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileEditToolCallContent,
    FileSystemCapabilities,
    Implementation,
    ReadTextFileResponse,
    RequestPermissionResponse,
    SessionNotification,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    WriteTextFileResponse,
)

from app import __version__
from app.core.events import (
    Connected,
    Done,
    Error,
    ErrorKind,
    Event,
    FileEdit,
    FileRead,
    FileWrite,
    PermissionOption,
    PermissionRequest,
    Plan,
    PlanItem,
    ReasoningDelta,
    TextDelta,
    ToolCall,
)
from app.core.provider import STALL_TIMEOUT, Capabilities, Provider, Request
from app.core.text import masking

LINE_LIMIT = 50 * 1024 * 1024  # one JSON-RPC message (a whole file read or written)
STARTUP = 30.0  # seconds an agent may take to start (npx, a JIT...), however short the stall limit
DECLINED = -32001  # our error code for "the user said no": the agent reads the message
FINISH = {"end_turn": "stop", "max_tokens": "length", "max_turn_requests": "length",
          "refusal": "refusal", "cancelled": "cancelled"}
_END = object()  # the prompt's response arrived (or failed): the turn is over
NOTE_KIND = "steer"  # a ToolCall of this kind is steer's own note on the turn, not the agent's


class AgentFailed(RuntimeError):
    """The agent could not be started, or did not complete the ACP handshake."""


class _Pipe:
    """NDJSON over the agent's stdio, as acp's message-level Transport. Strict where acp's own
    reader is lenient: a line that is not a JSON-RPC message ends the connection. A
    session/update acp could not read is skipped here, and `skipped` is told why."""

    def __init__(self, proc: asyncio.subprocess.Process,
                 skipped: Callable[[str], None] = lambda why: None) -> None:
        self.proc = proc
        self.skipped = skipped
        self.junk: str | None = None
        self.last = time.monotonic()  # when the agent last said anything
        self._lock = asyncio.Lock()

    async def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        stdin = self.proc.stdin
        assert stdin is not None
        async with self._lock:
            stdin.write(data)
            await stdin.drain()

    async def receive(self) -> dict[str, Any] | None:
        stdout = self.proc.stdout
        assert stdout is not None
        while True:
            try:
                line = await stdout.readline()
            except ValueError:  # longer than LINE_LIMIT
                self.junk = "a line of more than 50 MB"
                return None
            if not line:
                return None
            self.last = time.monotonic()
            text = line.strip()
            if not text:
                continue
            try:
                message = json.loads(text)
            except ValueError:
                message = None
            if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
                self.junk = text[:120].decode("utf-8", "replace")
                return None
            if message.get("method") == "session/update" and "id" not in message:
                why = unreadable_update(message.get("params"))
                if why is not None:
                    self.skipped(why)
                    continue
            return message

    async def close(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError, RuntimeError):  # the pipe or the loop is gone
                self.proc.stdin.close()


def unreadable_update(params: Any) -> str | None:
    """Why acp's schema cannot read these session/update params, in a few words (None: it
    can)."""
    try:
        SessionNotification.model_validate(params)
        return None
    except ValueError as exc:  # pydantic's ValidationError
        errors: list[dict] = getattr(exc, "errors", list)()
    update = params.get("update") if isinstance(params, dict) else None
    if not isinstance(params, dict):
        return f"params is {json.dumps(params)[:20]}, not an object"
    if isinstance(update, dict) and any(e.get("type") == "union_tag_invalid" for e in errors):
        return f"unknown kind {str(update.get('sessionUpdate'))[:40]!r}"
    first = errors[0] if errors else {}
    where = ".".join(str(p) for p in first.get("loc", ())) or "params"
    return f"{where}: {str(first.get('msg', 'invalid'))[:80]}"


class AcpAgent(Provider):
    name = "acp"
    # not `parallel`: ACP's initialize declares no way to know an agent runs several sessions
    # at once (session capabilities say load/list/resume/fork..., never concurrency)
    capabilities = Capabilities(agent=True, warm_up=True, cancel="message")

    def __init__(self, command: str, cwd: str | os.PathLike[str], *, stall_timeout: float = STALL_TIMEOUT,
                 env: dict[str, str] | None = None) -> None:
        self.argv = shlex.split(command)
        if not self.argv:
            raise ValueError("--agent needs a command, e.g. --agent \"codex-acp\"")
        self.command = command
        self.model = Path(self.argv[0]).name  # the agent's own name once it introduced itself
        self.cwd = os.path.realpath(cwd)
        self.stall_timeout = stall_timeout
        self.env = env  # None: the agent inherits steer's environment (its API keys live there)
        self._proc: asyncio.subprocess.Process | None = None
        self._pipe: _Pipe | None = None
        self._conn: ClientSideConnection | None = None
        self._session_id = ""
        self._stderr: deque[str] = deque(maxlen=12)
        self._stderr_task: asyncio.Task[None] | None = None
        self._start_lock: asyncio.Lock | None = None
        self._prompt: asyncio.Task[Any] | None = None
        self._events: asyncio.Queue[Any] | None = None  # the turn streaming now
        self._waiting = 0  # agent requests the user is deciding: silence is not a stall then
        self._tools: dict[str, ToolCall] = {}
        self._diffs: set[tuple[str, str, str | None, str]] = set()  # diff contents already sent
        self._skipped: set[str] = set()  # why session/updates were skipped (each said once)
        self._background: set[asyncio.Task[Any]] = set()

    # -- the process and the session --------------------------------------------------------
    @property
    def alive(self) -> bool:
        return (self._proc is not None and self._proc.returncode is None and self._pipe is not None
                and self._pipe.junk is None and self._session_id != "")

    async def warm(self) -> None:
        """Start the agent while the user types. A failure is reported by the turn that
        needs the agent (it tries again), not here."""
        with contextlib.suppress(AgentFailed):
            await self._ensure()

    async def _ensure(self) -> None:
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if not self.alive:
                await self._stop()
                await self._start()

    async def _start(self) -> None:
        try:
            self._proc = proc = await asyncio.create_subprocess_exec(
                *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, cwd=self.cwd, env=self.env, limit=LINE_LIMIT,
                start_new_session=True)  # its own process group: stopping it stops its children
        except OSError as exc:
            raise AgentFailed(f"cannot start the agent {self.argv[0]!r}: {exc.strerror or exc}") from None
        self._stderr.clear()
        self._stderr_task = asyncio.create_task(self._read_stderr(proc))
        self._pipe = _Pipe(proc, self._skip)
        # acp serves a client that implements part of its Client protocol (it answers "method
        # not found" for the rest): steer offers an agent files and permissions only
        self._conn = ClientSideConnection(_Client(self), self._pipe)  # type: ignore[arg-type]
        caps = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                                  terminal=False)
        try:
            init = await self._handshake(self._conn.initialize(
                protocol_version=PROTOCOL_VERSION, client_capabilities=caps,
                client_info=Implementation(name="steer", title="steer", version=__version__)))
            if init.agent_info is not None:
                self.model = init.agent_info.name
            session = await self._handshake(self._conn.new_session(cwd=self.cwd, mcp_servers=[]))
        except AgentFailed:
            await self._stop()
            raise
        self._session_id = session.session_id
        self._diffs.clear()
        self._tools.clear()

    async def _handshake(self, call):
        limit = max(self.stall_timeout, STARTUP)
        try:
            return await asyncio.wait_for(call, limit)
        except TimeoutError:
            raise AgentFailed(f"the agent did not answer within {limit:.0f} s of starting") from None
        except Exception as exc:  # whatever the agent's side raised: _explain words it
            kind, message = await self._explain(exc)
            raise AgentFailed(message) from None

    async def _read_stderr(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        # stderr is only read for an error's last words: a line over the limit (ValueError)
        # or a broken pipe ends the reading, never the agent
        with contextlib.suppress(ValueError, OSError):
            async for line in proc.stderr:
                text = line.decode("utf-8", "replace").rstrip()
                if text:  # masked before it is cut: no part of a key is kept
                    self._stderr.append(masking.mask(text)[:300])

    async def _stop(self) -> None:
        conn, proc = self._conn, self._proc
        self._conn, self._session_id = None, ""
        if conn is not None:
            with contextlib.suppress(Exception):  # stopping it: what the connection raises as
                await conn.close()  # it goes (the library's own errors) changes nothing
        if proc is not None and proc.returncode is None:
            for sig, grace in ((None, 1.0), (signal.SIGTERM, 2.0), (signal.SIGKILL, None)):
                if sig is not None:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, sig)
                try:
                    await asyncio.wait_for(proc.wait(), grace)
                    break
                except TimeoutError:
                    continue
        if self._stderr_task is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._stderr_task, 1.0)

    async def aclose(self) -> None:
        if self._prompt is not None and not self._prompt.done():
            self._prompt.cancel()
        await self._stop()

    # -- a turn ------------------------------------------------------------------------------
    async def stream(self, request: Request) -> AsyncIterator[Event]:
        previous = self._prompt
        if previous is not None and not previous.done():  # a cancelled turn still settling
            # how it ended was reported with that turn: only its settling matters here
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(previous), 5.0)
        try:
            await self._ensure()
        except AgentFailed as exc:
            yield Error("agent", str(exc))
            yield Done("error")
            return
        yield Connected()
        assert self._conn is not None and self._pipe is not None
        events: asyncio.Queue[Any] = asyncio.Queue()
        self._events = events
        self._pipe.last = time.monotonic()
        prompt = self._prompt = asyncio.create_task(
            self._conn.prompt(session_id=self._session_id, prompt=self._blocks(request)))

        def ended(t: asyncio.Task[Any]) -> None:
            if not t.cancelled():
                t.exception()  # retrieved (it is read below): asyncio never reports it lost
            events.put_nowait(_END)

        prompt.add_done_callback(ended)
        finished = False
        try:
            while True:
                try:
                    ev = await asyncio.wait_for(events.get(), 1.0)
                except TimeoutError:
                    silent = time.monotonic() - self._pipe.last
                    if self._waiting == 0 and silent > self.stall_timeout:
                        finished = True
                        yield Error("stall", f"the agent sent nothing for {silent:.0f} s; stopped it")
                        yield Done("error")
                        await self._stop()
                        return
                    continue
                if ev is not _END:
                    yield ev
                    continue
                finished = True
                failure = prompt.exception()
                if failure is None:
                    reason = prompt.result().stop_reason
                    yield Done(FINISH.get(reason, reason))
                else:
                    kind, message = await self._explain(failure)
                    yield Error(kind, message)
                    yield Done("error")
                    await self._stop()
                return
        finally:
            self._events = None
            _abandon(events)
            if not finished and not prompt.done():
                self._spawn(self._cancel_upstream())

    def _blocks(self, request: Request) -> list[Any]:
        text = next((m["content"] for m in reversed(request.messages) if m.get("role") == "user"), "")
        blocks: list[Any] = [text_block(text)]
        for rel in request.context:
            path = os.path.join(self.cwd, rel)
            blocks.append(resource_link_block(rel, Path(path).as_uri()))
        return blocks

    async def _cancel_upstream(self) -> None:
        """Esc: ACP's cancel. The agent answers the prompt with `cancelled` shortly."""
        conn, session = self._conn, self._session_id
        if conn is not None and session:
            with contextlib.suppress(Exception):  # an agent past answering: the turn is
                await conn.cancel(session_id=session)  # stopped on our side all the same

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _explain(self, exc: BaseException) -> tuple[ErrorKind, str]:
        """What went wrong, in words, once the connection failed."""
        pipe, proc = self._pipe, self._proc
        if pipe is not None and pipe.junk is not None:
            return "protocol", f"the agent wrote something that is not ACP on its stdout: {pipe.junk!r}"
        if proc is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(proc.wait(), 1.0)
            if proc.returncode is not None:
                code = proc.returncode
                how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
                return "agent", f"the agent {how}{self._stderr_tail()}"
        if isinstance(exc, RequestError):
            detail = f" ({exc.data})" if exc.data else ""
            return "agent", f"the agent failed: {exc}{detail}"
        return "protocol", f"the agent broke the protocol: {type(exc).__name__}: {exc}"

    def _stderr_tail(self) -> str:
        tail = [line for line in self._stderr if line.strip()][-3:]
        return ("; it said: " + " | ".join(tail)) if tail else ""

    # -- what the agent sends -----------------------------------------------------------------
    def _push(self, ev: Any) -> bool:
        if self._events is None:
            return False
        self._events.put_nowait(ev)
        return True

    def _tool(self, call: ToolCallStart | ToolCallProgress | ToolCallUpdate) -> ToolCall:
        """Merge a tool call (start or update) into what we know of it; announce its diffs."""
        known = self._tools.get(call.tool_call_id) or ToolCall(call.tool_call_id, "tool call")
        tool = ToolCall(call.tool_call_id, call.title or known.title, call.kind or known.kind,
                        call.status or known.status)
        self._tools[tool.id] = tool
        self._push(tool)
        for item in call.content or []:
            if isinstance(item, FileEditToolCallContent):
                key = (tool.id, item.path, item.old_text, item.new_text)
                if key not in self._diffs:
                    self._diffs.add(key)
                    self._push(FileEdit(item.path, item.old_text, item.new_text, tool.id))
        return tool

    def _skip(self, why: str) -> None:
        """A session/update that could not be read: one failed step of the turn says so."""
        if why in self._skipped:
            return
        self._skipped.add(why)
        self._push(ToolCall(f"steer-skipped-{len(self._skipped)}",
                            f"skipped a session/update from the agent that steer cannot read "
                            f"({why})", NOTE_KIND, "failed"))

    def on_update(self, update: Any) -> None:
        t = type(update)
        if t is AgentMessageChunk or t is AgentThoughtChunk:
            content = update.content
            if isinstance(content, TextContentBlock) and content.text:
                self._push(TextDelta(content.text) if t is AgentMessageChunk
                           else ReasoningDelta(content.text))
        elif t is AgentPlanUpdate:
            self._push(Plan([PlanItem(e.content, e.status, e.priority) for e in update.entries]))
        elif t is ToolCallStart or t is ToolCallProgress:
            self._tool(update)

    async def ask(self, make: Callable[[asyncio.Future[Any]], Any]) -> Any:
        """Put a request to the session and wait for its answer (the user may be deciding)."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if not self._push(make(fut)):
            raise RequestError(DECLINED, "steer is not running a turn of this agent now")
        self._waiting += 1
        try:
            return await fut
        finally:
            self._waiting -= 1
            if self._pipe is not None:
                self._pipe.last = time.monotonic()  # the stall clock restarts after a decision


class _Client:
    """acp's Client protocol: the requests and notifications an agent sends steer."""

    def __init__(self, agent: AcpAgent) -> None:
        self.agent = agent

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.agent.on_update(update)

    async def request_permission(self, session_id: str, tool_call: ToolCallUpdate,
                                 options: list[Any], **kwargs: Any) -> RequestPermissionResponse:
        tool = self.agent._tool(tool_call)
        choices = [PermissionOption(o.option_id, o.name, o.kind) for o in options]
        allow = edit_allowance(tool, choices)
        if allow is not None:  # its write lands in the pending diff, where the user decides
            return RequestPermissionResponse(outcome=AllowedOutcome(option_id=allow, outcome="selected"))
        chosen = await self.agent.ask(lambda fut: PermissionRequest(tool.title, choices, tool, fut))
        if chosen is None or chosen not in {o.id for o in choices}:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(option_id=chosen, outcome="selected"))

    async def write_text_file(self, session_id: str, path: str, content: str,
                              **kwargs: Any) -> WriteTextFileResponse:
        refused = await self.agent.ask(lambda fut: FileWrite(path, content, fut))
        if refused is not None:
            raise RequestError(DECLINED, refused)
        return WriteTextFileResponse()

    async def read_text_file(self, session_id: str, path: str, line: int | None = None,
                             limit: int | None = None, **kwargs: Any) -> ReadTextFileResponse:
        try:
            text = await self.agent.ask(lambda fut: FileRead(path, line, limit, fut))
        except ValueError as exc:
            raise RequestError(-32002, str(exc)) from None
        return ReadTextFileResponse(content=text)


def edit_allowance(tool: ToolCall, options: list[PermissionOption]) -> str | None:
    """Steer answers an *edit* permission itself: the agent's write comes through steer's
    fs/write_text_file and becomes pending hunks, written only when the user accepts them,
    so a dialog would ask the same question twice. Its "allow once" (else "allow always");
    None for any other tool (commands, terminals, deletes and moves ask the user)."""
    if tool.kind != "edit":
        return None
    for kind in ("allow_once", "allow_always"):
        found = next((o.id for o in options if o.kind == kind), None)
        if found is not None:
            return found
    return None


def _abandon(events: asyncio.Queue[Any]) -> None:
    """The turn ended: requests the session never saw get answered, so no handler hangs."""
    while not events.empty():
        ev = events.get_nowait()
        reply = getattr(ev, "reply", None)
        if reply is None or reply.done():
            continue
        if type(ev) is FileRead:
            reply.set_exception(ValueError("the turn ended"))
        elif type(ev) is FileWrite:
            reply.set_result("the turn ended before steer saw this write; nothing was written")
        else:
            reply.set_result(None)
