"""A fenced block that names no file, as small models write one (issue: the whole file,
correct, with no path line before it, and steer wrote nothing): a whole-file proposal for a
context file when exactly one fits, flagged so a bulk accept leaves it and `y` takes it;
refused aloud when two fit or none does; prose when it is in another language."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import init_repo, stream
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.disk.workspace import Workspace
from app.core.edits.formats import make_parser
from app.core.edits.formats.events import EditBegin, Line, Malformed, Prose
from app.core.edits.formats.inferred import infer, infer_from
from app.core.review.review import Review
from app.server.chat_server import ServerThread

NET = ("import socket\n\nTIMEOUT = 30\nRETRIES = 3\n\n\ndef connect(host):\n"
       "    return socket.create_connection((host, 80), TIMEOUT)\n")
NET60 = NET.replace("TIMEOUT = 30", "TIMEOUT = 60")
CALC = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"


def bare(text: str, lang: str = "python", before: str = "Here it is:\n\n") -> str:
    return f"{before}```{lang}\n{text}```\n\nThat sets it to 60.\n"


def events(answer: str, files: dict[str, str], fmt: str = "search_replace", step: int = 0):
    guess = infer_from({p: t.splitlines() for p, t in files.items()})
    p = make_parser(fmt, frozenset(files), infer=guess)
    if step:
        out = [e for i in range(0, len(answer), step) for e in p.feed(answer[i:i + step])]
    else:
        out = p.feed(answer)
    return out + p.finish()


# -- which file, if any ------------------------------------------------------------------------
def test_the_one_file_most_of_whose_lines_the_block_holds_is_the_one():
    files = {"net.py": NET.splitlines(), "calc.py": CALC.splitlines()}
    got = infer("python", NET60.splitlines(), files)
    assert got.path == "net.py" and got.note.startswith("file inferred: net.py")
    assert infer("", NET60.splitlines(), files).path == "net.py"  # a bare ``` fence too


def test_two_files_that_fit_refuse_the_block_aloud_and_none_that_fits_too():
    twin = {"a.py": NET.splitlines(), "b.py": NET.splitlines(), "calc.py": CALC.splitlines()}
    got = infer("python", NET60.splitlines(), twin)
    assert got.path is None and "fits 2 files (a.py, b.py)" in got.note
    two = {"net.py": NET.splitlines(), "calc.py": CALC.splitlines()}
    got = infer("python", ["def mul(a, b):", "    return a * b"], two)
    assert got.path is None and "fits no file shown" in got.note


def test_a_block_in_another_language_is_prose_and_the_only_file_takes_one_in_its_own():
    one = {"net.py": NET.splitlines()}
    assert infer("sh", ["python -m pytest -q"], one).path is None
    assert infer("sh", ["python -m pytest -q"], one).note == ""  # an example, said nothing of
    got = infer("py", ["def connect(host, port):", "    pass"], one)  # little in common
    assert got.path == "net.py" and "the only file shown" in got.note


# -- the parser ------------------------------------------------------------------------------
def test_the_parser_turns_the_block_into_a_whole_file_edit_with_its_note():
    ev = events(bare(NET60), {"net.py": NET})
    begin = next(e for e in ev if isinstance(e, EditBegin))
    assert begin.path == "net.py" and begin.kind == "whole" and "file inferred" in begin.inferred
    assert [e.text for e in ev if isinstance(e, Line)] == NET60.splitlines()
    prose = [e.text for e in ev if isinstance(e, Prose)]
    assert "Here it is:" in prose and "That sets it to 60." in prose
    assert not any("```" in t for t in prose)  # its fences are the edit's, not prose


def test_a_refused_block_stays_prose_and_says_why():
    ev = events(bare(NET60), {"a.py": NET, "b.py": NET})
    [bad] = [e for e in ev if isinstance(e, Malformed)]
    assert "fits 2 files" in bad.message
    assert not any(isinstance(e, EditBegin) for e in ev)
    assert "TIMEOUT = 60" in [e.text for e in ev if isinstance(e, Prose)]


def test_search_markers_inside_a_bare_fence_are_a_search_replace_block_as_before():
    answer = ("```\nnet.py\n<<<<<<< SEARCH\nTIMEOUT = 30\n=======\nTIMEOUT = 60\n"
              ">>>>>>> REPLACE\n```\n")
    ev = events(answer, {"net.py": NET, "calc.py": CALC})
    [begin] = [e for e in ev if isinstance(e, EditBegin)]
    assert begin.kind == "update" and begin.path == "net.py" and not begin.inferred
    assert not any(isinstance(e, Malformed) for e in ev)


def test_nested_fences_in_a_bare_block_do_not_end_it():
    readme = "# Net\n\n```sh\npip install net\n```\n\nTimeout: 30 s.\n"
    new = readme.replace("30 s", "60 s")
    answer = "````markdown\n" + new + "````\n"
    ev = events(answer, {"README.md": readme})
    [begin] = [e for e in ev if isinstance(e, EditBegin)]
    assert begin.path == "README.md"
    assert [e.text for e in ev if isinstance(e, Line)] == new.splitlines()


@settings(max_examples=60, deadline=None)
@given(step=st.integers(1, 40), which=st.sampled_from(["one", "two", "sh"]))
def test_chunking_never_changes_what_the_parser_reads(step, which):
    files = {"one": {"net.py": NET}, "two": {"a.py": NET, "b.py": NET}, "sh": {"net.py": NET}}
    answer = bare(NET60, "sh" if which == "sh" else "python")
    assert events(answer, files[which], step=step) == events(answer, files[which])


def test_an_answer_cut_short_inside_the_block_proposes_nothing():
    guess = infer_from({"net.py": NET.splitlines()})
    p = make_parser("whole", frozenset({"net.py"}), infer=guess)
    ev = p.feed("```python\n" + NET60[:40]) + p.finish(complete=False)
    assert not any(isinstance(e, EditBegin) for e in ev)


# -- the review: flagged, a bulk accept leaves it, y takes it -----------------------------------
@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(init_repo(tmp_path / "r", {"net.py": NET, "calc.py": CALC}))


def test_accept_all_leaves_the_inferred_hunk_and_a_deliberate_accept_writes_it(ws):
    pending = stream(ws, bare(NET60), fmt="whole", context=["net.py", "calc.py"], infer=True)
    [h] = pending.hunks
    assert h.path == "net.py" and h.new == ["TIMEOUT = 60"] and h.old == ["TIMEOUT = 30"]
    assert h.warning.startswith("file inferred: net.py")
    review = Review(ws, pending)
    out = review.accept_all()
    assert out.accepted == [] and (ws.root / "net.py").read_text() == NET
    out = review.accept([h.id])
    assert out.accepted == [h.id] and (ws.root / "net.py").read_text() == NET60
    assert (ws.root / "calc.py").read_text() == CALC


def test_without_inference_the_same_answer_is_prose_as_it_was(ws):
    pending = stream(ws, bare(NET60), fmt="whole", context=["net.py"])
    assert pending.hunks == [] and not pending.errors


# -- end to end: steer run on a real server ----------------------------------------------------
def run(root: Path, server: ServerThread, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", "import sys; from app.cli import main; sys.exit(main())",
           "run", "Change TIMEOUT from 30 to 60.", "-f", "net.py", "--base-url",
           server.base_url, "--model", "replay", "--format", "whole", *extra]
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run(cmd, cwd=root, env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=120)


def test_steer_run_names_the_inferred_file_and_accept_all_leaves_it(ws):
    with ServerThread(replay=bare(NET60)) as server:
        shown = run(ws.root, server)
        written = run(ws.root, server, "--accept", "all")
    assert shown.returncode == 0, shown.stderr
    assert "-TIMEOUT = 30\n+TIMEOUT = 60\n" in shown.stdout  # the diff, for net.py
    assert "+++ b/net.py" in shown.stdout
    assert "file inferred: net.py" in shown.stderr  # said before an accept
    assert written.returncode == 4, written.stderr
    assert "not written" in written.stderr and "file inferred: net.py" in written.stderr
    assert (ws.root / "net.py").read_text() == NET


def test_steer_run_refuses_a_block_that_fits_two_files_aloud(tmp_path):
    root = init_repo(tmp_path / "two", {"net.py": NET, "net_copy.py": NET})
    with ServerThread(replay=bare(NET60)) as server:
        out = run(root, server, "-f", "net_copy.py", "--accept", "all")
    assert out.returncode == 4, out.stderr
    assert "fits 2 files (net.py, net_copy.py)" in out.stderr
    assert (root / "net.py").read_text() == NET and (root / "net_copy.py").read_text() == NET


def test_while_a_bare_block_streams_it_shows_as_text_and_once_taken_it_is_no_longer_shown():
    """The conversation shows what the parser holds back (tentative): the block as it
    streams, then nothing of it once it is an edit (its card shows it instead)."""
    guess = infer_from({"net.py": NET.splitlines()})
    p = make_parser("whole", frozenset({"net.py"}), infer=guess)
    p.feed("Here:\n```python\nimport socket\n\nTIMEOUT = 6")
    assert p.tentative() == "```python\nimport socket\n\nTIMEOUT = 6"
    p.feed("0\n")
    assert p.tentative().endswith("TIMEOUT = 60\n")  # the held text grows with the block
    ev = p.feed(NET60.split("TIMEOUT = 60\n", 1)[1] + "```\nok")
    assert any(isinstance(e, EditBegin) for e in ev)
    assert p.tentative() == "ok"
