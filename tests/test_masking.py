"""Secrets masked everywhere: a real key value in the environment (and one under a variable
of any name, named by the config's api_key_env) appears nowhere steer writes: not in the
streamed answer on stderr, the diff on stdout, --json, the session files, nor the message
about an agent that printed it on its stderr and exited. The real CLI in a subprocess, a
real server on 127.0.0.1 that sends the key back in its answer, cut across tokens."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SRC, git, init_repo, sr
from hypothesis import given
from hypothesis import strategies as st

from app.core.text.masking import MASK, StreamMask, env_secrets, mask
from app.server.chat_server import ServerThread
from app.server.generation import split_tokens

STEER = [sys.executable, "-c", "import sys; from app.cli import main; sys.exit(main())"]
AGENT = Path(__file__).parent / "acp_agent.py"
KEY = "sk-live-7Qm2Xv9Lp4Rt8Wz1Kc6Nd3Hj5Bf0Gy"
ODD = "qv8T2mWk9Lr4ZpX7"  # a key under a variable whose name says nothing (api_key_env)


def leaking(key: str) -> str:
    """An answer that quotes the key in its prose and writes it into a file."""
    return (f"I used your key {key} to check.\n\n" + sr("f.txt", "line 3\n", f"TOKEN = '{key}'\n")
            + f"\nRemember: {key}\n")


def steer(root: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    e = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), **env}
    return subprocess.run([*STEER, *args], cwd=root, env=e, capture_output=True, text=True,
                          timeout=120)


def saved_files() -> str:
    state = Path(os.environ["XDG_STATE_HOME"])
    return "".join(p.read_text(errors="replace") for p in state.rglob("*") if p.is_file())


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "r", {"f.txt": SRC})


def test_the_answer_is_cut_through_the_key_so_the_stream_must_hold_it_back():
    tokens = split_tokens(leaking(KEY))
    assert not any(KEY in t for t in tokens)  # the key never arrives in one piece


@pytest.mark.parametrize("json_out", [False, True])
def test_a_key_in_the_answer_is_masked_on_stderr_stdout_json_and_in_the_session(repo, json_out):
    with ServerThread(replay=leaking(KEY), token=KEY) as server:
        out = steer(repo, "run", "check", "-f", "f.txt", "--base-url", server.base_url,
                    "--model", "m", "--format", "search_replace",
                    *(["--json"] if json_out else []), env={"STEER_API_KEY": KEY})
    assert out.returncode == 0, out.stderr
    assert server.stats.headers[0]["authorization"] == f"Bearer {KEY}"  # it was the real key
    everything = out.stdout + out.stderr + saved_files()
    assert KEY not in everything
    assert not any(KEY[:i] in everything for i in range(12, len(KEY)))  # nor a part of it
    assert f"I used your key {MASK} to check." in out.stderr
    assert f"Remember: {MASK}" in out.stderr
    if json_out:
        report = json.loads(out.stdout)
        assert MASK in json.dumps(report)
    else:
        assert f"+TOKEN = '{MASK}'" in out.stdout
    assert git(repo, "status", "--porcelain") == ""


def test_a_key_under_a_variable_of_any_name_is_masked_too(repo, tmp_path):
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "steer"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text('api_key_env = "LLM_CRED"\n')
    assert ODD not in env_secrets({"LLM_CRED": ODD})  # its name says nothing
    with ServerThread(replay=leaking(ODD), token=ODD) as server:
        out = steer(repo, "run", "check", "-f", "f.txt", "--base-url", server.base_url,
                    "--model", "m", "--format", "search_replace", "--json",
                    env={"LLM_CRED": ODD})
    assert out.returncode == 0, out.stderr
    assert ODD not in out.stdout + out.stderr + saved_files()
    assert f"I used your key {MASK} to check." in out.stderr


def test_an_agent_that_prints_the_key_on_stderr_and_dies_has_it_masked(repo, tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [[{"stderr": f"auth failed for key {KEY}"},
                                             {"say": f"my key is {KEY}"}, {"die": True}]],
                                  "chunk": 5}))
    agent = f"{sys.executable} {AGENT} {script}"
    out = steer(repo, "run", "go", "--agent", agent, "--json", env={"OPENAI_API_KEY": KEY})
    assert out.returncode == 3, out.stderr
    report = json.loads(out.stdout)
    assert "the agent was killed by signal 9" in report["error"]["message"]
    assert f"it said: auth failed for key {MASK}" in report["error"]["message"]
    assert f"it said: auth failed for key {MASK}" in out.stderr
    assert f"my key is {MASK}" in out.stderr
    assert KEY not in out.stdout + out.stderr + saved_files()


# -- the stream mask, property-tested: however the text is cut --------------------------------
SECRETS = ["sk-abcdefgh12", "sk-abcdXYZW99", "tok_secret_value"]
pieces = st.lists(st.sampled_from(["sk-", "abc", "defgh12", "sk-abcd", "XYZW99", "tok_", "s",
                                   "secret_value", " ", "x", "\n", *SECRETS]), max_size=30)


@given(pieces, st.data())
def test_what_the_stream_mask_lets_out_never_holds_a_key_however_it_is_cut(parts, data):
    text = "".join(parts)
    cuts = sorted(data.draw(st.sets(st.integers(0, len(text)), max_size=12)))
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    m = StreamMask(SECRETS)
    shown = ""
    for c in chunks:
        shown += m.feed(c)
        assert not any(s in shown for s in SECRETS)
        # at no moment does the part of a key a write cut show: what is out is always the
        # start of the whole text masked
        assert mask(text, SECRETS).startswith(shown)
    shown += m.end()
    assert shown == mask(text, SECRETS)  # nothing lost, nothing added: the text, masked


def test_the_stream_mask_holds_nothing_back_when_no_key_could_begin():
    m = StreamMask(["sk-abcdefgh12"])
    assert m.feed("hello world\n") == "hello world\n"
    assert m.feed("ends with sk-ab") == "ends with "  # could be the key: held
    assert m.feed("cdefgh12!") == f"{MASK}!"
    assert m.feed("sk-abX") == "sk-abX"  # not the key after all: all of it at once
    assert m.end() == ""


def test_on_a_terminal_no_frame_of_the_live_line_shows_the_start_of_the_key(repo):
    """On a terminal the line being written is redrawn every frame, with the status after
    it: a frame drawn while the key is half streamed must not show its first half. Every
    byte written to a real pseudo-terminal is read back."""
    import pty

    master, slave = pty.openpty()
    answer = f"Checking with {KEY} now.\n" + sr("f.txt", "line 3\n", "line three\n")
    with ServerThread(replay=answer, rate=40, token=KEY) as server:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
               "STEER_API_KEY": KEY}
        proc = subprocess.Popen([*STEER, "run", "check", "-f", "f.txt", "--base-url",
                                 server.base_url, "--model", "m", "--format", "search_replace"],
                                cwd=repo, env=env, stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        raw = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            raw += chunk
        proc.communicate(timeout=60)
        os.close(master)
    text = raw.decode("utf-8", "replace")
    assert proc.returncode == 0, text
    assert f"Checking with {MASK} now." in text
    assert KEY[:6] not in text and KEY not in text


def test_a_key_json_would_escape_is_masked_in_the_report_too(repo):
    """A quote or a backslash in a key: --json writes it escaped, where no text search for
    the key finds it; the report is masked before it is serialised."""
    odd = 'sk-"quo\\ted-7Qm2Xv9Lp4'
    with ServerThread(replay=leaking(odd), token=odd) as server:
        out = steer(repo, "run", "check", "-f", "f.txt", "--base-url", server.base_url,
                    "--model", "m", "--format", "search_replace", "--json",
                    env={"STEER_API_KEY": odd})
    assert out.returncode == 0, out.stderr
    assert json.dumps(odd)[1:-1] not in out.stdout and odd not in out.stdout + out.stderr
    report = json.loads(out.stdout)
    assert report["explanation"].startswith(f"I used your key {MASK} to check.")
