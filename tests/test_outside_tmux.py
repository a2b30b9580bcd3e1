"""Outside text in a real terminal (DESIGN rule 12): the real `steer` in tmux, in a git
repository whose file names and lines are hostile, answered by `steer serve --replay` with
hostile prose. `capture-pane -e` shows exactly what reached the terminal: every escape
sequence in it is Textual's own styling, the window title is the one tmux had, the data
reads with its escapes shown, and a full repaint (the window one column wider and back)
changes no row — wide, combining and invisible characters take the cells the layout gave
them."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import init_repo, sr
from outside import HOSTILE, RED_NAME, SLUG, TITLE_NAME, WIDE, sgr_problems
from test_tmux import STEER, Tmux

from app.view.outside_text import name

pytestmark = [pytest.mark.tmux,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]

# the brief's own: t$'\e'']2;X'$'\a'' [slug] [/].py (the slash makes a folder of its start)
BRIEF_NAME = "t\x1b]2;X\x07 [slug] [/].py"
NAMES = [TITLE_NAME, RED_NAME, BRIEF_NAME, SLUG, "cjk 漢字テスト.py", "zwj 👨\u200d👩\u200d👧.txt",
         "comb e\u0301\u0301.txt", "\u0301lead.txt", "bidi \u202eevil.py", "zw\u200bsp.txt",
         "\ufeffbom.txt", "f\x0cf.txt", "c\rr.txt", "b\x08s.txt", "d\x7fl.txt"]
CALC = (f"def f():\n    s = '{HOSTILE}'\n    w = '{WIDE}'\n    c = '\u0301lead and 漢字 at the end 漢'\n"
        "    return 1\n")
ANSWER = (f"Prose {HOSTILE}\n\nWide {WIDE} and more words to wrap 漢字漢字漢字漢字漢字漢字 here\n\n"
          + sr("calc.py", "    return 1\n", f"    bad = '{HOSTILE} {WIDE}'\n    return 2\n")
          + "\n" + sr(SLUG, "x\n", "y\n")
          # the last words: what a narrow terminal (20x8) still shows of the conversation
          + "\nDone \x1b]2;PWNED\x07 \x1b[5mblink\x1b[0m 漢字 e\u0301 \x1b[2J.\n")


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, str]:
    root = init_repo(tmp_path / "hostile", {**{n: "x\n" for n in NAMES}, "calc.py": CALC})
    answer = tmp_path / "answer.txt"
    answer.write_bytes(ANSWER.encode())
    proc = subprocess.Popen([STEER, "serve", "--replay", str(answer), "--rate", "4000", "--port", "0"],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert "listening on http://127.0.0.1:" in line, line
    yield root, line.rsplit(" ", 1)[-1].strip()
    proc.terminate()
    proc.wait(10)


def settled(tmux: Tmux, quiet: float = 1.0, timeout: float = 30.0) -> str:
    """The screen (`capture-pane -e`) once its text has not changed for `quiet` seconds
    (the text: a blinking cursor changes only the attributes of its cell)."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        now = tmux.screen()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return tmux.run("capture-pane", "-e", "-p", "-t", tmux.name)
        time.sleep(0.1)
    raise AssertionError(f"the screen never settled:\n{last}")


@pytest.mark.parametrize("size", [(160, 48), (80, 24), (20, 8)])
def test_hostile_repository_model_and_prose_in_a_real_terminal(hostile, tmp_path, size):
    root, url = hostile
    w, h = size
    env = (f"XDG_CONFIG_HOME={tmp_path}/cfg XDG_STATE_HOME={tmp_path}/state TERM=xterm-256color "
           f"EDITOR= VISUAL=")
    tmux = Tmux(f"outside{w}")
    tmux.run("new-session", "-d", "-s", tmux.name, "-x", str(w), "-y", str(h),
             f"cd {root} && env -u COLUMNS -u LINES {env} {STEER} --base-url {url} --model replay "
             f"-f $'t\\e]2;PWNED\\a.txt' -f calc.py -f '{SLUG}'; sleep 30")
    tmux.run("resize-window", "-t", tmux.name, "-x", str(w), "-y", str(h))
    try:
        title = tmux.run("display", "-p", "-t", tmux.name, "#{pane_title}")
        tmux.wait_for("Ask for a" if w > 20 else "▊")
        settled(tmux)
        assert tmux.run("display", "-p", "-t", tmux.name, "#{pane_title}") == title
        tmux.keys("fix it")
        tmux.keys("Enter")
        time.sleep(1.0)
        settled(tmux)
        # the user goes to the review (the app never does): the prompt's blinking cursor
        # would differ between the two captures compared below
        tmux.keys("Tab")
        if w < 100:  # the tree is folded away: show it (Ctrl+T), names and all
            tmux.keys("C-t")
            time.sleep(0.3)
        before = settled(tmux)
        plain = tmux.screen()
        if w >= 160:
            for n in (TITLE_NAME, RED_NAME, "bidi \u202eevil.py", "f\x0cf.txt", "c\rr.txt",
                      "b\x08s.txt", "d\x7fl.txt", "zw\u200bsp.txt", "\ufeffbom.txt"):
                assert name(n) in plain, n
            for piece in ("a\\x1b]2;PWNED\\x07b", "\\u202eevil\\u202c", "· done ·", "#1 pending",
                          f"✎ {SLUG}", "漢字テスト", "t\\x1b]2;X\\x07 [slug] ["):
                assert piece in plain, piece
        # the first context file, even at 20 columns: its mark, and its name when there is
        # room for it whole (a line is cut after a whole word, an escape never in half)
        assert "Context: ◆" in plain
        if w >= 80:
            assert "Context: ◆ t\\x1b]2;PWNED\\x07.txt" in plain
        assert "\\x1" not in plain.replace("\\x1b", "").replace("\\x0", "")
        # nothing from the data reached the terminal as a sequence, nor set the title
        assert sgr_problems(before) == []
        assert tmux.run("display", "-p", "-t", tmux.name, "#{pane_title}") == title
        # a full repaint draws exactly what was there
        tmux.run("resize-window", "-t", tmux.name, "-x", str(w + 1), "-y", str(h))
        time.sleep(0.5)
        tmux.run("resize-window", "-t", tmux.name, "-x", str(w), "-y", str(h))
        after = settled(tmux)
        assert after.split("\n") == before.split("\n")
        tmux.keys("C-q")
    finally:
        tmux.kill()
