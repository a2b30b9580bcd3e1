"""The terminal app killed with SIGKILL while an answer streams, then `steer --resume` in a new
terminal: the conversation, the streamed text (all but the last second at most) and the
hunks are back, the answer marked interrupted, and the review works. Real `steer` in tmux,
a real loopback server."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest
from test_kill_resume import LONG
from test_tmux import Tmux

from app.bench.demo import CALC
from app.core.storage.log import read_log
from app.core.storage.records import Text
from app.core.storage.store import SessionStore
from app.server.chat_server import ServerThread

pytestmark = [pytest.mark.tmux,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]
HERE = Path(__file__).resolve().parents[1]


def test_kill_9_the_app_mid_stream_then_resume_it(demo, tmp_path):
    env = (f"PYTHONPATH={HERE} XDG_CONFIG_HOME={tmp_path}/cfg XDG_STATE_HOME={os.environ['XDG_STATE_HOME']} "
           f"TERM=xterm-256color EDITOR= VISUAL=")
    pidfile = tmp_path / "pid"
    tmux = Tmux("resume")
    with ServerThread(replay=LONG, rate=120) as server:
        flags = f"--base-url {server.base_url} --model replay --format search_replace"
        tmux.run("new-session", "-d", "-s", "resume", "-x", "160", "-y", "48",
                 f"cd {demo} && echo $$ > {pidfile} && exec env -u COLUMNS -u LINES {env} "
                 f"{sys.executable} -m app {flags} -f calc.py")
        tmux.run("resize-window", "-t", "resume", "-x", "160", "-y", "48")
        try:
            tmux.wait_for("Ask for a change", "calc.py")
            tmux.keys("rename the arguments")
            tmux.keys("Enter")
            tmux.wait_for("note 6:")
            time.sleep(1.5)  # the log has had a flush since
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
            store = SessionStore(demo)
            sid = store.ids()[0]
            saved = "".join(r.s for r in read_log(store.log_path(sid))[0] if type(r) is Text)
            assert "note 6:" in saved and LONG.startswith(saved)
            last = saved.rstrip("\n").rsplit("\n", 1)[-1]
            tmux.run("kill-session", "-t", "resume")
            tmux.run("new-session", "-d", "-s", "resume", "-x", "160", "-y", "48",
                     f"cd {demo} && exec env -u COLUMNS -u LINES {env} "
                     f"{sys.executable} -m app {flags} --resume; sleep 5")
            tmux.run("resize-window", "-t", "resume", "-x", "160", "-y", "48")
            # the answer as far as it was saved (its "- " list marks drawn as Markdown bullets)
            screen = tmux.wait_for("■ interrupted", "resumed session",
                                   last.strip().removeprefix("- ")[:40], timeout=10)
            assert "#1 pending" in screen
            tmux.wait_for("✎ typing", "to review: Tab")  # resumed: the keys are the prompt's
            tmux.keys("Tab")  # the user goes to the review, as after a live answer
            tmux.wait_for("◆ reviewing")
            tmux.keys("y")  # the review works on the restored hunks
            tmux.wait_for("#1 accepted")
            assert "def add(x, y):" in (demo / "calc.py").read_text()
            assert (demo / "calc.py").read_text() != CALC
            tmux.keys("C-q")
        finally:
            tmux.kill()
