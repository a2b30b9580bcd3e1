"""The review tells the truth in a real terminal (issue 30): the real `steer` in tmux at
160×45 and 80×24, against `steer serve --replay` on 127.0.0.1, keys sent as a terminal
sends them. Line mode with nothing picked writes nothing; only the marked lines are written;
after a redirect, Accept all writes only the redirected answer's hunks; a full repaint
changes no cell."""

from __future__ import annotations

import subprocess
import time

import pytest
from test_tmux import STEER, Tmux

from app.bench.demo import CALC, CALC_ANSWER, SUB_ANSWER
from app.server.generation import split_tokens

pytestmark = [pytest.mark.tmux]
# inside the answer's second block (div), where it stops until redirected
STALL = len(split_tokens(CALC_ANSWER[: CALC_ANSWER.index("if b == 0:") + len("if b == 0:\n")]))


def _serve(tmp_path, *answers: str, extra: tuple[str, ...] = ()):
    args = [STEER, "serve", "--rate", "400", "--port", "0", *extra]
    for i, a in enumerate(answers):
        f = tmp_path / f"answer{i}.txt"
        f.write_text(a)
        args += ["--replay", str(f)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert "listening on http://127.0.0.1:" in line, line
    return proc, line.rsplit(" ", 1)[-1].strip()


def _start(tmux: Tmux, demo, url: str, tmp_path, w: int, h: int) -> None:
    env = (f"XDG_CONFIG_HOME={tmp_path}/cfg XDG_STATE_HOME={tmp_path}/state TERM=xterm-256color "
           "EDITOR= VISUAL=")
    tmux.run("new-session", "-d", "-s", tmux.name, "-x", str(w), "-y", str(h),
             f"cd {demo} && env -u COLUMNS -u LINES {env} {STEER} --base-url {url} "
             "--model replay --format search_replace -f calc.py; sleep 5")
    tmux.run("resize-window", "-t", tmux.name, "-x", str(w), "-y", str(h))
    tmux.wait_for("Ask for a change")


def _settled(tmux: Tmux) -> str:
    """The screen once it has stopped changing (what the last key did is all drawn): an
    event awaited, not a time guessed, so a loaded machine only makes it slower."""
    last, deadline = tmux.screen(), time.monotonic() + 20
    while time.monotonic() < deadline:
        time.sleep(0.3)
        now = tmux.screen()
        if now == last:
            return now
        last = now
    raise AssertionError(f"the screen never settled:\n{last}")


def _repaint_changes_nothing(tmux: Tmux, w: int, h: int, *toasts: str) -> None:
    """A full repaint (the window resized and back) changes no cell. The `toasts` shown go
    first: one expiring between the two pictures would be a difference of the clock's."""
    deadline = time.monotonic() + 30
    while any(t in tmux.screen() for t in toasts) and time.monotonic() < deadline:
        time.sleep(0.2)
    before = _settled(tmux)
    tmux.run("resize-window", "-t", tmux.name, "-x", str(w + 1), "-y", str(h))
    deadline = time.monotonic() + 20
    while tmux.screen() == before and time.monotonic() < deadline:  # drawn at the other width
        time.sleep(0.1)
    tmux.run("resize-window", "-t", tmux.name, "-x", str(w), "-y", str(h))
    assert _settled(tmux) == before


@pytest.mark.parametrize("size", [(160, 45), (80, 24)])
def test_line_mode_writes_only_what_is_marked(demo, tmp_path, size):
    w, h = size
    proc, url = _serve(tmp_path, CALC_ANSWER)
    tmux = Tmux(f"lines{w}")
    try:
        _start(tmux, demo, url, tmp_path, w, h)
        tmux.keys("add type hints")
        tmux.keys("Enter")
        tmux.wait_for("· done ·")
        tmux.keys("Tab")
        tmux.wait_for("◆ reviewing")
        tmux.keys("v")
        tmux.wait_for("Take picked")
        tmux.keys("y")  # nothing marked
        tmux.wait_for("Nothing picked")
        assert (demo / "calc.py").read_text() == CALC
        _repaint_changes_nothing(tmux, w, h, "Nothing picked")
        tmux.keys("Space")  # "- def add(a, b):" marked, and the cursor moves down
        tmux.keys("Space")  # "+ def add(a: float, ...)" marked
        tmux.wait_for("2 lines picked" if w >= 160 else "Take picked")
        tmux.keys("y")
        deadline = time.monotonic() + 15
        while (demo / "calc.py").read_text() == CALC and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (demo / "calc.py").read_text() == CALC.replace(
            "def add(a, b):", "def add(a: float, b: float) -> float:")
        _repaint_changes_nothing(tmux, w, h, "→ calc.py")
    finally:
        tmux.kill()
        proc.terminate()
        proc.wait(10)


def test_accept_all_after_a_redirect_writes_only_the_redirected_answer(demo, tmp_path):
    proc, url = _serve(tmp_path, CALC_ANSWER, SUB_ANSWER, extra=("--stall-after", str(STALL)))
    tmux = Tmux("redirect")
    try:
        _start(tmux, demo, url, tmp_path, 160, 45)
        tmux.keys("add hints to every function")
        tmux.keys("Enter")
        tmux.wait_for("#1 pending")  # add() is in; the answer stops inside div()
        tmux.keys("only touch sub please")
        tmux.keys("Enter")
        tmux.wait_for("Now sub, as asked.", "· done ·")
        tmux.wait_for("before your redirect")
        tmux.keys("Tab")
        tmux.wait_for("◆ reviewing")
        tmux.keys("A")
        deadline = time.monotonic() + 15
        while "def sub(a: float" not in (demo / "calc.py").read_text() and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        text = (demo / "calc.py").read_text()
        assert "def sub(a: float, b: float) -> float:" in text
        assert "def add(a, b):" in text and "def div(a, b):" in text  # left: before the redirect
        _repaint_changes_nothing(tmux, 160, 45, "→ calc.py")
    finally:
        tmux.kill()
        proc.terminate()
        proc.wait(10)
