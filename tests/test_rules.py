"""The project's rules in every request (app/core/conversation/rules.py): AGENTS.md at the
root and in the folders of the files shown (nearer ones later), CLAUDE.md / GEMINI.md /
CONVENTIONS.md where a folder has no AGENTS.md, the user's own file; one item of the
conversation, the same bytes while unchanged and a new item appended when they change.
The real CLI against a real server on 127.0.0.1, the real Session, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import SRC, init_repo, sr

from app.core.conversation import rules
from app.core.conversation.rules import ProjectRules
from app.core.conversation.session import Session
from app.core.disk.workspace import Workspace
from app.providers.openai_chat import OpenAIChat
from app.server.chat_server import ChatServer, ServerThread

STEER = [sys.executable, "-c", "import sys; from app.cli import main; sys.exit(main())"]
HERE = Path(__file__).resolve().parents[1]
ANSWER = "One change.\n\n" + sr("f.txt", "line 3\n", "line three\n")
RULE = "Always write tests with pytest. Never use tabs.\n"


def steer(repo: Path, server: ChatServer, *extra: str, config: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(HERE), "XDG_CONFIG_HOME": str(config),
           "XDG_STATE_HOME": str(config.parent / "state")}
    return subprocess.run([*STEER, "run", "edit it", "-f", "f.txt", "--base-url", server.base_url,
                           "--model", "replay", "--format", "search_replace", "--quiet",
                           "--no-save", *extra], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=300)


def user_texts(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


def test_a_root_agents_md_is_in_the_first_request_and_the_run_names_it(tmp_path):
    repo = init_repo(tmp_path / "r", {"f.txt": SRC, "AGENTS.md": RULE})
    with ServerThread(replay=ANSWER) as server:
        out = steer(repo, server, "--json", config=tmp_path / "config")
        [body] = server.stats.bodies
    assert out.returncode == 0, out.stderr
    texts = user_texts(body)
    # its own item, before the message with the instruction (which comes last)
    assert len(texts) == 2 and RULE.strip() in texts[0] and "edit it" in texts[-1]
    assert texts[0].startswith("The project's rules") and "## AGENTS.md" in texts[0]
    assert RULE.strip() not in texts[-1] and RULE.strip() not in body["messages"][0]["content"]
    assert "steer: with the rules of AGENTS.md" in out.stderr
    assert json.loads(out.stdout)["rules"] == ["AGENTS.md"]


def test_no_rules_and_the_config_key_leave_them_out(tmp_path):
    repo = init_repo(tmp_path / "r", {"f.txt": SRC, "AGENTS.md": RULE})
    config = tmp_path / "config"
    (config / "steer").mkdir(parents=True)
    (config / "steer" / "AGENTS.md").write_text("My own rule: be brief.\n")
    with ServerThread(replay=[ANSWER] * 3) as server:
        flag = steer(repo, server, "--no-rules", config=config)
        (config / "steer" / "config.toml").write_text("rules = false\n")
        key = steer(repo, server, config=config)
        (config / "steer" / "config.toml").write_text("rules = true\n")
        on = steer(repo, server, config=config)
        bodies = list(server.stats.bodies)
    assert [o.returncode for o in (flag, key, on)] == [0, 0, 0], flag.stderr + key.stderr
    sent = [json.dumps(b["messages"]) for b in bodies]
    assert not any("Never use tabs" in s or "be brief" in s for s in sent[:2])
    assert "with the rules" not in flag.stderr + key.stderr
    assert "Never use tabs" in sent[2] and "be brief" in sent[2]
    assert "with the rules of ~/" in on.stderr or "with the rules of /" in on.stderr


def test_nested_rules_come_after_the_root_and_a_folder_without_agents_md_falls_back(tmp_path):
    root = init_repo(tmp_path / "r", {
        "AGENTS.md": "root rule\n", "CLAUDE.md": "not read: the root has AGENTS.md\n",
        "app/CLAUDE.md": "app rule (claude)\n", "app/core/AGENTS.md": "core rule\n",
        "app/core/x.py": "x = 1\n", "docs/GEMINI.md": "docs rule\n", "docs/CONVENTIONS.md": "no\n",
        "docs/guide.md": "# guide\n", "other/AGENTS.md": "never: no file shown under it\n",
        "other/y.py": "y = 1\n"})
    got = ProjectRules(Workspace(root)).read(["app/core/x.py", "docs/guide.md"])
    assert got.sources == ["AGENTS.md", "app/CLAUDE.md", "docs/GEMINI.md", "app/core/AGENTS.md"]
    order = [got.item.index(t) for t in ("root rule", "app rule", "docs rule", "core rule")]
    assert order == sorted(order)  # outer first: the nearest is read last and wins
    assert "not read" not in got.item and "never" not in got.item and "\nno\n" not in got.item
    assert "for files under app/core/" in got.item and "for the whole project" in got.item
    assert ProjectRules(Workspace(root)).sources(["app/core/x.py", "docs/guide.md"]) == got.sources


def test_the_personal_file_comes_first_and_a_long_file_is_cut_and_says_so(tmp_path):
    root = init_repo(tmp_path / "r", {"AGENTS.md": "A" * (rules.PER_FILE + 500) + "\n"})
    mine = tmp_path / "config" / "AGENTS.md"
    mine.parent.mkdir()
    mine.write_text("mine first\n")
    got = ProjectRules(Workspace(root), mine).read()
    assert got.sources == [str(mine), "AGENTS.md"]
    assert got.item.index("mine first") < got.item.index("AAAA")
    assert got.item.count("A" * 100) < (rules.PER_FILE + 500) // 100
    assert "(cut here: 500 more characters)" in got.item


def test_rules_files_that_are_not_plain_text_in_the_workspace_are_left_out_and_named(tmp_path):
    outside = tmp_path / "secret.md"
    outside.write_text("outside the workspace\n")
    root = init_repo(tmp_path / "r", {"a/AGENTS.md": b"\x00\x01binary", "a/x.py": "x\n",
                                      "b/x.py": "x\n", "c/x.py": "x\n"})
    os.symlink(outside, root / "AGENTS.md")
    os.mkfifo(root / "b" / "AGENTS.md")  # a reader that opened it would wait for a writer
    (root / "c" / "AGENTS.md").write_bytes(b"caf\xe9 in Latin-1\n")  # not UTF-8
    got: list[rules.Rules] = []
    reader = threading.Thread(target=lambda: got.append(
        ProjectRules(Workspace(root)).read(["a/x.py", "b/x.py", "c/x.py"])), daemon=True)
    reader.start()
    reader.join(120)  # a watchdog, not a time limit: a blocked read never returns
    assert got, "reading the rules blocked on the FIFO"
    [r] = got
    assert r.sources == [] and r.item == ""
    skipped = "\n".join(r.skipped)
    assert "AGENTS.md: refused AGENTS.md: a symlink leads outside the workspace" in skipped
    assert "a/AGENTS.md" in skipped and "binary" in skipped
    assert "b/AGENTS.md" in skipped and "c/AGENTS.md" in skipped
    assert "outside the workspace\n" not in r.item


@pytest.fixture
async def server():
    s = ChatServer(replay=[ANSWER.replace("line 3", f"line {n}").replace("line three", f"line {n}!")
                           for n in (3, 4, 5, 6)])
    await s.start()
    yield s
    await s.close()


async def test_the_rules_go_once_while_unchanged_and_a_change_is_appended(tmp_path, server):
    root = init_repo(tmp_path / "r", {"f.txt": SRC, "AGENTS.md": "rule one\n"})
    session = Session(Workspace(root), OpenAIChat(server.base_url, "replay"),
                      fmt="search_replace", context=["f.txt"])
    session.rules = ProjectRules(session.ws)

    async def ask(what: str) -> list[dict]:
        turn = await session.ask(what)
        assert turn.state == "done", turn.error
        session.review.accept_all()
        return server.stats.bodies[-1]["messages"]

    first = await ask("first")
    second = await ask("second")  # unchanged: not sent again
    (root / "AGENTS.md").write_text("rule two\n")
    third = await ask("third")  # changed: a new item, after everything sent before
    (root / "AGENTS.md").unlink()
    fourth = await ask("fourth")  # gone: said so, once
    for before, after in ((first, second), (second, third), (third, fourth)):
        assert after[:len(before)] == before  # the conversation only grows
    def told(msgs: list[dict]) -> list[str]:
        return [m["content"] for m in msgs if m["content"].startswith("The project's rules")]
    assert [("rule one" in t, "rule two" in t) for t in told(fourth)] == [(True, False), (False, True)]
    assert told(second) == told(first) and len(told(first)) == 1
    assert [m["content"] for m in fourth].count(rules.GONE) == 1
    assert session.sent.rules == rules.GONE
