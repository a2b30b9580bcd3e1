"""A model that cannot look files up (the embedded one, a server that refused `tools`, or
`tools = false`) is shown the top-ranked files whole: without `-f` the file to edit was not
in the request, and the model answered by imitating the map. Real repositories, the real
map builder, `steer run` against a real server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import init_repo

from app.core.knowledge.service import ATTACH_SHARE, BYTES_PER_TOKEN, Knowledge
from app.server.chat_server import ServerThread

NET = "import socket\n\nTIMEOUT = 30\n\n\ndef connect(host):\n    return socket.create_connection((host, 80), TIMEOUT)\n"
NET60 = NET.replace("TIMEOUT = 30", "TIMEOUT = 60")
UTIL = "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n"


def built(root: Path) -> Knowledge:
    know = Knowledge(root, cache=False).start()
    deadline = time.monotonic() + 60  # a generous hang guard, not a timing bound
    while not know.builder.status().complete:
        assert time.monotonic() < deadline, "the map never finished"
        time.sleep(0.05)
    return know


def test_a_tiny_repository_is_attached_whole_but_never_its_secrets_or_the_context(tmp_path):
    root = init_repo(tmp_path / "r", {"net.py": NET, "util.py": UTIL, ".env": "KEY=x\n",
                                      "empty.py": "", "picked.py": "x = 1\n"})
    know = built(root)
    try:
        got = know.attach("Change TIMEOUT from 30 to 60.", ["picked.py"], 8192)
        assert set(got) == {"net.py", "util.py"}
        assert got[0] == "net.py"  # the map's order: the file defining TIMEOUT first
        know.drop("util.py")
        assert know.attach("Change TIMEOUT from 30 to 60.", ["picked.py"], 8192) == ["net.py"]
    finally:
        know.close()


def test_what_is_attached_fits_the_share_of_the_window_left(tmp_path):
    big = "".join(f"ROW_{i} = {i}\n" for i in range(400))  # ~5 KB
    root = init_repo(tmp_path / "r", {"net.py": NET, "big.py": big, "util.py": UTIL})
    know = built(root)
    try:
        window = 4096  # 1/4 of it: 1024 tokens, ~4 KB: big.py does not fit, the others do
        room = window // ATTACH_SHARE * BYTES_PER_TOKEN
        assert len(big) > room > len(NET) + len(UTIL)
        assert set(know.attach("use ROW_3 in connect", [], window)) == {"net.py", "util.py"}
        # what the request shows already comes off the room
        assert know.attach("use ROW_3 in connect", [], window, shown_bytes=room - len(UTIL)) \
            == ["util.py"]
    finally:
        know.close()


def _steer(root: Path, server, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    config = tmp_path / "cfg"
    (config / "steer").mkdir(parents=True, exist_ok=True)
    (config / "steer" / "config.toml").write_text("tools = false\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
           "XDG_CONFIG_HOME": str(config)}
    cmd = [sys.executable, "-c", "import sys; from app.cli import main; sys.exit(main())", "run",
           "Change TIMEOUT from 30 to 60.", "--base-url", server.base_url, "--model", "replay",
           "--format", "whole", *extra]
    return subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=120)


def test_steer_run_without_look_ups_or_f_shows_the_file_and_its_answer_is_read(tmp_path):
    """The issue as it was seen: no `-f`, a model without look-ups, and it answers with the
    whole file in a block that names none. Now the file is in the request, the answer is a
    proposal for it (flagged as inferred), and the run says what it attached."""
    root = init_repo(tmp_path / "r", {"net.py": NET, "util.py": UTIL})
    answer = "Here:\n\n```python\n" + NET60 + "```\n"
    with ServerThread(replay=answer) as server:
        out = _steer(root, server, tmp_path)
        bodies = server.stats.bodies
    assert out.returncode == 0, out.stderr
    sent = json.dumps(bodies[-1]["messages"])
    assert "TIMEOUT = 30" in sent and "return max(lo" in sent  # both files, whole
    assert "tools" not in bodies[-1]
    assert "steer: attached net.py, util.py (the model cannot look files up" in out.stderr
    assert "-TIMEOUT = 30\n+TIMEOUT = 60\n" in out.stdout
    assert "file inferred: net.py" in out.stderr
    assert (root / "net.py").read_text() == NET  # nothing written without --accept


def test_a_model_that_can_look_files_up_gets_no_attachment(tmp_path):
    root = init_repo(tmp_path / "r", {"net.py": NET, "util.py": UTIL})
    config = tmp_path / "cfg"
    (config / "steer").mkdir(parents=True)
    (config / "steer" / "config.toml").write_text("tools = true\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
           "XDG_CONFIG_HOME": str(config)}
    with ServerThread(replay="Nothing to change.\n") as server:
        cmd = [sys.executable, "-c", "import sys; from app.cli import main; sys.exit(main())",
               "run", "Change TIMEOUT from 30 to 60.", "--base-url", server.base_url,
               "--model", "replay"]
        out = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True,
                             timeout=120)
        bodies = server.stats.bodies
    assert out.returncode == 0, out.stderr
    assert "attached" not in out.stderr
    assert "return max(lo" not in json.dumps(bodies[0]["messages"])  # the map names clamp only
