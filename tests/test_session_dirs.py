"""Where sessions are saved, attacked: a log copied in from another repository is refused,
not resumed; a session directory that is a symlink into the working tree is caught by its
real path, and no session file is written among the user's files. The real CLI in a
subprocess, real git repositories, a real server on 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SRC, git, init_repo, sr

from app.core.conversation import resume
from app.core.conversation.session import Session
from app.core.disk.workspace import Workspace
from app.core.storage.records import SessionError
from app.core.storage.store import SessionStore, store_dir
from app.providers.openai_chat import OpenAIChat
from app.server.chat_server import ServerThread

STEER = [sys.executable, "-c", "import sys; from app.cli import main; sys.exit(main())"]
ANSWER = "One change.\n\n" + sr("f.txt", "line 3\n", "line three\n")


def steer(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run([*STEER, *args], cwd=root, env=env, capture_output=True, text=True,
                          timeout=120)


def run_args(server: object, *extra: str) -> list[str]:
    return ["run", "edit it", "-f", "f.txt", "--base-url", server.base_url,  # type: ignore[attr-defined]
            "--model", "replay", "--format", "search_replace", *extra]


def test_a_session_log_copied_in_from_another_repository_is_refused(tmp_path):
    a = init_repo(tmp_path / "a", {"f.txt": SRC})
    b = init_repo(tmp_path / "b", {"f.txt": SRC})
    with ServerThread(replay=ANSWER) as server:
        made = steer(a, *run_args(server))
        assert made.returncode == 0, made.stderr
        sid = made.stderr.split("steer: session ")[1].split()[0]
        # the user copies a's log into b's store (same name, another repository's bases)
        src = SessionStore(a).log_path(sid)
        dst = SessionStore(b).log_path(sid)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dst)
        before = dst.read_bytes()
        out = steer(b, *run_args(server, "--resume", sid, "--accept", "all"))
    assert out.returncode == 2, out.stderr
    assert f"session {sid} was saved for {a}, not for {b}" in out.stderr
    assert "Traceback" not in out.stderr
    assert len(server.stats.bodies) == 1  # nothing was asked in b's name
    assert dst.read_bytes() == before  # the copied log is left as it was
    assert git(b, "status", "--porcelain") == "" and (b / "f.txt").read_text() == SRC


async def test_resume_refuses_a_foreign_log_before_it_replays_anything(tmp_path):
    a = init_repo(tmp_path / "a", {"f.txt": SRC})
    b = init_repo(tmp_path / "b", {"f.txt": SRC})
    with ServerThread(replay=ANSWER) as server:
        s = Session(Workspace(a), OpenAIChat(server.base_url, "replay"), fmt="search_replace",
                    context=["f.txt"])
        log = resume.start(s, SessionStore(a))
        await s.ask("edit it")
        await s.aclose()
    shutil.copytree(SessionStore(a).dir, SessionStore(b).dir)
    other = Session(Workspace(b), OpenAIChat("http://127.0.0.1:9/v1", "m"))
    with pytest.raises(SessionError, match="steer resumes a session only in its own repository"):
        resume.resume(other, SessionStore(b), log.id)
    assert other.turns == [] and other.log is None
    with pytest.raises(SessionError, match="was saved for"):
        SessionStore(b).fork(log.id)
    assert SessionStore(b).ids() == [log.id]  # no fork was written


@pytest.mark.parametrize("link", ["sessions", "repository"])
def test_a_session_directory_linked_into_the_tree_is_caught_by_its_real_path(tmp_path, link):
    repo = init_repo(tmp_path / "r", {"f.txt": SRC})
    inside = repo / "notes"  # an untracked folder of the user's, in the working tree
    inside.mkdir()
    (inside / "mine.txt").write_text("mine\n")
    state = store_dir(repo)
    target = state.parent if link == "sessions" else state
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(inside, target_is_directory=True)
    with ServerThread(replay=ANSWER) as server:
        out = steer(repo, *run_args(server, "--accept", "all"))
        assert out.returncode == 2, out.stderr
        assert "is inside the working tree" in out.stderr and "--no-save" in out.stderr
        assert len(server.stats.bodies) == 0  # refused before anything was asked
        assert sorted(p.name for p in inside.rglob("*")) == ["mine.txt"]  # nothing written there
        assert (repo / "f.txt").read_text() == SRC
        unsaved = steer(repo, *run_args(server, "--accept", "all", "--no-save"))
    assert unsaved.returncode == 0, unsaved.stderr
    assert (repo / "f.txt").read_text() == SRC.replace("line 3\n", "line three\n")
    assert sorted(p.name for p in inside.rglob("*")) == ["mine.txt"]
