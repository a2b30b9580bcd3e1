"""A small ACP agent for the tests, built on the same `acp` package steer uses as a client.

It speaks the real protocol over its stdio and follows a script (a JSON file named by its
first argument): one list of steps per prompt, the last list repeating; the count of prompts
is kept beside the script, so an agent restarted after a fault goes on with the next list. It appends what it
saw (the client's capabilities, the session's cwd, what writes, reads and permission
requests returned, a cancel) as JSON lines to $STEER_TEST_AGENT_LOG, for the tests to check.

Steps:
  {"say": text}                      agent_message_chunk (cut into pieces of `chunk` chars)
  {"think": text}                    agent_thought_chunk
  {"plan": [[content, status], ...]}
  {"tool": {"id", "title", "kind", "path", "old", "new", "status"}}  tool_call with diff content
  {"update": {"id", "status", "path", "old", "new"}}                 tool_call_update
  {"permission": {"id", "title", "options"}}  session/request_permission (allow once / reject
                                     once, or "options": [[id, name, kind], ...])
  {"hostile": text}                  every title an agent writes, set to `text` (a file, model
                                     or agent cannot be trusted): a thought, a plan entry, a
                                     tool call, then a permission request whose title and
                                     options carry it, then a message
  {"read": {"path", "line", "limit"}} fs/read_text_file
  {"write": {"path", "content"}}      fs/write_text_file (waits for steer's answer)
  {"edit": {"path", "old", "new"}}    as Claude Code's Edit: read, replace, announce, write
  {"junk": text}                      raw bytes on stdout
  {"notify": {"method", "params"}}    a JSON-RPC notification as given ("$session" in params
                                     becomes the session id), e.g. a session/update of a kind
                                     no schema knows, or with params null
  {"stderr": text}
  {"sleep": seconds} / {"hang": true} / {"die": true} (SIGKILL itself)
  {"wait_cancel": true}               wait for session/cancel, then end the turn `cancelled`
  {"stop": reason}                    the stop reason (default end_turn)
Relative paths are made absolute against the session's cwd, as a real agent does.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    RequestError,
    plan_entry,
    run_agent,
    start_tool_call,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
)
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallUpdate,
)


def log(**entry: Any) -> None:
    path = os.environ.get("STEER_TEST_AGENT_LOG")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps(entry) + "\n")


class ScriptedAgent:
    def __init__(self, script: dict[str, Any], counter: str) -> None:
        self.turns: list[list[dict[str, Any]]] = script["turns"]
        self.chunk: int = script.get("chunk", 7)
        self.counter = counter
        self.cwd = "/"
        self.conn: Any = None
        self.cancelled = asyncio.Event()

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None,
                         client_info: Any = None, **kwargs: Any) -> InitializeResponse:
        log(event="initialize", fs=client_capabilities.fs.model_dump() if client_capabilities else None,
            client=client_info.name if client_info else None)
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=AgentCapabilities(),
                                  agent_info=Implementation(name="scripted-agent", version="1"))

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kwargs: Any) -> NewSessionResponse:
        self.cwd = cwd
        log(event="new_session", cwd=cwd)
        return NewSessionResponse(session_id=f"s{os.getpid()}")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        log(event="cancel")
        self.cancelled.set()

    def path(self, p: str) -> str:
        return p if os.path.isabs(p) else os.path.join(self.cwd, p)

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        turn = int(open(self.counter).read()) if os.path.exists(self.counter) else 0
        with open(self.counter, "w") as fh:
            fh.write(str(turn + 1))
        steps = self.turns[min(turn, len(self.turns) - 1)]
        self.cancelled.clear()
        log(event="prompt", blocks=[b.model_dump(mode="json", exclude_none=True) for b in prompt])
        stop = "end_turn"
        for step in steps:
            (op, arg), = step.items()
            if op == "stop":
                stop = arg
            elif op == "wait_cancel":
                await self.cancelled.wait()
                log(event="cancelled")
                return PromptResponse(stop_reason="cancelled")
            else:
                await getattr(self, f"do_{op}")(session_id, arg)
        return PromptResponse(stop_reason=stop)

    # -- steps ---------------------------------------------------------------------------
    async def do_say(self, sid: str, text: str) -> None:
        for i in range(0, len(text), self.chunk):
            await self.conn.session_update(sid, update_agent_message_text(text[i:i + self.chunk]))

    async def do_think(self, sid: str, text: str) -> None:
        await self.conn.session_update(sid, update_agent_thought_text(text))

    async def do_plan(self, sid: str, entries: list[list[str]]) -> None:
        await self.conn.session_update(sid, update_plan([plan_entry(c, status=s) for c, s in entries]))

    def diff(self, a: dict[str, Any]) -> list[Any] | None:
        if "path" not in a:
            return None
        return [tool_diff_content(self.path(a["path"]), a["new"], a.get("old"))]

    async def do_tool(self, sid: str, a: dict[str, Any]) -> None:
        await self.conn.session_update(sid, start_tool_call(
            a["id"], a.get("title", "Edit"), kind=a.get("kind", "edit"), status=a.get("status", "pending"),
            content=self.diff(a)))

    async def do_update(self, sid: str, a: dict[str, Any]) -> None:
        await self.conn.session_update(sid, update_tool_call(a["id"], status=a.get("status"),
                                                             content=self.diff(a)))

    async def do_permission(self, sid: str, a: dict[str, Any]) -> None:
        options = [PermissionOption(option_id=i, name=n, kind=k) for i, n, k in a["options"]] if (
            "options" in a) else [PermissionOption(option_id="yes", name="Allow once", kind="allow_once"),
                                  PermissionOption(option_id="no", name="Reject", kind="reject_once")]
        tool = ToolCallUpdate(tool_call_id=a["id"], title=a.get("title"), kind=a.get("kind"),
                              content=self.diff(a))
        resp = await self.conn.request_permission(session_id=sid, tool_call=tool, options=options)
        log(event="permission", outcome=resp.outcome.model_dump(mode="json", by_alias=True, exclude_none=True))

    async def do_read(self, sid: str, a: dict[str, Any]) -> str | None:
        try:
            resp = await self.conn.read_text_file(session_id=sid, path=self.path(a["path"]),
                                                  line=a.get("line"), limit=a.get("limit"))
        except RequestError as exc:
            log(event="read", path=a["path"], error=str(exc))
            return None
        log(event="read", path=a["path"], content=resp.content)
        return resp.content

    async def do_write(self, sid: str, a: dict[str, Any]) -> None:
        try:
            await self.conn.write_text_file(session_id=sid, path=self.path(a["path"]), content=a["content"])
        except RequestError as exc:
            log(event="write", path=a["path"], error=str(exc))
            return
        log(event="write", path=a["path"], ok=True)

    async def do_edit(self, sid: str, a: dict[str, Any]) -> None:
        text = await self.do_read(sid, {"path": a["path"]})
        if text is None:
            return
        await self.do_tool(sid, {"id": a.get("id", "edit"), "path": a["path"], "old": a["old"], "new": a["new"]})
        await self.do_write(sid, {"path": a["path"], "content": text.replace(a["old"], a["new"], 1)})

    async def do_hostile(self, sid: str, text: str) -> None:
        await self.do_think(sid, f"thinking {text}")
        await self.do_plan(sid, [[f"plan {text}", "in_progress"]])
        await self.do_tool(sid, {"id": "h1", "title": f"tool {text}", "kind": "read",
                                 "status": "completed"})
        await self.do_permission(sid, {"id": "h2", "title": f"ask {text}", "options": [
            ["yes", f"allow {text}", "allow_once"], ["no", f"reject {text}", "reject_once"]]})
        await self.do_say(sid, f"said {text}")

    async def do_junk(self, sid: str, text: str) -> None:
        os.write(1, text.encode() + b"\n")

    async def do_notify(self, sid: str, a: dict[str, Any]) -> None:
        params = json.loads(json.dumps(a.get("params")).replace('"$session"', json.dumps(sid)))
        os.write(1, json.dumps({"jsonrpc": "2.0", "method": a["method"], "params": params}).encode()
                 + b"\n")

    async def do_stderr(self, sid: str, text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    async def do_sleep(self, sid: str, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def do_hang(self, sid: str, _: Any) -> None:
        await asyncio.sleep(3600)

    async def do_die(self, sid: str, _: Any) -> None:
        os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    with open(sys.argv[1]) as fh:
        script = json.load(fh)
    asyncio.run(run_agent(ScriptedAgent(script, sys.argv[1] + ".turn")))


if __name__ == "__main__":
    main()
