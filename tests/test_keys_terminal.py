"""The keys Pilot alone used to send, and pastes, through a real terminal: the real `steer` in
tmux against `steer serve --replay` on 127.0.0.1, keys sent with send-keys as a terminal
sends them, pastes as bytes (`tmux load-buffer FILE`, then `paste-buffer -p`: a bracketed
paste, its newlines sent as CR as a terminal sends them). Each flow checks what the user sees
and what the disk holds: the file, and the session's log in the state dir.

Esc mid-stream stops the answer; F1 over a dialog (the reject reason, the commit message)
shows the keys and closes back to it, what was typed there kept; F3
asks variants and `[` / `]` switch them; `e` runs a scripted $EDITOR with the terminal handed
over; Ctrl+B rewinds the files to before a turn (and `r` puts them back); pastes of 64 KiB
and 1 MiB arrive whole, as one paste, with the y, n and ESC inside them never read as keys,
and a paste into the review decides nothing.
(`v` + Space + `y` are driven in tests/test_review_tmux.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import git
from test_review_tmux import STALL, _settled
from test_tmux import STEER, Tmux
from test_variants_ui import V1, V2, V3

from app.bench.demo import CALC, CALC_ANSWER, SUB_ANSWER
from app.view.pastes import LIMIT, lines

pytestmark = [pytest.mark.tmux]
ROOT = Path(__file__).resolve().parents[1]  # the steer in tmux runs this checkout's code
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
ADD_HINTS = CALC.replace("def add(a, b):", "def add(a: float, b: float) -> float:")


def _serve(tmp_path: Path, *answers: str, extra: tuple[str, ...] = ()):
    args = [STEER, "serve", "--rate", "400", "--port", "0", *extra]
    for i, a in enumerate(answers):
        f = tmp_path / f"answer{i}.txt"
        f.write_text(a)
        args += ["--replay", str(f)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=ENV)
    line = proc.stdout.readline()
    assert "listening on http://127.0.0.1:" in line, line
    return proc, line.rsplit(" ", 1)[-1].strip()


def _start(tmux: Tmux, demo: Path, url: str, tmp_path: Path, editor: str = "",
           w: int = 160, h: int = 48) -> None:
    env = (f"PYTHONPATH={ROOT} XDG_CONFIG_HOME={tmp_path}/cfg XDG_STATE_HOME={tmp_path}/state "
           f"TERM=xterm-256color EDITOR={editor} VISUAL=")
    tmux.run("new-session", "-d", "-s", tmux.name, "-x", str(w), "-y", str(h),
             f"cd {demo} && env -u COLUMNS -u LINES {env} {STEER} --base-url {url} "
             "--model replay --format search_replace -f calc.py; sleep 5")
    tmux.run("resize-window", "-t", tmux.name, "-x", str(w), "-y", str(h))
    tmux.wait_for("Ask for a change", timeout=60)


def _stop(tmux: Tmux, proc: subprocess.Popen) -> None:
    tmux.kill()
    proc.terminate()
    proc.wait(10)


def records(tmp_path: Path) -> list[dict]:
    """The session's log, as the app has written it so far."""
    logs = list((tmp_path / "state" / "steer" / "sessions").glob("*/*.jsonl"))
    if not logs:
        return []
    assert len(logs) == 1, logs
    out = []
    for row in logs[0].read_text().splitlines():
        try:
            out.append(json.loads(row))
        except ValueError:  # a record being written
            break
    return out


def until(what, timeout: float = 30.0, why: str = "", tmux: Tmux | None = None):
    """`what()` once it is truthy, within `timeout` seconds (a generous deadline: the
    machine may be loaded; on failure, `tmux`'s screen as it was then)."""
    deadline = time.monotonic() + timeout
    while not (got := what()):
        if time.monotonic() > deadline:
            raise AssertionError(f"never: {why}" + (f"\n{tmux.screen()}" if tmux else ""))
        time.sleep(0.1)
    return got


def status(screen: str) -> str:
    """The status line (above the context line)."""
    rows = screen.splitlines()
    return rows[next(i for i, r in enumerate(rows) if r.startswith(" Context:")) - 1]


def in_status(tmux: Tmux, text: str, timeout: float = 30.0) -> str:
    """The screen once the status line says `text` (it is drawn a frame after the panes)."""
    def seen() -> str:
        screen = tmux.screen()
        return screen if text in status(screen) else ""
    return until(seen, timeout, why=f"{text!r} in the status line", tmux=tmux)


def disk(demo: Path) -> str:
    return (demo / "calc.py").read_text()


def test_esc_mid_stream_stops_the_answer(demo, tmp_path):
    proc, url = _serve(tmp_path, CALC_ANSWER, extra=("--stall-after", str(STALL)))
    tmux = Tmux("esc")
    try:
        _start(tmux, demo, url, tmp_path)
        tmux.keys("add type hints")
        tmux.keys("Enter")
        tmux.wait_for("#1 pending", "esc Stop")  # add() is in; the answer waits inside div()
        in_status(tmux, "streaming")
        tmux.keys("Escape")
        tmux.wait_for("■ interrupted")
        screen = in_status(tmux, "interrupted")
        assert "streaming" not in status(screen)
        assert "#1 pending" in screen and "esc Stop" not in screen  # kept, reviewable
        end = until(lambda: [r for r in records(tmp_path) if r["t"] == "end"], why="an end")
        assert end[0]["state"] == "interrupted"
        assert disk(demo) == CALC  # nothing written
        assert not any(r["t"] in ("accept", "reject") for r in records(tmp_path))
    finally:
        _stop(tmux, proc)


def test_f1_over_the_reject_reason_dialog_shows_help_and_closes_back_to_it(demo, tmp_path):
    proc, url = _serve(tmp_path, CALC_ANSWER)
    tmux = Tmux("f1")
    try:
        _start(tmux, demo, url, tmp_path)
        tmux.keys("add type hints")
        tmux.keys("Enter")
        tmux.wait_for("#3 pending", "· done ·")
        tmux.keys("Tab")
        tmux.wait_for("◆ reviewing")
        tmux.keys("R")
        tmux.wait_for("Reject hunk #1: why?")
        tmux.keys("F1")
        screen = tmux.wait_for("steer — keys", "Esc closes.")
        assert "reject the hunk and say why in one line" in screen
        tmux.keys("Escape")  # the help goes; the dialog is there again, its input the keys'
        until(lambda: "steer — keys" not in tmux.screen(), why="the help closed")
        screen = tmux.wait_for("Reject hunk #1: why?", "Enter rejects · Esc cancels")
        assert "#1 pending" in screen
        tmux.keys("keep the old name")
        tmux.wait_for("keep the old name")
        tmux.keys("Enter")
        tmux.wait_for("#1 rejected")
        screen = in_status(tmux, "0 accepted, 1 rejected")
        assert "Reject hunk #1: why?" not in screen
        reject = until(lambda: [r for r in records(tmp_path) if r["t"] == "reject"],
                       why="a reject record")
        assert reject == [{"t": "reject", "ids": [1], "reason": "keep the old name",
                           "mine": False}]
        assert disk(demo) == CALC
    finally:
        _stop(tmux, proc)


def test_f3_asks_variants_and_brackets_switch_them(demo, tmp_path):
    proc, url = _serve(tmp_path, V1, V2, V3)
    tmux = Tmux("f3")
    try:
        _start(tmux, demo, url, tmp_path)
        tmux.keys("type it")
        tmux.wait_for("type it")
        tmux.keys("F3")
        tmux.wait_for("▸[1 ✓", "2 ✓", "3 ✓", "[ ] switch", timeout=60)
        screen = in_status(tmux, "variant 1/3")
        assert all(f"Variant {w}." in screen for w in ("one", "two", "three"))  # a card each
        # typed in the prompt, [ and ] are text (rule 8)
        tmux.keys("[x]")
        tmux.wait_for("[x]")
        assert "variant 1/3" in status(tmux.screen())
        tmux.keys("C-u")
        until(lambda: "[x]" not in tmux.screen(), why="the prompt emptied")
        tmux.keys("Tab")
        tmux.wait_for("◆ reviewing")
        tmux.keys("]")
        tmux.wait_for("▸[2 ")
        in_status(tmux, "variant 2/3")
        tmux.keys("]")
        tmux.wait_for("▸[3 ")
        in_status(tmux, "variant 3/3")
        tmux.keys("[")
        tmux.wait_for("▸[2 ")
        in_status(tmux, "variant 2/3")
        # take the shown variant's hunk: the disk holds that variant's version
        wanted = {"def add(a: float, b: float) -> float:": ADD_HINTS,
                  "def add(a: int, b: int) -> int:": CALC.replace(
                      "def add(a, b):", "def add(a: int, b: int) -> int:"),
                  "return a - b  # difference": CALC.replace(
                      "return a - b", "return a - b  # difference")}

        def one_shown() -> list[tuple[str, str]]:
            # a settled screen showing one variant's line: a loaded machine may draw the
            # diff pane a frame (or a pause longer than the settle's) after the status line
            screen = _settled(tmux)
            shown = [(k, v) for k, v in wanted.items() if f"+ {k}" in screen]
            return shown if len(shown) == 1 else []

        [(shown, after)] = until(one_shown, why="one variant's hunk in the diff pane", tmux=tmux)
        assert disk(demo) == CALC
        tmux.keys("y")
        until(lambda: disk(demo) != CALC, why="the accept written")
        assert disk(demo) == after, shown
        tmux.wait_for("#1 accepted")
    finally:
        _stop(tmux, proc)


def test_e_edits_the_hunk_in_editor_and_takes_it_as_edited(demo, tmp_path):
    """$EDITOR is a script: it says it runs, reads a line from the terminal (what the user
    types goes to it, not to the review: "y n A" decides nothing), and turns float into int."""
    typed = tmp_path / "typed.txt"
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\n"
                      'echo "EDITOR RUNNING on $1"\n'
                      "read line\n"
                      f'echo "$line" > {typed}\n'
                      "sed -i 's/float/int/g' \"$1\"\n")
    editor.chmod(0o755)
    proc, url = _serve(tmp_path, CALC_ANSWER)
    tmux = Tmux("editor")
    try:
        _start(tmux, demo, url, tmp_path, editor=str(editor))
        tmux.keys("add type hints")
        tmux.keys("Enter")
        tmux.wait_for("#3 pending", "· done ·")
        tmux.keys("Tab")
        tmux.wait_for("◆ reviewing")
        tmux.keys("e")
        screen = tmux.wait_for("EDITOR RUNNING on ")
        assert ".py" in screen  # named like the file: the editor picks its syntax
        tmux.keys("y n A")
        tmux.keys("Enter")
        tmux.wait_for("#1 accepted", "edited before accepting")
        screen = in_status(tmux, "1 accepted, 0 rejected")  # the typed y, n, A did nothing
        assert typed.read_text() == "y n A\n"
        assert "+ def add(a: int, b: int) -> int:" in screen
        assert disk(demo) == CALC.replace("def add(a, b):", "def add(a: int, b: int) -> int:")
        accepts = [r for r in records(tmp_path) if r["t"] == "accept"]
        assert len(accepts) == 1, accepts
    finally:
        _stop(tmux, proc)


def test_ctrl_b_rewinds_the_files_to_before_a_turn_and_r_puts_them_back(demo, tmp_path):
    proc, url = _serve(tmp_path, CALC_ANSWER, SUB_ANSWER)
    tmux = Tmux("rewind")
    try:
        _start(tmux, demo, url, tmp_path)
        tmux.keys("add type hints")
        tmux.keys("Enter")
        tmux.wait_for("#3 pending", "· done ·")
        tmux.keys("Tab")
        tmux.wait_for("◆ reviewing")
        tmux.keys("y")  # turn 1: add()
        until(lambda: disk(demo) == ADD_HINTS, why="add() written")
        tmux.keys("Tab")
        tmux.wait_for("✎ typing")
        tmux.keys("and sub")
        tmux.keys("Enter")
        tmux.wait_for("Now sub, as asked.", "#4 pending")
        until(lambda: "· done ·" in tmux.screen() and "streaming" not in status(tmux.screen()),
              why="turn 2 done")
        tmux.keys("Tab")
        tmux.wait_for("◆ reviewing")
        tmux.keys("A")  # turn 2: everything open (div, main, sub)
        until(lambda: "def sub(a: float" in disk(demo), why="Accept all written")
        both = disk(demo)
        assert "def div(a: float" in both and "def add(a: float" in both
        tmux.keys("C-b")
        screen = tmux.wait_for("Rewind to before a turn", "Enter/b both")
        assert "add type hints" in screen and "and sub" in screen
        tmux.keys("Enter")  # the last turn (highlighted): conversation and files
        until(lambda: disk(demo) == ADD_HINTS, why="the files rewound")
        screen = tmux.wait_for("rewound: calc.py")
        until(lambda: "Now sub, as asked." not in tmux.screen(), why="turn 2 gone from view")
        rewound = [r for r in records(tmp_path) if r["t"] not in ("text",)]
        assert any("rewind" in r["t"] for r in rewound), [r["t"] for r in rewound]
        tmux.keys("C-b")  # again: r in the dialog puts the files back
        tmux.wait_for("r redo the last files rewind")
        tmux.keys("r")
        until(lambda: disk(demo) == both, why="the files put back")
        tmux.wait_for("put back: calc.py")
    finally:
        _stop(tmux, proc)


# -- pastes ------------------------------------------------------------------------------------
# what a pasted log holds: review letters, ESC sequences, Ctrl+Q, a lone Esc, brackets, tabs
PASTE_LINE = "y n A Y N u R v e \x1b[31mred\x1b[0m \x11 quit? \x1b \x1b\x1b [ ] = ! \there\n"


def paste_of(size: int) -> str:
    text = (PASTE_LINE * (size // len(PASTE_LINE) + 1))[: size - 1] + "."
    assert len(text) == size and "\r" not in text
    return text


def token(text: str) -> str:
    n = lines(text)
    return f"[pasted {len(text):,} chars · {n:,} line{'s' if n != 1 else ''}]"


def paste(tmux: Tmux, tmp_path: Path, text: str) -> None:
    """`text` pasted as a terminal pastes it: bracketed, its newlines sent as CR."""
    f = tmp_path / f"paste{len(text)}.txt"
    f.write_text(text)
    tmux.run("load-buffer", "-b", "p", str(f))
    tmux.run("paste-buffer", "-p", "-d", "-b", "p", "-t", tmux.name)


def sent(tmp_path: Path, n: int) -> list[str]:
    return [r["instruction"] for r in records(tmp_path) if r["t"] == "turn"][:n]


def test_a_64_kib_paste_while_an_answer_streams_is_one_paste_not_keys(demo, tmp_path):
    text = paste_of(64 * 1024)
    proc, url = _serve(tmp_path, CALC_ANSWER, extra=("--stall-after", str(STALL)))
    tmux = Tmux("paste64")
    try:
        _start(tmux, demo, url, tmp_path)
        tmux.keys("add type hints")
        tmux.keys("Enter")
        tmux.wait_for("#1 pending")  # streaming; it waits inside div()
        paste(tmux, tmp_path, text)
        tmux.wait_for(token(text), timeout=60)
        screen = _settled(tmux)
        # the ESCs did not stop it, the y / n / A decided nothing, Ctrl+Q did not quit
        assert "streaming" in status(screen) and "interrupted" not in screen, screen
        assert "0 accepted, 0 rejected" in status(screen) and "✎ typing" in screen
        assert "f2 Paste" in screen
        assert disk(demo) == CALC
        tmux.keys(" ok")  # still answering keys: the words go after the token
        tmux.wait_for(f"{token(text)} ok")
        tmux.keys("Escape")  # a real Esc stops it
        tmux.wait_for("■ interrupted")
        tmux.keys("Enter")  # sent as the next message: the paste whole, then the typed words
        until(lambda: len(sent(tmp_path, 2)) == 2, timeout=60, why="the paste sent")
        assert sent(tmp_path, 2) == ["add type hints", text + " ok"]
        assert disk(demo) == CALC
        assert not any(r["t"] in ("accept", "reject") for r in records(tmp_path))
    finally:
        _stop(tmux, proc)


def test_a_1_mib_paste_arrives_whole_and_the_app_stays_responsive(demo, tmp_path):
    text = paste_of(LIMIT)  # 1 MiB: the most one message keeps
    proc, url = _serve(tmp_path, "Nothing to change.\n")
    tmux = Tmux("paste1m")
    try:
        _start(tmux, demo, url, tmp_path)
        paste(tmux, tmp_path, text)
        tmux.wait_for(token(text), timeout=180)
        screen = _settled(tmux)
        assert "paste refused" not in screen and "✎ typing" in screen
        assert "f2 Paste" in screen
        tmux.keys("F2")  # shown whole, escapes made visible
        screen = tmux.wait_for(r"\x1b[31mred\x1b[0m", timeout=60)
        tmux.keys("Escape")
        until(lambda: r"\x1b[31mred" not in tmux.screen(), timeout=30, why="the view closed")
        tmux.wait_for(token(text))
        tmux.keys("Enter")
        until(lambda: sent(tmp_path, 1), timeout=120, why="the paste sent")
        assert sent(tmp_path, 1) == [text]  # every character, the newlines as LF
        tmux.wait_for("Nothing to change.", timeout=120)
        until(lambda: [r for r in records(tmp_path) if r["t"] == "end"], timeout=60,
              why="the answer ended")
        assert disk(demo) == CALC
    finally:
        _stop(tmux, proc)


def test_a_paste_into_the_review_decides_nothing(demo, tmp_path):
    """A lone "y" pasted while reviewing, then a pasted log full of review letters and ESCs:
    neither is read as keys (nothing accepted, rejected or left); the next typed y is."""
    proc, url = _serve(tmp_path, CALC_ANSWER)
    tmux = Tmux("pastereview")
    try:
        _start(tmux, demo, url, tmp_path)
        tmux.keys("add type hints")
        tmux.keys("Enter")
        tmux.wait_for("#3 pending", "· done ·")
        tmux.keys("Tab")
        tmux.wait_for("◆ reviewing")
        paste(tmux, tmp_path, "y")
        paste(tmux, tmp_path, paste_of(4096))
        screen = _settled(tmux)
        assert "◆ reviewing" in screen and "#1 pending" in screen
        assert "0 accepted, 0 rejected" in status(screen) and "paste" not in status(screen)
        assert disk(demo) == CALC
        tmux.keys("y")  # typed: the review's key
        until(lambda: disk(demo) == ADD_HINTS, why="the typed y accepted #1")
        tmux.wait_for("#1 accepted")
        assert len([r for r in records(tmp_path) if r["t"] == "accept"]) == 1
    finally:
        _stop(tmux, proc)


def test_f1_over_the_commit_dialog_keeps_the_message_typed(demo, tmp_path):
    """F1 from the commit dialog (its message box holds the keys): the help, then Esc back to
    the dialog with the message as it was; Enter commits it."""
    proc, url = _serve(tmp_path, CALC_ANSWER)
    tmux = Tmux("f1commit")
    try:
        _start(tmux, demo, url, tmp_path)
        tmux.keys("add type hints")
        tmux.keys("Enter")
        tmux.wait_for("#3 pending", "· done ·")
        tmux.keys("Tab")
        tmux.wait_for("◆ reviewing")
        tmux.keys("y")
        until(lambda: disk(demo) == ADD_HINTS, why="#1 written", tmux=tmux)
        tmux.keys("S")
        until(lambda: "calc.py" in git(demo, "diff", "--cached", "--name-only"),
              why="#1 staged", tmux=tmux)
        tmux.keys("C")
        tmux.wait_for("Commit ", "Enter commits")
        tmux.keys("hint add")
        tmux.wait_for("hint add")
        tmux.keys("F1")
        tmux.wait_for("steer — keys", "Esc closes.")
        tmux.keys("Escape")
        until(lambda: "steer — keys" not in tmux.screen(), why="the help closed", tmux=tmux)
        tmux.wait_for("Enter commits", "hint add")
        assert git(demo, "log", "--format=%s") == "init\n"  # nothing committed yet
        tmux.keys("Enter")
        until(lambda: git(demo, "log", "--format=%s") == "hint add\ninit\n", why="committed",
              tmux=tmux)
        tmux.wait_for("committed")
        assert git(demo, "show", "HEAD:calc.py") == ADD_HINTS and disk(demo) == ADD_HINTS
    finally:
        _stop(tmux, proc)
