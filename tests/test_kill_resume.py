"""kill -9 at any moment, then resume: real `steer` processes SIGKILLed mid-stream and
mid-accept (app/core/faults.py stops one at an exact instruction), a real loopback server
streaming the answer, then the session taken over by a new process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import git, init_repo, wait_stopped

from app.bench.demo import CALC, CALC_ANSWER
from app.core.conversation import resume
from app.core.conversation.session import Session
from app.core.disk.workspace import Workspace
from app.core.provider import Provider
from app.core.storage.log import read_log
from app.core.storage.records import End, Text, TurnRec
from app.core.storage.store import SessionStore
from app.server.chat_server import ServerThread

HERE = Path(__file__).resolve().parents[1]
# a long answer: small edits, then a long explanation, streamed slowly enough to kill it
LONG = "I'll rename the arguments.\n\n" + "".join(
    f"calc.py\n```python\n<<<<<<< SEARCH\ndef {f}(a, b):\n=======\ndef {f}(x, y):\n>>>>>>> REPLACE\n```\n\n"
    for f in ("add", "sub", "mul", "div")) + "".join(
    f"- note {i}: the arguments are now x and y everywhere.\n" for i in range(120)) + "Done.\n"


def steer(root: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    e = {**os.environ, "PYTHONPATH": str(HERE), **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "app", *args], cwd=root, env=e,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def saved_text(path: Path) -> str:
    return "".join(r.s for r in read_log(path)[0] if type(r) is Text)


def take_over(root: Path, sid: str) -> Session:
    session = Session(Workspace(root), Provider())  # no model is asked: only the log is read
    resume.resume(session, SessionStore(root), sid)
    assert session.log is not None and session.log.flush()  # its writer thread wrote the End
    return session


@pytest.fixture
def demo_repo(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "demo", {"calc.py": CALC})


def test_kill_9_mid_stream_loses_at_most_the_last_second(demo_repo):
    with ServerThread(replay=LONG, rate=150) as server:
        proc = steer(demo_repo, "run", "rename the arguments", "-f", "calc.py", "--base-url",
                     server.base_url, "--model", "replay", "--format", "search_replace", "-q")
        store = SessionStore(demo_repo)
        deadline = time.monotonic() + 60
        while not store.ids() and time.monotonic() < deadline:
            time.sleep(0.05)
        path = store.log_path(store.ids()[0])
        # while it streams (no turn boundary, no decision), what reaches the disk grows: the
        # writer's periodic flush. How often (at least once a second) is a figure, not a test:
        # `steer bench sessions` reports it as unsaved_s_max.
        seen = [len(saved_text(path))]
        deadline = time.monotonic() + 60  # a give-up: the answer takes ~10 s at 150 tokens/s
        while len(set(seen)) < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
            seen.append(len(saved_text(path)))
        assert len(set(seen)) >= 3 and proc.poll() is None, seen  # grew twice mid-answer
        before = len(saved_text(path))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    text = saved_text(path)
    assert text and LONG.startswith(text) and len(text) >= before  # a prefix, nothing torn
    session = take_over(demo_repo, path.stem)
    try:
        turn = session.turn
        assert turn.state == "interrupted" and turn.text == text
        done = [h for h in session.pending.hunks if not h.incomplete]
        assert done and all(h.state.value == "pending" for h in done)  # reviewable as they were
        assert type(read_log(path)[0][-2]) is End or any(
            type(r) is End for r in read_log(path)[0])  # the cut is recorded as interrupted
    finally:
        session.log.close()
    assert (demo_repo / "calc.py").read_text() == CALC  # nothing was written by the kill


def test_kill_9_mid_accept_loses_nothing_accepted_and_the_session_resumes(demo_repo):
    (demo_repo / "b.py").write_text("def b(a, b):\n    return a\n")
    git(demo_repo, "add", "-A")
    git(demo_repo, "commit", "-qm", "b")
    answer = CALC_ANSWER + "\nb.py\n```python\n<<<<<<< SEARCH\ndef b(a, b):\n=======\n" \
        "def b(x, y):\n>>>>>>> REPLACE\n```\n"
    with ServerThread(replay=answer) as server:
        proc = steer(demo_repo, "run", "type hints", "-f", "calc.py", "-f", "b.py", "--base-url",
                     server.base_url, "--model", "replay", "--format", "search_replace",
                     "--accept", "all", "-q", env={"STEER_STOP_AT": "accept:after:b.py"})
        wait_stopped(proc)  # b.py is written, calc.py not yet, nothing committed
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    store = SessionStore(demo_repo)
    sid = store.ids()[0]
    assert "def b(x, y):" in (demo_repo / "b.py").read_text()
    session = take_over(demo_repo, sid)  # the journal completes the accept first
    try:
        calc = (demo_repo / "calc.py").read_text()
        assert "def add(a: float, b: float) -> float:" in calc  # accepted: never lost
        assert "def b(x, y):" in (demo_repo / "b.py").read_text()
        assert session.turn.state == "done"
        # what the accept wrote is on disk: nothing of it is left to review twice
        assert not [h for h in session.pending.hunks if h.state.value == "pending"]
    finally:
        session.log.close()
    undo = subprocess.run([sys.executable, "-m", "app", "undo"], cwd=demo_repo,
                          env={**os.environ, "PYTHONPATH": str(HERE)}, capture_output=True,
                          text=True)
    assert undo.returncode == 0, undo.stderr
    assert (demo_repo / "calc.py").read_text() == CALC


def test_a_killed_run_is_continued_by_steer_run_resume(demo_repo):
    main = ("calc.py\n```python\n<<<<<<< SEARCH\ndef main():\n=======\ndef main() -> None:\n"
            ">>>>>>> REPLACE\n```\n")
    with ServerThread(replay=[LONG, main], rate=200) as server:
        proc = steer(demo_repo, "run", "rename", "-f", "calc.py", "--base-url", server.base_url,
                     "--model", "replay", "--format", "search_replace", "-q")
        store = SessionStore(demo_repo)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
                store.ids() and len(saved_text(store.log_path(store.ids()[0]))) > 200):
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        sid = store.ids()[0]
        out = steer(demo_repo, "run", "go on", "--resume", sid[-4:], "--base-url",
                    server.base_url, "--model", "replay", "--format", "search_replace", "-q",
                    "--json")
        stdout, stderr = out.communicate(timeout=120)
    assert out.returncode == 0, stderr
    report = json.loads(stdout)
    assert report["session"] == sid
    turns = [r for r in read_log(store.log_path(sid))[0] if type(r) is TurnRec]
    assert [t.kind for t in turns] == ["ask", "follow-up"]
    assert "I interrupted your answer" in turns[1].content
    info = json.loads(subprocess.run([sys.executable, "-m", "app", "sessions", "--json"],
                                     cwd=demo_repo, env={**os.environ, "PYTHONPATH": str(HERE)},
                                     capture_output=True, text=True).stdout)
    assert [(i["id"], i["turns"], i["first"]) for i in info] == [(sid, 2, "rename")]
