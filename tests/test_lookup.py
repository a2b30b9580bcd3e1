"""The model's own look-ups (read, grep, list): exact lines, the path rules of a write, secrets
and ignored files refused with a reason, bounded answers. Real repositories, real files."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from conftest import init_repo, run_isolated
from hypothesis import given
from hypothesis import strategies as st

from app.core.disk.workspace import Workspace
from app.core.knowledge.lookup import Deadline, Limits, Lookup
from app.core.knowledge.secret_files import secret_name

LINES = [f"line {i} of the file" for i in range(1, 1201)]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = init_repo(tmp_path / "repo", {
        "src/app.py": "\n".join(LINES) + "\n",
        "src/crlf.txt": "one\r\ntwo\r\n",
        "src/util.py": "def helper():\n    return 42\n",
        ".gitignore": "secret_build/\n*.log\n",
        ".env.example": "API_KEY=changeme\n",
        "certs/server.pem": "-----BEGIN CERTIFICATE-----\n",
        "src/id_map.py": "def id_map():\n    pass\n",
        "config/settings.py": "TOKEN = 'sk-test-abcdefghijkl'\n",
        "blob.bin": b"\0\1\2\3",
    })
    (root / ".env").write_text("API_KEY=sk-test-abcdefghijkl\n")
    (root / "secret_build").mkdir()
    (root / "secret_build" / "out.py").write_text("print('built')\n")
    (root / "debug.log").write_text("started\n")
    (tmp_path / "outside.txt").write_text("outside\n")
    (root / "link_out").symlink_to(tmp_path / "outside.txt")
    (root / "src" / "link_in.py").symlink_to(root / "src" / "util.py")
    return root


@pytest.fixture
def look(tree: Path):
    with Lookup(tree, key_values=["sk-test-abcdefghijkl"]) as lk:
        yield lk


def test_read_returns_exact_lines(look):
    a = look.read("src/app.py", 10, 14)
    assert a.ok and a.lines == tuple(LINES[9:14]) and a.first_line == 10
    assert a.text.splitlines()[1] == "10: line 10 of the file"
    assert a.tokens > 0 and not a.truncated
    crlf = look.read("src/crlf.txt")
    assert crlf.lines == ("one", "two")


@pytest.fixture(scope="module")
def shared_look(tmp_path_factory):
    root = init_repo(tmp_path_factory.mktemp("shared") / "r", {"app.py": "\n".join(LINES) + "\n"})
    with Lookup(root) as lk:
        yield lk


@given(start=st.integers(1, 1200), span=st.integers(0, 50))
def test_read_any_range_gives_those_lines(shared_look, start, span):
    a = shared_look.read("app.py", start, start + span)
    assert a.lines == tuple(LINES[start - 1:start + span])


def test_read_is_bounded_and_says_where_to_go_on(look):
    a = look.read("src/app.py")
    assert a.truncated and len(a.lines) == 400
    assert "read on with start=401" in a.text
    small = Lookup(look.root, limits=Limits(read_bytes=300))
    b = small.read("src/app.py", 5)
    assert b.truncated and b.lines == tuple(LINES[4:4 + len(b.lines)]) and 0 < len(b.lines) < 20
    small.close()


def test_a_symlink_inside_is_read_under_its_target(look):
    a = look.read("src/link_in.py")
    assert a.ok and a.path == "src/util.py" and a.lines == ("def helper():", "    return 42")


@pytest.mark.parametrize("path,words", [
    (".env", "looks like a secret (.env)"),
    (".env.example", "looks like a secret (.env.*)"),
    ("certs/server.pem", "looks like a secret (*.pem)"),
    ("../outside.txt", "'..' leads outside the workspace"),
    ("/etc/passwd", "absolute paths are outside the workspace"),
    ("link_out", "a symlink leads outside the workspace"),
    (".git/config", "inside .git/"),
    ("secret_build/out.py", ".gitignore excludes it"),
    ("debug.log", ".gitignore excludes it"),
    ("config/settings.py", "holds the value of an API key"),
    ("blob.bin", "binary"),
    ("src/missing.py", "does not exist"),
])
def test_refused_with_a_reason(look, path, words):
    a = look.read(path)
    assert not a.ok and words in a.reason and a.text == a.reason and not a.lines


def test_the_user_can_share_what_the_model_may_not_reach_for(look):
    assert look.read(".env", user_added=True).lines == ("API_KEY=sk-test-abcdefghijkl",)
    assert look.read("secret_build/out.py", user_added=True).ok
    # never outside the root, or into .git, whoever asks
    assert not look.read("../outside.txt", user_added=True).ok
    assert not look.read("link_out", user_added=True).ok
    assert not look.read(".git/HEAD", user_added=True).ok


def test_secret_names():
    assert secret_name(".env") == ".env"
    assert secret_name("deploy/.env.production") == ".env.*"
    assert secret_name("home/.ssh/id_ed25519") == "id_*"
    assert secret_name("src/id_map.py") is None  # code, not a key
    assert secret_name("tls/server.KEY") == "*.key"
    assert secret_name("src/app.py") is None


def test_grep_finds_and_skips_secrets_and_ignored(look):
    a = look.grep(r"sk-test|API_KEY|built")
    paths = {m[0] for m in a.matches}
    assert paths == set()  # .env and settings.py refused, secret_build/ ignored
    assert "secret-looking" in a.text
    b = look.grep(r"def \w+\(", glob="*.py")
    assert {(m[0], m[1]) for m in b.matches} == {("src/util.py", 1), ("src/id_map.py", 1)}
    assert b.text.splitlines()[1] in ("src/id_map.py:1: def id_map():", "src/util.py:1: def helper():")
    shared = look.grep("API_KEY", user_added=[".env"])
    assert [m[0] for m in shared.matches] == [".env"]


def test_grep_bounds_its_output(look):
    a = look.grep(r"line \d+")
    assert a.truncated and len(a.matches) == 100
    assert "stopped at 100 matches" in a.text and "narrow the pattern" in a.text
    assert a.matches[0] == ("src/app.py", 1, "line 1 of the file")
    tight = Lookup(look.root, limits=Limits(grep_bytes=500, grep_line_chars=8))
    b = tight.grep("line")
    assert b.truncated and len(b.text.encode()) < 900
    rows = [r for r in b.text.splitlines()[1:] if not r.startswith("[")]
    assert rows and all(r.endswith("…") for r in rows)
    tight.close()


def test_grep_refuses_a_bad_pattern(look):
    a = look.grep("([unclosed")
    assert not a.ok and "not a valid regular expression" in a.reason


def test_list_a_folder(look):
    top = look.list("")
    assert "src/" in top.entries and "certs/" in top.entries
    assert "secret_build/" not in top.entries and "debug.log" not in top.entries
    assert ".env.example (17 B, secret-looking: not readable)" in top.text
    assert "link_out (a symlink)" in top.text
    src = look.list("src")
    assert set(src.entries) >= {"app.py", "util.py", "id_map.py"}
    for bad, words in (("../", "'..'"), (".git", ".git/"), ("link_out", "outside"),
                       ("src/app.py", "not a folder")):
        r = look.list(bad)
        assert not r.ok and words in r.reason


def test_list_is_bounded(tree):
    for i in range(30):
        (tree / "src" / f"gen{i:02d}.py").write_text("x = 1\n")
    with Lookup(tree, limits=Limits(list_entries=10)) as lk:
        a = lk.list("src")
        assert a.truncated and len(a.entries) == 10 and "more entries not shown" in a.text


def test_outside_a_repository(tmp_path):
    root = tmp_path / "plain"
    root.mkdir()
    (root / "a.py").write_text("print(1)\n")
    (root / ".env").write_text("K=v\n")
    with Lookup(root) as lk:
        assert lk.read("a.py").lines == ("print(1)",)
        assert "looks like a secret" in lk.read(".env").reason
        assert os.path.basename(lk.grep("print").matches[0][0]) == "a.py"


# -- bounded look-ups: what a model that loops, or is hostile, can ask ---------------------------
# 40,000 characters: `(a+)+$` backtracks over each run of a's (Python's re for ever)
HOSTILE_LINE = ("a" * 3_999 + "!") * 10


def test_a_pattern_that_backtracks_times_out_and_the_answer_comes_back(tmp_path):
    """In a process of its own: Python's re holds the GIL while it backtracks, and a
    regression would hang this test's process instead of failing it."""
    root = init_repo(tmp_path / "r", {"a.txt": "aaaa\n", "long.txt": HOSTILE_LINE + "\n"})
    got, _ = run_isolated(f"""
import json
from app.core.knowledge.lookup import Deadline, Lookup
out = {{}}
with Lookup({str(root)!r}) as lk:
    for mode, pattern in (("whole", "(a+)+$"), ("by line", "(?<!b)(a+)+$")):
        a = lk.grep(pattern, deadline=Deadline(60))
        out[mode] = dict(ok=a.ok, timed_out=a.timed_out, reason=a.reason, text=a.text,
                         matches=[list(m[:2]) for m in a.matches])
print(json.dumps(out))
""", timeout=120)
    for mode in ("whole", "by line"):
        a = got[mode]
        assert not a["ok"] and a["timed_out"], a
        assert a["reason"].startswith("timed out: one search ran past 1 s in long.txt. ")
        assert "rewrite it" in a["reason"]
        # what it found before it stopped comes along
        assert a["matches"] == [["a.txt", 1]] and "a.txt:1: aaaa" in a["text"]


def test_a_grep_out_of_time_says_so_and_how_far_it_got(look):
    a = look.grep("line", deadline=Deadline(0))
    assert a.timed_out and not a.ok and not a.matches
    assert re.match(r"timed out after 0 s, with 0 of \d+ files searched\. Narrow the pattern",
                    a.reason)
    stopped = Deadline(60)
    stopped.stop()  # the turn was stopped while it ran
    assert look.grep("line", deadline=stopped).timed_out


@pytest.mark.parametrize("pattern", [r"(?:a{1000}){1000}", r"a{1000000}", r"((a{100}){10}){20}",
                                     r"[ab{]{20000}", r"(?:x{,200}y){200}"])
def test_a_pattern_the_engine_would_spell_out_is_refused_before_it_compiles(look, pattern):
    """The `regex` module expands counted repeats when it compiles (a{1000000}: a second and
    270 MB), and no time limit stops a compile."""
    a = look.grep(pattern)
    assert not a.ok and "counted repeats multiply to" in a.reason and "at most 10,000" in a.reason


def test_ordinary_counts_and_braces_are_searched(look):
    a = look.grep(r"line \d{1,3} of|[{]{2}|\{\d+\}|\p{L}{4}e")
    assert a.ok and ("src/app.py", 1, "line 1 of the file") in a.matches
    assert not look.grep("x" * 2_001).ok and not look.grep("x", "*" * 501).ok


@pytest.mark.parametrize("pattern", ["needle", "(?<=x)needle"])  # a file at a time; by line
def test_grep_searches_the_first_4000_characters_of_a_line(tmp_path, pattern):
    root = init_repo(tmp_path / "r", {"f.txt": "x" * 5_000 + "needle\n" + "x" * 100 + "needle\n"})
    with Lookup(root) as lk:
        assert [m[:2] for m in lk.grep(pattern).matches] == [("f.txt", 2)]
    with Lookup(root, limits=Limits(grep_line_chars_searched=6_000)) as lk:
        assert [m[:2] for m in lk.grep(pattern).matches] == [("f.txt", 1), ("f.txt", 2)]



@pytest.mark.parametrize("pattern", [r"\w*\d", r"(?<!b)\w*\d"])  # a file at a time; by line
def test_the_per_line_cap_bounds_a_pathological_pattern_on_a_long_line(tmp_path, pattern):
    # pins grep_line_chars_searched as a bound on time, not only on what is found: \w*\d
    # backtracks quadratically on a line of letters (~0.01 s over 500 characters, seconds
    # over 12,000, past the 1 s limit of one search); with the cap the grep answers at once
    root = init_repo(tmp_path / "r", {"f.txt": "a" * 12_000 + "\n" + "x7\n"})
    with Lookup(root, limits=Limits(grep_line_chars_searched=500)) as lk:
        a = lk.grep(pattern, deadline=Deadline(30))
    assert a.ok and not a.timed_out, a.reason
    assert [m[:2] for m in a.matches] == [("f.txt", 2)]

@pytest.fixture(scope="module")
def one_file(tmp_path_factory):
    root = init_repo(tmp_path_factory.mktemp("grep") / "r", {"f.txt": "\n"})
    with Lookup(root, limits=Limits(grep_line_chars_searched=7)) as lk:
        yield root, lk


# ^ and $ at a line's ends, matches that would run on into the next line, look-arounds and
# anchors of the whole string (these are searched line by line), a cut at 7 characters
PATTERNS = [r"a", r"^a", r"a$", r"^$", r"b\s*=", r"a[^b]*b", r"\ba\w*", r"=\s+a", r"a\s*$",
            r"(?<=a)b", r"a(?!b)", r"\Aa", r"a\Z", r"(?i)A B", r"a|b$", r"\s", r"x*", r"[^=]+$",
            r"(?<![^a])b", r"a\n", r"(?s)a.*b", r"(a)\1"]


@given(lines=st.lists(st.text(alphabet="ab =\t", max_size=11), max_size=10),
       pattern=st.sampled_from(PATTERNS), ending=st.sampled_from(["\n", "\r\n", ""]))
def test_grep_finds_the_lines_a_search_of_each_line_alone_finds(one_file, lines, pattern, ending):
    """The whole-file search (lookup.py _Searcher) against Python's re on each line alone
    (its first 7 characters): the same lines, none missed and none extra."""
    root, lk = one_file
    (root / "f.txt").write_text("\n".join(lines) + ending, newline="")
    rx = re.compile(pattern, re.MULTILINE)
    text = "\n".join(lines) + ending
    want = [n for n, line in enumerate(text.splitlines(), 1) if rx.search(line, 0, 7)]
    assert [m[1] for m in lk.grep(pattern).matches] == want


@pytest.mark.parametrize("path,words", [
    ("src/util.py" + "/x" * 3000, "it is 6,011 bytes long"),
    ("a/" * 64 + "f.py", "it is 65 levels deep"),
    ("src/" + "n" * 253 + ".py", "one of its names is 256 bytes long"),
])
def test_a_path_too_long_or_too_deep_is_refused_by_its_limit(look, path, words):
    for a in (look.read(path), look.list(path)):
        assert not a.ok and words in a.reason, a.reason
        assert "at most 4,096 bytes, 64 levels and 255 bytes a name" in a.reason
        assert len(a.text) < 300  # (the path is not sent back whole)
    ws = Workspace(look.root)
    with pytest.raises(ValueError, match=words):
        ws.check_path(path)
    assert ws.check_path("a/" * 63 + "f.py") == "a/" * 63 + "f.py"  # 64 levels: a path
