"""`steer run` says when it retries and when nothing arrives: the real CLI in a subprocess
against the real loopback server with injected faults, its stderr on a pipe (one line per
retry) and on a real pseudo-terminal (the live status line)."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import termios
from pathlib import Path

from conftest import SRC, init_repo
from test_cli import ANSWER, EXPECTED, STEER, run_args, served, steer

from app.core.events import Retrying
from app.view.status import retry_line


def test_a_retry_is_a_line_on_stderr_and_the_run_succeeds_when_the_server_recovers(tmp_path):
    repo = init_repo(tmp_path / "r", {"f.txt": SRC})
    with served(status=500, fail_first=1) as server:
        out = steer(repo, *run_args(server, "--accept", "all"))
        assert len(server.stats.requests) == 2  # one retry, no more
    assert out.returncode == 0, out.stderr
    assert "steer: HTTP 500: retrying 2/3 in 0.5 s\n" in out.stderr
    assert (repo / "f.txt").read_text() == EXPECTED


def test_retries_that_do_not_help_are_each_shown_and_the_error_says_what_to_do(tmp_path):
    repo = init_repo(tmp_path / "r", {"f.txt": "x\n"})
    with served(status=503) as server:
        out = steer(repo, *run_args(server))
        assert len(server.stats.requests) == 3
    assert out.returncode == 3
    lines = [ln for ln in out.stderr.splitlines() if "retrying" in ln]
    assert lines == ["steer: HTTP 503: retrying 2/3 in 0.5 s", "steer: HTTP 503: retrying 3/3 in 1 s"]
    assert "HTTP 503 from 127.0.0.1 (3 attempts): injected failure. The server failed: retry " \
           "in a moment, or use another endpoint; nothing was written" in out.stderr


def on_a_terminal(root: Path, *args: str) -> tuple[int, str]:
    """Run steer with its stderr on a pseudo-terminal; (exit code, what the terminal got)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 200, 0, 0))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "COLUMNS": "200"}
    proc = subprocess.Popen([*STEER, *args], cwd=root, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    got = bytearray()
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        got += data
    os.close(master)
    assert proc.stdout is not None
    proc.stdout.read()
    return proc.wait(timeout=60), got.decode("utf-8", "replace")


def test_the_live_status_line_counts_down_a_retry_then_counts_up_a_stall(tmp_path):
    repo = init_repo(tmp_path / "r", {"f.txt": SRC})
    # the first request gets a 503; the second streams 5 tokens, then nothing for 4.5 s
    with served(ANSWER, status=503, fail_first=1, stall_after=5, stall_seconds=4.5) as server:
        code, screen = on_a_terminal(repo, *run_args(server, "--stall-timeout", "30"))
        assert len(server.stats.requests) == 2
    assert retry_line(Retrying(2, 3, 0.5, "HTTP 503")) in screen  # the line kept above
    assert "connecting · retrying 2/3 in 0.5 s (HTTP 503)" in screen  # the status line
    assert "streaming · no data for 3 s" in screen and "streaming · no data for 4 s" in screen
    assert "1 retry (HTTP 503)" in screen  # the figures remember it
    assert code == 0, screen
