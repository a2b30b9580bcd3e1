"""End to end in a real terminal: the real `steer` in tmux, against `steer serve` on
127.0.0.1, driven with send-keys and read with capture-pane."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.bench.demo import CALC, CALC_ANSWER

pytestmark = [pytest.mark.tmux,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]
STEER = str(Path(sys.executable).parent / "steer")


class Tmux:
    def __init__(self, name: str) -> None:
        self.sock = f"steer-test-{os.getpid()}-{name}"
        self.name = name

    def run(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.sock, *args], check=True, capture_output=True,
                              text=True).stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.name)

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", self.name, *keys)

    def wait_for(self, *texts: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if all(t in screen for t in texts):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"never saw {texts!r} on screen:\n{screen}")
            time.sleep(0.1)

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.sock, "kill-server"], capture_output=True)


@pytest.fixture
def served(tmp_path):
    answer = tmp_path / "answer.txt"
    answer.write_text(CALC_ANSWER)
    proc = subprocess.Popen([STEER, "serve", "--replay", str(answer), "--rate", "400", "--port", "0"],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert "listening on http://127.0.0.1:" in line, line
    yield line.rsplit(" ", 1)[-1].strip()
    proc.terminate()
    proc.wait(10)


def test_ask_watch_accept_reject_in_a_real_terminal(demo, served, tmp_path):
    env = (f"XDG_CONFIG_HOME={tmp_path}/cfg XDG_STATE_HOME={tmp_path}/state TERM=xterm-256color "
           f"EDITOR= VISUAL=")
    tmux = Tmux("e2e")
    tmux.run("new-session", "-d", "-s", "e2e", "-x", "160", "-y", "48",
             f"cd {demo} && env -u COLUMNS -u LINES {env} {STEER} --base-url {served} --model replay -f calc.py; sleep 5")
    tmux.run("resize-window", "-t", "e2e", "-x", "160", "-y", "48")
    try:
        tmux.wait_for("Ask for a change", "calc.py")
        tmux.keys("add type hints and guard div")
        tmux.keys("Enter")
        screen = tmux.wait_for("#3 pending", "· done ·")
        assert "def div(a: float, b: float) -> float:" in screen
        assert "The division now fails loudly" in screen  # the explanation
        assert (demo / "calc.py").read_text() == CALC  # nothing written before an accept
        tmux.wait_for("3 hunks to review: Tab")  # the keys are still the prompt's: it says so
        assert "✎ typing" in tmux.screen()
        tmux.keys("Tab")  # the user goes to the review
        tmux.wait_for("◆ reviewing")
        tmux.keys("y")
        tmux.wait_for("#1 accepted")
        text = (demo / "calc.py").read_text()
        assert "def add(a: float, b: float) -> float:" in text and "def div(a, b):" in text
        tmux.keys("n")
        screen = tmux.wait_for("#2 rejected", "1 accepted")
        tmux.keys("u")
        tmux.wait_for("#1 pending")
        assert (demo / "calc.py").read_text() == CALC
        tmux.keys("C-q")
    finally:
        tmux.kill()


def test_a_file_the_answer_left_unchanged_is_drawn_whole_in_a_real_terminal(demo, tmp_path):
    """The diff pane repaints only rows that changed; going from its empty message to a file
    with notes and no hunk must not leave the message or a row of the stream on screen
    (a headless screenshot re-renders everything and cannot see that; a terminal can)."""
    answer = tmp_path / "answer.txt"
    answer.write_text("calc.py\n```python\n" + CALC.split("\n\n")[0] + "\n```\n")  # a fragment
    proc = subprocess.Popen([STEER, "serve", "--replay", str(answer), "--rate", "400",
                             "--port", "0"], stdout=subprocess.PIPE, text=True)
    url = proc.stdout.readline().rsplit(" ", 1)[-1].strip()
    env = (f"XDG_CONFIG_HOME={tmp_path}/cfg XDG_STATE_HOME={tmp_path}/state TERM=xterm-256color "
           f"EDITOR= VISUAL=")
    tmux = Tmux("unchanged")
    tmux.run("new-session", "-d", "-s", "unchanged", "-x", "160", "-y", "48",
             f"cd {demo} && env -u COLUMNS -u LINES {env} {STEER} --base-url {url} "
             f"--model replay --format whole -f calc.py; sleep 5")
    try:
        tmux.wait_for("Ask for a change", "calc.py")
        tmux.keys("add a docstring")
        tmux.keys("Enter")
        screen = tmux.wait_for("· done ·", "the answer changed nothing")
        time.sleep(0.5)
        screen = tmux.screen()
        assert "Nothing pending yet" not in screen, screen
        assert screen.count("already on disk: the file holds what the answer proposes") == 1, screen
        tmux.keys("C-q")
    finally:
        tmux.kill()
        proc.terminate()
        proc.wait(10)
