"""A proposal that leaves its file unparsable is flagged `syntax error at line N`, in every
language steer has a grammar for (app/core/text/parses.py, grammars.py), as invisible
characters are: Accept all leaves it, a deliberate accept takes it, `steer run --accept all`
exits 4 and names it, and the file stays as it was. Real files, the real parser, pending
diff and review; the real CLI against a real server on 127.0.0.1."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import init_repo, sr, stream

from app.core.disk.workspace import Workspace
from app.core.edits.hunks import HunkState
from app.core.review.review import Review
from app.core.text import parses
from app.server.chat_server import ServerThread

STEER = [sys.executable, "-c", "import sys; from app.cli import main; sys.exit(main())"]
HERE = Path(__file__).resolve().parents[1]

JS = "function add(a, b) {\n  return a + b;\n}\n\nfunction sub(a, b) {\n  return a - b;\n}\n"
# the closing brace of add() dropped: a search/replace block as a fast model writes it
BROKEN = "Tidied add.\n\n" + sr("calc.js", "  return a + b;\n}\n", "  return a + b;\n")

# (file, parses, does not parse, the line the error is reported at)
CASES = [
    ("a.js", "const x = [1, 2];\n", "const x = [1, 2;\n", 1),
    ("a.ts", "let n: number = 1;\n", "let n: number = ;\n", 1),
    ("a.go", "package a\n\nfunc f() int {\n\treturn 1\n}\n", "package a\n\nfunc f() int {\n\treturn 1\n", 4),
    # tree-sitter names where the part it cannot read begins: here, the function
    ("a.rs", "fn f() -> i32 {\n    1\n}\n", "fn f() -> i32 {\n    1\n", 1),
    ("a.json", '{"a": 1, "b": 2}\n', '{"a": 1, "b": 2\n', 1),
    ("a.c", "int f(void) { return 1; }\n", "int f(void) { return 1;\n", 1),
    ("a.rb", "def f\n  1\nend\n", "def f\n  1\n", 1),
    ("a.py", "def f():\n    return 1\n", "def f()\n    return 1\n", 1),
]


@pytest.mark.parametrize(("name", "good", "bad", "line"), CASES, ids=[c[0] for c in CASES])
def test_each_language_says_where_a_change_breaks_it(name, good, bad, line):
    good_lines, bad_lines = good.splitlines(), bad.splitlines()
    assert parses.problem(name, good_lines) == ""
    msg = parses.breaks(name, good_lines, bad_lines)
    assert msg.startswith(f"syntax error at line {line}"), msg
    assert parses.breaks(name, bad_lines, bad_lines) == ""  # broken before: not this change
    assert parses.breaks(name.replace(".", "_") + ".txt", good_lines, bad_lines) == ""


def test_a_js_hunk_that_drops_a_brace_is_flagged_and_accept_all_leaves_it(tmp_path):
    ws = Workspace(init_repo(tmp_path / "r", {"calc.js": JS}))
    pending = stream(ws, BROKEN, context=["calc.js"])
    [h] = pending.hunks
    assert h.syntax.startswith("syntax error at line") and h.syntax in h.warning
    review = Review(ws, pending)
    out = review.accept_all()
    assert h.state == HunkState.PENDING and not out.accepted  # left for a deliberate accept
    assert (ws.root / "calc.js").read_text() == JS
    review.accept([h.id])  # the user's own `y` takes it
    assert h.state == HunkState.ACCEPTED
    assert (ws.root / "calc.js").read_text() == JS.replace("  return a + b;\n}\n", "  return a + b;\n")


def test_hunks_that_only_parse_together_are_not_flagged(tmp_path):
    ws = Workspace(init_repo(tmp_path / "r", {"calc.js": JS}))
    # one opens a block, the other (far below, its own hunk) closes it
    answer = ("Wrapped both.\n\n" + sr("calc.js", "function add(a, b) {\n", "if (ok) {\nfunction add(a, b) {\n")
              + "\n" + sr("calc.js", "  return a - b;\n}\n", "  return a - b;\n}\n}\n"))
    pending = stream(ws, answer, context=["calc.js"])
    assert len(pending.hunks) == 2 and not any(h.syntax for h in pending.hunks)


def test_a_file_broken_before_is_not_blamed_on_the_proposal(tmp_path):
    broken = JS.replace("  return a - b;\n}\n", "  return a - b;\n")
    ws = Workspace(init_repo(tmp_path / "r", {"calc.js": broken}))
    pending = stream(ws, "Renamed.\n\n" + sr("calc.js", "function add(a, b) {\n", "function plus(a, b) {\n"),
                     context=["calc.js"])
    assert pending.hunks and not any(h.syntax for h in pending.hunks)


def test_steer_run_accept_all_exits_4_names_the_error_and_writes_nothing(tmp_path):
    repo = init_repo(tmp_path / "r", {"calc.js": JS})
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    with ServerThread(replay=BROKEN) as server:
        out = subprocess.run([*STEER, "run", "tidy add", "-f", "calc.js", "--base-url",
                              server.base_url, "--model", "replay", "--format", "search_replace",
                              "--quiet", "--no-save", "--accept", "all"], cwd=repo, env=env,
                             capture_output=True, text=True, timeout=300)
    assert out.returncode == 4, out.stderr
    assert "calc.js: 1 hunk left: hunk #" in out.stderr and "syntax error at line" in out.stderr
    assert (repo / "calc.js").read_text() == JS
