"""The repository map on `steer run`'s first run (issue 29): a tree whose definitions can be
read within the run's budget goes with them; a larger one goes with its paths, led by the
files where a word search found the instruction's names defined; and the cache the first
run writes is the one the second run reads.

The real CLI in a subprocess, real git repositories of hundreds to thousands of files, a
real loopback server keeping the requests it was sent; the word search on real trees."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import git
from test_cli import served, steer

from app.core.knowledge.render import HEADER, HEADER_PATHS
from app.core.knowledge.word_search import WordSearch, definitions, search, wanted

UTIL = "def greet_someone(name):\n    return 'hi ' + name\n"
ASK = "Add a docstring to greet_someone."


def _tree(root: Path, n: int, size: int = 0) -> Path:
    """`n` small Python files in folders of 50, plus util.py (which defines greet_someone)
    and a caller of it; `size` pads each file to about that many bytes."""
    root.mkdir(parents=True)
    pad = "# " + "x" * max(0, size - 80) + "\n" if size else ""
    for i in range(n):
        d = root / f"pkg{i // 50}"
        d.mkdir(exist_ok=True)
        (d / f"mod{i}.py").write_text(f"def helper_{i}(x):\n    return x + {i}\n{pad}")
    (root / "util.py").write_text(UTIL)
    (root / "main.py").write_text("from util import greet_someone\n\nprint(greet_someone('a'))\n")
    return _commit(root)


def _commit(root: Path) -> Path:
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "tree")
    return root


def _run(root: Path, state: Path):
    with served("Nothing to change.\n") as server:
        out = steer(root, "run", ASK, "--base-url", server.base_url, "--model", "replay",
                    "--no-save", env={"XDG_STATE_HOME": str(state)})
        assert out.returncode == 0, out.stderr
        (body,) = server.stats.bodies
    text = "\n".join(m["content"] for m in body["messages"] if isinstance(m.get("content"), str))
    assert out.returncode == 0, out.stderr
    return text, out.stderr


@pytest.mark.parametrize("n", [300, 1000])
def test_the_first_run_on_a_tree_of_hundreds_of_files_carries_the_definitions(tmp_path, n):
    root = _tree(tmp_path / "r", n)
    text, err = _run(root, tmp_path / "state")
    assert HEADER in text and HEADER_PATHS not in text
    assert "util.py:\n1: def greet_someone(name):" in text
    assert "caching the repository map" not in err  # it was complete when the request went


def test_a_tree_too_big_to_read_in_time_leads_with_the_word_search_and_run_2_has_it_all(
        tmp_path):
    # ~8 MB of code: a cold parse takes seconds, so the first request goes with the paths
    root = _tree(tmp_path / "r", 4000, size=2000)
    text, err = _run(root, tmp_path / "state")
    assert HEADER_PATHS in text
    lines = text[text.index(HEADER_PATHS) + len(HEADER_PATHS):].splitlines()
    assert lines[:2] == ["util.py:", "1: def greet_someone(name):"]  # first, with its line
    assert "main.py" in lines  # a file that only uses it is listed by name, not as its definer
    assert "caching the repository map for the next run" in err
    # the cache written at the end of run 1 is the one run 2 reads: the definitions go
    text2, err2 = _run(root, tmp_path / "state")
    assert HEADER in text2 and "util.py:\n1: def greet_someone(name):" in text2
    assert "caching" not in err2


# -- the word search ---------------------------------------------------------------------------
def test_the_words_searched_are_the_ones_written_as_code():
    assert wanted(ASK) == ("greet_someone",)
    assert wanted("rename `Parser` and fix parse_header() in the Lexer class") == (
        "Parser", "parse_header", "Lexer")
    assert wanted("add a docstring to every function") == ()


SOURCES = {
    "util.py": UTIL,
    "web/handlers.js": "export const greet_someone = (name) => `hi ${name}`;\n",
    "lib/greet.go": "func greet_someone(name string) string {\n\treturn name\n}\n",
    "caller.py": "greet_someone('x')  # only a use\n",
    "notes.md": "def greet_someone is documented here\n",
    ".env": "greet_someone=sk-secret-value-1234\n",
    "keys/leak.py": "def greet_someone(): return 'sk-live-abcdefgh1234'\n",
}


@pytest.mark.parametrize("in_git", [True, False])
def test_the_search_finds_definitions_only_and_never_secrets_or_prose(tmp_path, in_git):
    root = tmp_path / "t"
    root.mkdir()
    for rel, text in SOURCES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    if in_git:
        _commit(root)
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()
                   and ".git" not in p.parts)
    hits = search(root, ("greet_someone",), lambda: files, hidden=("sk-live-abcdefgh1234",))
    assert hits == {"util.py": ((1, "def greet_someone(name):"),),
                    "lib/greet.go": ((1, "func greet_someone(name string) string {"),),
                    "web/handlers.js": ((1, "export const greet_someone = (name) => `hi ${name}`;"),)}


def test_definitions_keep_the_order_of_the_names_and_a_cap_per_file():
    rows = [("b.py", 3, "class Lexer:"), ("a.py", 9, "def parse_header(x):"),
            ("a.py", 1, "def parse_header(y):"), ("a.py", 20, "parse_header = None"),
            ("a.py", 30, "def parse_header(z):"), ("a.py", 40, "def parse_header(w):")]
    got = definitions(rows, ("parse_header", "Lexer"))
    assert list(got) == ["a.py", "b.py"]
    assert got["a.py"] == ((1, "def parse_header(y):"), (9, "def parse_header(x):"),
                           (20, "parse_header = None"))


def test_a_look_ahead_is_answered_later_without_waiting(tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    (root / "util.py").write_text(UTIL)
    _commit(root)
    ws = WordSearch(root, lambda: ["util.py"])
    assert ws.found(ASK) == {}  # nothing asked yet: nothing, at once
    assert ws.wait(ASK, 30) == {"util.py": ((1, "def greet_someone(name):"),)}
    assert ws.found(ASK) == {"util.py": ((1, "def greet_someone(name):"),)}
    assert ws.found("something else entirely") == {}
