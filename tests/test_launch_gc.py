"""steer's launch keeps the cyclic collector off (app/launch_gc.py) and turns it back on once
start-up is over: before `steer run`'s request goes, and whatever a command does, by its
end. The real CLI, in a subprocess, against a real loopback server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import SRC, init_repo
from test_cli import served

PROBE = """
import gc, json, sys
from app.core.conversation import session
seen = {}
start = session.Session.start
def watched(self, *a, **k):
    seen["at_request"] = gc.isenabled()
    return start(self, *a, **k)
session.Session.start = watched
from app.cli import main
seen["during_import"] = gc.isenabled()
try:
    code = main(sys.argv[1:])
except SystemExit as exc:  # argparse's usage errors
    code = exc.code
seen["after"] = gc.isenabled()
seen["frozen"] = gc.get_freeze_count() > 0
print(json.dumps(seen))
sys.exit(code)
"""


def test_the_collector_is_back_on_before_the_request_and_after_any_command(tmp_path):
    root = init_repo(tmp_path / "r", {"f.txt": SRC})
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    with served("Nothing to do.\n") as server:
        out = subprocess.run([sys.executable, "-c", PROBE, "run", "edit it", "--base-url",
                              server.base_url, "--model", "replay", "--no-save"], cwd=root,
                             env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {"during_import": True, "at_request": True, "after": True, "frozen": True}
    # a command that fails before any request (a usage error) leaves it on too
    bad = subprocess.run([sys.executable, "-c", PROBE, "run", "x", "--format", "nope"],
                         cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert json.loads(bad.stdout.strip().splitlines()[-1])["after"] is True
