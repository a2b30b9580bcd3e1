"""ACP agents (`--agent`): a real agent process (tests/acp_agent.py, built on the `acp`
package) over stdio, a real git repository, the real Session, pending diff and review; and
`steer run --agent` end to end in a subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import git, init_repo
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.conversation.agent import AgentHost, AgentRefused
from app.core.conversation.session import Session
from app.core.disk.journal import Journal
from app.core.disk.workspace import Workspace
from app.core.edits.diff import PendingDiff
from app.core.edits.hunks import HunkState
from app.core.review.review import Review
from app.providers.acp import AcpAgent

AGENT = Path(__file__).with_name("acp_agent.py")
STEER = [sys.executable, "-m", "app"]
SRC = "".join(f"line {i}\n" for i in range(1, 11))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "r", {"f.txt": SRC, "g.txt": "one\ntwo\n"})


@pytest.fixture
def agent_log(tmp_path: Path, monkeypatch) -> Path:
    path = tmp_path / "agent.log"
    monkeypatch.setenv("STEER_TEST_AGENT_LOG", str(path))
    return path


def script(tmp_path: Path, *turns: list[dict], chunk: int = 7) -> str:
    """The command line of a scripted agent: one list of steps per prompt."""
    path = tmp_path / f"script{len(list(tmp_path.glob('script*')))}.json"
    path.write_text(json.dumps({"turns": list(turns), "chunk": chunk}))
    return shlex.join([sys.executable, str(AGENT), str(path)])


def logged(path: Path, event: str | None = None) -> list[dict]:
    if not path.exists():
        return []
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    return [e for e in entries if event is None or e["event"] == event]


async def until(cond, timeout: float = 20.0) -> None:
    """Wait for something the agent does next (not a timing assertion: the bound only keeps
    a broken build from hanging the suite)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        assert loop.time() < end, "timed out waiting"
        await asyncio.sleep(0.02)


def session_for(repo: Path, cmd: str, **kw) -> Session:
    return Session(Workspace(repo), AcpAgent(cmd, repo, stall_timeout=kw.pop("stall", 30.0)), **kw)


# -- what the agent streams -----------------------------------------------------------------
async def test_message_chunks_thoughts_and_plan_reach_the_turn_and_prose_is_never_parsed(
        repo, tmp_path, agent_log):
    # prose that looks exactly like an edit block: a model's would become a hunk, an agent's not
    text = "I will look.\nf.txt\n```\n<<<<<<< SEARCH\nline 1\n=======\nLINE 1\n>>>>>>> REPLACE\n```\nDone."
    cmd = script(tmp_path, [{"think": "hmm, the file"}, {"plan": [["read f.txt", "completed"],
                                                                   ["edit it", "pending"]]},
                            {"say": text}])
    session = session_for(repo, cmd)
    try:
        turn = await session.ask("look at f.txt")
    finally:
        await session.aclose()
    assert turn.complete, turn.error
    assert turn.text == text
    assert "".join(turn.reasoning) == "hmm, the file"
    assert [(p.content, p.status) for p in turn.plan] == [("read f.txt", "completed"), ("edit it", "pending")]
    assert session.pending.hunks == []
    assert session.pending.prose[-1] == "Done."
    init, = logged(agent_log, "initialize")
    assert init["fs"] == {"read_text_file": True, "write_text_file": True, "field_meta": None}
    assert logged(agent_log, "new_session")[0]["cwd"] == os.path.realpath(repo)
    # the agent gets the user's words, not steer's edit-format system prompt
    prompt, = logged(agent_log, "prompt")
    assert prompt["blocks"] == [{"type": "text", "text": "look at f.txt"}]


async def test_a_diff_tool_call_becomes_hunks_with_its_content(repo, tmp_path, agent_log):
    cmd = script(tmp_path, [
        {"tool": {"id": "t1", "title": "Edit f.txt", "path": "f.txt", "old": "line 3\n", "new": "line three\n"}},
        # the same diff repeated by the tool call's update: still one hunk, same id
        {"update": {"id": "t1", "status": "completed", "path": "f.txt", "old": "line 3\n",
                    "new": "line three\n"}},
        # whole file on both sides (as Gemini CLI sends it), and a new file
        {"tool": {"id": "t2", "path": "g.txt", "old": "one\ntwo\n", "new": "one\n2\ntwo\n"}},
        {"tool": {"id": "t3", "path": "new/h.txt", "old": None, "new": "hello\n"}},
        {"say": "three edits"}])
    session = session_for(repo, cmd)
    try:
        turn = await session.ask("edit")
    finally:
        await session.aclose()
    assert turn.complete and not session.pending.errors
    by_path = {h.path: h for h in session.pending.hunks}
    assert len(session.pending.hunks) == 3
    f = by_path["f.txt"]
    assert (f.base_start, f.old, f.new, f.state) == (2, ["line 3"], ["line three"], HunkState.PENDING)
    g = by_path["g.txt"]
    assert (g.base_start, g.base_end, g.old, g.new) == (1, 1, [], ["2"])
    assert by_path["new/h.txt"].new == ["hello"] and session.pending.files["new/h.txt"].created
    assert turn.tools["t1"].status == "completed" and turn.tools["t1"].title == "Edit f.txt"
    # nothing touched the disk; an accept writes exactly the proposal
    assert git(repo, "status", "--porcelain") == ""
    session.review.accept_all()
    assert (repo / "f.txt").read_text() == SRC.replace("line 3\n", "line three\n")
    assert (repo / "g.txt").read_text() == "one\n2\ntwo\n"
    assert (repo / "new/h.txt").read_text() == "hello\n"


async def test_a_snippet_diff_is_applied_inside_a_line_and_refused_when_ambiguous(repo, tmp_path, agent_log):
    (repo / "f.txt").write_text("a = 1\nb = 1\nc = 2\n")
    cmd = script(tmp_path, [{"tool": {"id": "t1", "path": "f.txt", "old": "c = 2", "new": "c = 3"}},
                            {"tool": {"id": "t2", "path": "f.txt", "old": " = 1", "new": " = 9"}}])
    session = session_for(repo, cmd)
    try:
        await session.ask("edit")
    finally:
        await session.aclose()
    h, = session.pending.hunks
    assert (h.old, h.new) == (["c = 2"], ["c = 3"])
    assert "occurs 2 times" in session.pending.errors[0].message


# -- writes wait for the user ---------------------------------------------------------------
WRITE = {"write": {"path": "f.txt", "content": SRC.replace("line 5\n", "line five\n")}}


async def test_fs_write_waits_for_the_accept_then_the_agent_goes_on(repo, tmp_path, agent_log):
    cmd = script(tmp_path, [WRITE, {"say": "written"}])
    session = session_for(repo, cmd)
    try:
        turn = session.start("edit")
        await until(lambda: session.agent.writes)
        await asyncio.sleep(0.3)  # give a broken build the chance to answer early
        assert turn.live and logged(agent_log, "write") == [] and turn.text == ""
        h, = session.pending.hunks
        assert (h.old, h.new) == (["line 5"], ["line five"])
        assert (repo / "f.txt").read_text() == SRC  # nothing written before the accept
        assert session.review.accept([h.id]).accepted == [h.id]
        await session.wait()
    finally:
        await session.aclose()
    assert logged(agent_log, "write") == [{"event": "write", "path": "f.txt", "ok": True}]
    assert turn.complete and turn.text == "written"
    assert (repo / "f.txt").read_text() == SRC.replace("line 5\n", "line five\n")


async def test_fs_write_rejected_gives_the_agent_an_error_and_writes_nothing(repo, tmp_path, agent_log):
    cmd = script(tmp_path, [WRITE, {"say": "ok"}])
    session = session_for(repo, cmd)
    try:
        session.start("edit")
        await until(lambda: session.agent.writes)
        session.review.reject_all()
        await session.wait()
    finally:
        await session.aclose()
    w, = logged(agent_log, "write")
    assert "the user rejected this change to f.txt" in w["error"]
    assert (repo / "f.txt").read_text() == SRC


async def test_a_partly_accepted_write_says_so(repo, tmp_path, agent_log):
    content = SRC.replace("line 2\n", "line two\n").replace("line 8\n", "line eight\n")
    cmd = script(tmp_path, [{"write": {"path": "f.txt", "content": content}}])
    session = session_for(repo, cmd)
    try:
        session.start("edit")
        await until(lambda: session.agent.writes)
        await session.changes.arrivals.settle()  # checked against the disk: the hunks the user sees
        first, second = session.pending.hunks
        session.review.accept([first.id])
        await asyncio.sleep(0.2)
        assert logged(agent_log, "write") == []  # one hunk is still undecided
        session.review.reject([second.id])
        await session.wait()
    finally:
        await session.aclose()
    w, = logged(agent_log, "write")
    assert "accepted only part" in w["error"] and "1 of 2" in w["error"]
    assert (repo / "f.txt").read_text() == SRC.replace("line 2\n", "line two\n")


async def test_claude_style_edit_announced_then_written_is_one_change(repo, tmp_path, agent_log):
    # Claude Code's Edit: read, a tool call with the snippet diff, then the whole-file write.
    # The write restates the proposal: it holds the same hunk, it does not add a second one.
    cmd = script(tmp_path, [{"edit": {"path": "f.txt", "old": "line 7", "new": "line seven"}},
                            {"edit": {"path": "f.txt", "old": "line 9", "new": "line nine"}}])
    session = session_for(repo, cmd)
    try:
        session.start("edit")
        await until(lambda: session.agent.writes)
        h, = session.pending.hunks
        session.review.accept([h.id])
        # the second edit reads the file back: the first is accepted, on disk and in the read
        await until(lambda: len(session.agent.writes) == 1 and len(session.pending.hunks) == 2)
        assert "line seven" in logged(agent_log, "read")[1]["content"]
        ids = [x.id for x in session.pending.hunks]
        assert h.id in ids
        session.review.accept([i for i in ids if i != h.id])
        await session.wait()
    finally:
        await session.aclose()
    assert [w.get("ok") for w in logged(agent_log, "write")] == [True, True]
    assert (repo / "f.txt").read_text() == SRC.replace("line 7\n", "line seven\n").replace(
        "line 9\n", "line nine\n")


# -- reads ------------------------------------------------------------------------------------
async def test_fs_read_returns_steers_view_with_open_proposals(repo, tmp_path, agent_log):
    (repo / "crlf.txt").write_bytes(b"x\r\ny\r\n")
    cmd = script(tmp_path, [
        {"tool": {"id": "t1", "path": "f.txt", "old": "line 3\n", "new": "line three\n"}},
        {"read": {"path": "f.txt"}},
        {"read": {"path": "f.txt", "line": 2, "limit": 3}},
        {"read": {"path": "g.txt"}},
        {"read": {"path": "crlf.txt"}},
        {"read": {"path": "missing.txt"}},
        {"read": {"path": str(tmp_path / "outside.txt")}},
        {"read": {"path": ".git/config"}}])
    (tmp_path / "outside.txt").write_text("secret\n")
    session = session_for(repo, cmd)
    try:
        await session.ask("read")
    finally:
        await session.aclose()
    reads = logged(agent_log, "read")
    assert reads[0]["content"] == SRC.replace("line 3\n", "line three\n")  # the open proposal
    assert reads[1]["content"] == "line 2\nline three\nline 4\n"
    assert reads[2]["content"] == "one\ntwo\n"
    assert reads[3]["content"] == "x\ny\n"
    assert "no such file" in reads[4]["error"]
    assert "outside the workspace" in reads[5]["error"]
    assert ".git" in reads[6]["error"]
    assert git(repo, "status", "--porcelain") == "?? crlf.txt\n"


async def test_a_write_keeps_the_files_line_endings(repo, tmp_path, agent_log):
    (repo / "crlf.txt").write_bytes(b"x\r\ny\r\n")
    cmd = script(tmp_path, [{"edit": {"path": "crlf.txt", "old": "y", "new": "z"}}])
    session = session_for(repo, cmd)
    try:
        session.start("edit")
        await until(lambda: session.agent.writes)
        session.review.accept_all()
        await session.wait()
    finally:
        await session.aclose()
    assert (repo / "crlf.txt").read_bytes() == b"x\r\nz\r\n"


# -- paths outside the workspace ----------------------------------------------------------------
async def test_writes_and_edits_outside_the_workspace_are_refused(repo, tmp_path, agent_log):
    outside = tmp_path / "outside.txt"
    os.symlink(tmp_path, repo / "link")
    cmd = script(tmp_path, [
        {"write": {"path": str(outside), "content": "pwned\n"}},
        {"write": {"path": str(repo / ".." / "escape.txt"), "content": "pwned\n"}},
        {"write": {"path": "link/via-symlink.txt", "content": "pwned\n"}},
        {"write": {"path": ".git/hooks/post-commit", "content": "pwned\n"}},
        {"tool": {"id": "t", "path": "/etc/hostname", "old": None, "new": "pwned\n"}},
        {"say": "tried"}])
    session = session_for(repo, cmd)
    try:
        turn = await session.ask("escape")
    finally:
        await session.aclose()
    assert turn.complete
    writes = logged(agent_log, "write")
    assert len(writes) == 4 and all("refused" in w["error"] for w in writes)
    assert "outside the workspace" in writes[0]["error"] and "symlink" in writes[2]["error"]
    assert len(session.pending.errors) == 5 and session.pending.hunks == []
    assert not outside.exists() and not (tmp_path / "escape.txt").exists()
    assert not (tmp_path / "via-symlink.txt").exists()
    assert not (repo / ".git/hooks/post-commit").exists()


# -- permissions and cancel ----------------------------------------------------------------------
async def test_permission_requests_are_shown_and_answered(repo, tmp_path, agent_log):
    cmd = script(tmp_path, [{"permission": {"id": "t9", "title": "Run make test", "kind": "execute"}},
                            {"permission": {"id": "t10", "title": "Run rm -rf build"}}])
    session = session_for(repo, cmd)
    try:
        turn = session.start("go")
        await until(lambda: session.agent.permissions)
        req, = session.agent.permissions
        assert req.title == "Run make test" and [o.kind for o in req.options] == ["allow_once", "reject_once"]
        assert turn.tools["t9"].kind == "execute"
        session.agent.answer(req, "yes")
        await until(lambda: len(logged(agent_log, "permission")) == 1 and session.agent.permissions)
        session.agent.answer(session.agent.permissions[0], "no")
        await session.wait()
    finally:
        await session.aclose()
    assert [p["outcome"] for p in logged(agent_log, "permission")] == [
        {"outcome": "selected", "optionId": "yes"}, {"outcome": "selected", "optionId": "no"}]


async def test_esc_sends_session_cancel_and_the_turn_ends_cancelled(repo, tmp_path, agent_log):
    cmd = script(tmp_path, [
        {"tool": {"id": "t1", "path": "f.txt", "old": "line 3\n", "new": "line three\n"}},
        {"say": "working"}, {"permission": {"id": "t2", "title": "Run it"}}, {"wait_cancel": True}],
        [{"say": "again"}])
    session = session_for(repo, cmd)
    try:
        turn = session.start("go")
        await until(lambda: session.agent.permissions)
        assert session.interrupt()
        assert turn.state == "interrupted" and turn.finish_reason == "cancelled"
        assert session.agent.permissions == []  # answered `cancelled` for the agent
        await until(lambda: logged(agent_log, "cancelled"))
        h, = session.pending.hunks  # the partial edit stays reviewable
        assert h.state == HunkState.PENDING
        # the same agent process and session go on with the next message
        second = session.start("next")
        await session.wait()
    finally:
        await session.aclose()
    assert logged(agent_log, "permission")[0]["outcome"] == {"outcome": "cancelled"}
    assert second.complete and second.text == "again" and second.kind == "follow-up"
    assert len(logged(agent_log, "initialize")) == 1
    # the follow-up tells the agent what was interrupted
    assert "interrupted" in logged(agent_log, "prompt")[1]["blocks"][0]["text"]


async def test_a_redirect_cancels_the_agents_turn_and_prompts_again(repo, tmp_path, agent_log):
    cmd = script(tmp_path, [{"say": "working"}, {"wait_cancel": True}], [{"say": "redirected"}])
    session = session_for(repo, cmd)
    try:
        first = session.start("go")
        await until(lambda: first.text == "working")
        second = session.start("do something else instead")  # while streaming: a redirect
        assert second.kind == "redirect" and first.finish_reason == "cancelled"
        await session.wait()
    finally:
        await session.aclose()
    assert second.complete and second.text == "redirected"
    # the new prompt went out after the agent answered the cancelled one
    assert [e["event"] for e in logged(agent_log) if e["event"] in ("cancelled", "prompt")] == [
        "prompt", "cancelled", "prompt"]
    assert "do something else instead" in logged(agent_log, "prompt")[1]["blocks"][0]["text"]


async def test_context_files_go_to_the_agent_as_resource_links(repo, tmp_path, agent_log):
    cmd = script(tmp_path, [{"say": "ok"}])
    session = session_for(repo, cmd, context=["g.txt"])
    try:
        await session.ask("look")
    finally:
        await session.aclose()
    blocks = logged(agent_log, "prompt")[0]["blocks"]
    assert blocks[1]["type"] == "resource_link" and blocks[1]["name"] == "g.txt"
    assert blocks[1]["uri"] == (Path(os.path.realpath(repo)) / "g.txt").as_uri()


# -- faults ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("fault, stall, expect", [
    ({"die": True}, 30, "killed by signal 9"),
    ({"junk": "Welcome to my agent!"}, 30, "not ACP on its stdout: 'Welcome to my agent!'"),
    ({"hang": True}, 1, "sent nothing for"),
])
async def test_faults_end_the_turn_with_a_clear_error_and_keep_partial_edits(
        repo, tmp_path, agent_log, fault, stall, expect):
    cmd = script(tmp_path, [{"stderr": "agent log line"},
                            {"tool": {"id": "t1", "path": "f.txt", "old": "line 3\n", "new": "line three\n"}},
                            {"say": "half"}, fault, {"say": "never"}], [{"say": "fresh"}])
    session = session_for(repo, cmd, stall=stall)
    try:
        turn = await session.ask("go")
        assert turn.state == "error" and expect in turn.error.message
        h, = session.pending.hunks
        assert h.new == ["line three"] and h.state == HunkState.PENDING
        assert turn.text == "half"
        # the next message starts a fresh agent
        again = session.start("again")
        await session.wait()
        assert again.complete and again.text == "fresh"
    finally:
        await session.aclose()
    assert len(logged(agent_log, "initialize")) == 2


async def test_an_agent_that_cannot_start_is_a_clear_error(repo):
    session = session_for(repo, "steer-no-such-agent-xyz --acp")
    try:
        turn = await session.ask("go")
    finally:
        await session.aclose()
    assert turn.state == "error" and "cannot start the agent 'steer-no-such-agent-xyz'" in turn.error.message


# -- steer run --agent ---------------------------------------------------------------------------
def steer(root: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run([*STEER, *args], cwd=root, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_steer_run_agent_end_to_end(repo, tmp_path, agent_log):
    cmd = script(tmp_path, [{"plan": [["edit f.txt", "in_progress"]]},
                            {"edit": {"path": "f.txt", "old": "line 4", "new": "line four"}},
                            {"tool": {"id": "t2", "path": "g.txt", "old": "two", "new": "2"}},
                            {"say": "Changed two files."}])
    out = steer(repo, "run", "edit them", "--agent", cmd, "--accept", "all")
    assert out.returncode == 0, out.stderr
    assert "Changed two files." in out.stderr and "accepted 2 hunks" in out.stderr
    assert (repo / "f.txt").read_text() == SRC.replace("line 4\n", "line four\n")
    assert (repo / "g.txt").read_text() == "one\n2\n"
    assert "+line four" in out.stdout
    assert logged(agent_log, "write") == [{"event": "write", "path": "f.txt", "ok": True}]


def test_steer_run_agent_without_accept_stages_and_writes_nothing(repo, tmp_path, agent_log):
    cmd = script(tmp_path, [{"plan": [["write f.txt", "in_progress"]]}, {"tool": {"id": "w", "title": "Write"}},
                            WRITE, {"read": {"path": "f.txt"}}, {"say": "done"}])
    out = steer(repo, "run", "edit", "--agent", cmd, "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["plan"] == [{"content": "write f.txt", "status": "in_progress"}]
    assert report["tool_calls"] == [{"id": "w", "title": "Write", "kind": "edit", "status": "pending"}]
    assert report["format"] == "agent" and report["files"][0]["hunks"][0]["added"] == ["line five"]
    # staged: the agent was answered at once, and it reads its own change back
    assert logged(agent_log, "write")[0]["ok"] is True
    assert "line five" in logged(agent_log, "read")[0]["content"]
    assert git(repo, "status", "--porcelain") == ""


def test_steer_run_agent_permissions_default_to_reject(repo, tmp_path, agent_log):
    cmd = script(tmp_path, [{"permission": {"id": "t1", "title": "Run rm -rf /"}}])
    out = steer(repo, "run", "go", "--agent", cmd)
    assert out.returncode == 0, out.stderr
    assert "rejected the agent's request: Run rm -rf /" in out.stderr
    assert logged(agent_log, "permission")[0]["outcome"] == {"outcome": "selected", "optionId": "no"}
    out = steer(repo, "run", "go", "--agent", cmd, "--agent-permissions", "allow")
    assert "allowed the agent's request" in out.stderr
    assert logged(agent_log, "permission")[1]["outcome"] == {"outcome": "selected", "optionId": "yes"}


@pytest.mark.parametrize("fault, extra, expect", [
    ({"die": True}, [], "the agent was killed by signal 9; it said: about to edit"),
    ({"junk": "{not json"}, [], "not ACP on its stdout"),
    ({"hang": True}, ["--stall-timeout", "1"], "the agent sent nothing for"),
])
def test_steer_run_agent_faults_exit_3_and_print_the_partial_edits(
        repo, tmp_path, agent_log, fault, extra, expect):
    cmd = script(tmp_path, [{"stderr": "about to edit"},
                            {"tool": {"id": "t1", "path": "f.txt", "old": "line 3\n", "new": "line three\n"}},
                            fault])
    out = steer(repo, "run", "go", "--agent", cmd, "--accept", "all", *extra)
    assert out.returncode == 3, out.stderr
    assert expect in out.stderr and "nothing was written" in out.stderr
    assert "-line 3\n+line three" in out.stdout  # the partial edit, reviewable
    assert git(repo, "status", "--porcelain") == ""


UNREADABLE = [
    {"notify": {"method": "session/update",
                "params": {"sessionId": "$session", "update": {"sessionUpdate": "bogus_kind"}}}},
    {"notify": {"method": "session/update", "params": None}},
    {"notify": {"method": "session/update", "params": None}},  # the same reason: said once
]


def test_steer_run_agent_names_an_update_it_cannot_read_in_one_line(repo, tmp_path, agent_log):
    cmd = script(tmp_path, [{"say": "before, "}, *UNREADABLE,
                            {"tool": {"id": "t1", "path": "f.txt", "old": "line 3\n",
                                      "new": "line three\n"}},
                            {"say": "after."}])
    out = steer(repo, "run", "go", "--agent", cmd, "--accept", "all")
    assert out.returncode == 0, out.stderr  # skipped, as acp does: the turn goes on
    assert "Traceback" not in out.stderr and "pydantic" not in out.stderr, out.stderr
    notes = [line for line in out.stderr.splitlines() if "session/update" in line]
    assert notes == [
        "steer: skipped a session/update from the agent that steer cannot read "
        "(unknown kind 'bogus_kind')",
        "steer: skipped a session/update from the agent that steer cannot read "
        "(params is null, not an object)"], out.stderr
    assert "before, after." in out.stderr
    assert (repo / "f.txt").read_text() == SRC.replace("line 3\n", "line three\n")


async def test_an_update_it_cannot_read_is_a_failed_step_of_the_turn(repo, tmp_path, agent_log):
    session = session_for(repo, script(tmp_path, [{"say": "a"}, *UNREADABLE, {"say": "b"}]))
    try:
        turn = await session.ask("go")
    finally:
        await session.aclose()
    assert turn.complete, turn.error
    assert turn.text == "ab"
    assert [(t.kind, t.status) for t in turn.tools.values()] == [("steer", "failed")] * 2
    assert "unknown kind 'bogus_kind'" in list(turn.tools.values())[0].title


def test_steer_run_agent_that_cannot_start_exits_3(repo):
    out = steer(repo, "run", "go", "--agent", "steer-no-such-agent-xyz")
    assert out.returncode == 3 and "cannot start the agent" in out.stderr


def test_steer_run_agent_refuses_an_empty_command(repo):
    out = steer(repo, "run", "go", "--agent", "  ")
    assert out.returncode == 2 and "--agent" in out.stderr


# -- attacks -----------------------------------------------------------------------------------
@pytest.mark.parametrize("command, expect", [
    ("sh -c 'echo Welcome to my agent; sleep 30'", "not ACP on its stdout: 'Welcome to my agent'"),
    ("sh -c 'echo no key set >&2; exit 7'", "the agent exited with code 7; it said: no key set"),
])
def test_steer_run_agent_broken_at_start_exits_3_with_its_words(repo, command, expect):
    out = steer(repo, "run", "go", "--agent", command)
    assert out.returncode == 3 and expect in out.stderr, out.stderr


async def test_fifos_binary_content_and_directories_are_refused_without_blocking(repo, tmp_path, agent_log):
    os.mkfifo(repo / "pipe")
    (repo / "bin.dat").write_bytes(b"\x00\x01\x02")
    cmd = script(tmp_path, [
        {"read": {"path": "pipe"}},
        {"write": {"path": "pipe", "content": "x\n"}},
        {"read": {"path": "bin.dat"}},
        {"write": {"path": "f.txt", "content": "nul \x00 inside\n"}},
        {"write": {"path": ".", "content": "x\n"}},
        {"say": "survived"}])
    session = session_for(repo, cmd)
    try:
        turn = await session.ask("attack")
    finally:
        await session.aclose()
    assert turn.complete and turn.text == "survived"
    reads, writes = logged(agent_log, "read"), logged(agent_log, "write")
    assert "it is a FIFO" in reads[0]["error"] and "it is a FIFO" in writes[0]["error"]
    assert "binary" in reads[1]["error"] and "binary" in writes[1]["error"]
    assert "refused" in writes[2]["error"]
    assert session.pending.hunks == [] and (repo / "f.txt").read_text() == SRC


# -- the proposal logic, property-tested ---------------------------------------------------------
LINES = st.lists(st.sampled_from(["a", "b", "c", "", "d e"]), max_size=8)


@settings(max_examples=120, deadline=None)
@given(base=LINES, first=LINES, second=LINES, decide=st.lists(st.booleans(), max_size=8))
def test_proposals_land_exactly_and_decisions_are_kept(base, first, second, decide):
    """Whatever an agent proposes for a file, twice, with some hunks decided in between:
    steer's view is the latest proposal wherever the user has not decided, an accept writes
    exactly the view, and a proposal that would rewrite decided lines is refused whole."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "f.txt").write_text("".join(x + "\n" for x in base))
        ws = Workspace(root)
        host_of = SimpleNamespace(ws=ws, pending=PendingDiff(ws), on_change=lambda: None)
        host = AgentHost(host_of)  # type: ignore[arg-type]
        review = Review(ws, host_of.pending, Journal(root / "journal"))
        fd = host_of.pending.file("f.txt")
        host.propose(fd, first)
        assert host.view(fd) == first
        ids = [h.id for h in fd.hunks]
        host.propose(fd, first)  # stated again: the same hunks, the same ids
        assert [h.id for h in fd.hunks] == ids
        hunks = list(fd.hunks)
        for h, yes in zip(hunks, decide, strict=False):
            (review.accept if yes else review.reject)([h.id])
        decided = {h.id for h in fd.hunks if h.state in (HunkState.ACCEPTED, HunkState.REJECTED)}
        before = host.view(fd)
        try:
            host.propose(fd, second)
        except AgentRefused:
            assert host.view(fd) == before  # refused whole: nothing changed
        else:
            assert host.view(fd) == second
            assert decided <= {h.id for h in fd.hunks}  # decided hunks are never dropped
        review.accept_all()
        assert (root / "f.txt").read_text() == "".join(x + "\n" for x in host.view(fd))
