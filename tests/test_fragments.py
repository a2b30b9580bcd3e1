"""Whole-file answers that are not whole (app/core/edits/formats/fragments.py): a fragment replaces
its region, lazy markers keep the lines they stand for, and a deletion that may not be meant
is flagged and left out of bulk accepts. Property tests: a fragment of any file never turns
into a deletion of the rest."""

from __future__ import annotations

import tempfile
from pathlib import Path

from conftest import stream
from hypothesis import assume, given
from hypothesis import strategies as st

from app.core.disk.workspace import Workspace
from app.core.edits.formats.fragments import asks_removal, markers, read_whole
from app.core.edits.hunks import HunkState
from app.core.review.review import Review
from app.core.text.textfile import decode

HELLO = ('def greet(name):\n    return f"Hello, {name}!"\n\n\nif __name__ == "__main__":\n'
         '    print(greet("world"))\n')


def _answer(path: str, lines: list[str], prose: str = "") -> str:
    return f"{path}\n```python\n" + "".join(t + "\n" for t in lines) + "```\n" + prose


def _run(tmp: Path, base: str, answer: str, *, removal_asked: bool = False, cuts=None):
    (tmp / "f.py").write_text(base)
    ws = Workspace(tmp)
    pending = stream(ws, answer, fmt="whole", context=["f.py"], cuts=cuts,
                     removal_asked=removal_asked)
    return ws, pending


def _accept_all(ws: Workspace, pending) -> list[str]:
    Review(ws, pending).accept_all()
    return decode(Path(ws.root, "f.py").read_bytes())[0]


# -- the newcomer's first request ----------------------------------------------------------------
def test_first_lines_only_propose_nothing_instead_of_deleting_the_rest(tmp_path):
    """What SmolLM2-135M answered to `@hello.py add a docstring to greet`: the first two lines
    of the file in a fence. Read literally, that deletes four lines."""
    answer = _answer("f.py", HELLO.splitlines()[:2], "\nThis docstring is added to the function.")
    ws, pending = _run(tmp_path, HELLO, answer)
    assert pending.hunks == []
    assert [e.message for e in pending.errors] == [
        "f.py: the answer changed nothing (the answer showed lines 1–2 of 6 only: the rest is "
        "kept)"]
    assert _accept_all(ws, pending) == HELLO.splitlines()


def test_fragment_with_a_change_replaces_its_region_only(tmp_path):
    lines = HELLO.splitlines()
    answer = _answer("f.py", [lines[0], '    """Greet someone by name."""', lines[1]])
    ws, pending = _run(tmp_path, HELLO, answer)
    (h,) = pending.hunks
    assert (h.base_start, h.base_end, h.old, h.new) == (1, 1, [], ['    """Greet someone by name."""'])
    assert h.warning == ""
    assert "the answer showed lines 1–2 of 6 only: the rest is kept" in h.note
    assert _accept_all(ws, pending) == [lines[0], '    """Greet someone by name."""', *lines[1:]]


def test_fragment_whose_first_line_changed_keeps_the_lines_above(tmp_path):
    base = "import os\n\n\ndef greet(name):\n    return name\n\n\nX = 1\n"
    answer = _answer("f.py", ["def greet(name: str) -> str:", '    """Greet."""', "    return name"])
    ws, pending = _run(tmp_path, base, answer)
    assert _accept_all(ws, pending) == ["import os", "", "", "def greet(name: str) -> str:",
                                        '    """Greet."""', "    return name", "", "", "X = 1"]


def test_fragment_in_the_middle_keeps_both_ends(tmp_path):
    base = "a = 1\nb = 2\n\ndef f(x):\n    return x + 1\n\nc = 3\nd = 4\n"
    answer = _answer("f.py", ["def f(x):", "    return x + 2"])
    ws, pending = _run(tmp_path, base, answer)
    assert _accept_all(ws, pending) == ["a = 1", "b = 2", "", "def f(x):", "    return x + 2", "",
                                        "c = 3", "d = 4"]


def test_removal_asked_keeps_the_deletion_but_flags_it_out_of_accept_all(tmp_path):
    lines = HELLO.splitlines()
    ws, pending = _run(tmp_path, HELLO, _answer("f.py", lines[:2]), removal_asked=True)
    (h,) = pending.hunks
    assert h.state == HunkState.PENDING and h.base_start == 2 and h.new == []
    assert "may have left out" in h.warning
    review = Review(ws, pending)
    out = review.accept_all()
    assert out.accepted == [] and (tmp_path / "f.py").read_text() == HELLO  # nothing written
    out = review.accept([h.id])  # a deliberate per-hunk accept takes it
    assert out.accepted == [h.id]
    assert (tmp_path / "f.py").read_text() == "".join(t + "\n" for t in lines[:2])


def test_accept_file_also_leaves_flagged_hunks(tmp_path):
    lines = HELLO.splitlines()
    answer = _answer("f.py", [lines[0], '    """Doc."""', lines[1]])
    ws, pending = _run(tmp_path, HELLO, answer, removal_asked=True)
    flagged = [h for h in pending.hunks if h.warning]
    assert len(flagged) == 1 and len(pending.hunks) == 2
    Review(ws, pending).accept_file("f.py")
    assert flagged[0].state == HunkState.PENDING
    assert (tmp_path / "f.py").read_text() == HELLO.replace(
        'name):\n', 'name):\n    """Doc."""\n')


# -- lazy markers --------------------------------------------------------------------------------
BIG = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(8))


def test_lazy_marker_in_the_middle_keeps_what_it_stands_for(tmp_path):
    base = BIG.splitlines()
    answer = _answer("f.py", ["def f0(x):", "    return x + 0", "", "# ... existing code ...",
                              "def f7(x):", "    return x * 7", ""])
    ws, pending = _run(tmp_path, BIG, answer)
    (h,) = pending.hunks
    assert (h.old, h.new, h.warning) == (["    return x + 7"], ["    return x * 7"], "")
    assert "as the file's lines it stands for" in h.note
    assert _accept_all(ws, pending) == [*base[:-2], "    return x * 7", ""]


def test_markers_of_other_languages(tmp_path):
    known = {"x"}
    lines = ["// ... rest of the code ...", "/* ... */", "<!-- ... -->", "# ...", "...", "…",
             "  # existing code", "-- unchanged", "    // ... other methods"]
    assert markers(lines, known) == list(range(len(lines)))
    code = ["# fix this.", "x = f(...)", "#", '"""Greet..."""', "# TODO", "print('...')"]
    assert markers(code, known) == []


def test_ellipsis_that_is_code_is_not_a_marker(tmp_path):
    # `...` already in the file is code (a stub); under a `def ...:` it is a new stub's body
    assert markers(["def f():", "    ..."], set()) == []
    assert markers(["x = 1", "    ..."], {"    ..."}) == []
    base = "class P:\n    def f(self):\n        ...\n"
    answer = _answer("f.py", ["class P:", "    def f(self):", "        ...", "    def g(self):",
                              "        ..."])
    ws, pending = _run(tmp_path, base, answer)
    assert _accept_all(ws, pending) == ["class P:", "    def f(self):", "        ...",
                                        "    def g(self):", "        ..."]


def test_marker_lines_around_a_change_insert_nothing_of_their_own(tmp_path):
    base = "a\nb\nc\nd\ne\nf\ng\n"
    answer = _answer("f.py", ["# ...", "c", "C2", "d", "# ... rest ..."])
    ws, pending = _run(tmp_path, base, answer)
    assert _accept_all(ws, pending) == ["a", "b", "c", "C2", "d", "e", "f", "g"]


# -- large deletions ---------------------------------------------------------------------------
def test_large_interior_deletion_is_flagged_unless_removal_was_asked(tmp_path):
    base = BIG.splitlines()
    kept = base[:6] + base[-6:]  # f0, f1 ... f6, f7: four functions dropped in the middle
    ws, pending = _run(tmp_path, BIG, _answer("f.py", kept))
    (h,) = pending.hunks
    assert "large deletion" in h.warning
    assert _accept_all(ws, pending) == base  # Accept all leaves it
    with tempfile.TemporaryDirectory() as d:
        ws, pending = _run(Path(d), BIG, _answer("f.py", kept), removal_asked=True)
        assert [h.warning for h in pending.hunks] == [""]
        assert _accept_all(ws, pending) == kept


def test_instruction_words_that_may_mean_removal():
    for text in ("remove the unused import", "Delete greet", "drop the main block",
                 "clean up this file", "rewrite it shorter", "refactor greet", "Removing x",
                 "the deleted lines", "drops"):
        assert asks_removal(text), text
    for text in ("add a docstring to greet", "rename x to total", "add a type hint",
                 "fix the typo in the message", "", 'Add the docstring "Split a path." to f',
                 "rename `drop_table` to `drop`", "type splitext", "remember the cutoff"):
        assert not asks_removal(text), text


def test_warning_shows_in_the_status_and_the_run_report(tmp_path):
    from app.view.status import hunk_counts

    lines = HELLO.splitlines()
    ws, pending = _run(tmp_path, HELLO, _answer("f.py", lines[:2]), removal_asked=True)
    assert hunk_counts(pending)["flagged"] == 1


# -- properties ------------------------------------------------------------------------------------
LINE = st.sampled_from(["a", "b", "c", "", "    d = 1", "e e", "  f", "return x", "}", "x = [1, 2]"])
# added lines are unlike any line of the file (a line like one is read as its change)
# lines a fragment adds, unlike any line of the file: a line that looks like an edit of the
# file's line next to the region (`    new_line = 2` after `line_1 = 1`) is read as that edit
# (fragments._replaces, for whole files whose last lines were edited), by design
NEW = st.sampled_from(["NEW 1", "    total += step", "added()", "{"])


CODE = [f"line_{i} = {i}" for i in range(40)]


@st.composite
def fragments(draw, unique: bool = False):
    """A base file, a region [a, b) of it that is not the whole file, and the region as the
    answer shows it: its lines, some replaced or with lines added (never removed). `unique`:
    the file's lines with words in them are unique, as most lines of code are."""
    if unique:
        n = draw(st.integers(2, 30))
        code = iter(draw(st.permutations(CODE)))
        base = [draw(st.sampled_from(["", "}", "", "code"])) for _ in range(n)]
        base = [next(code) if t == "code" else t for t in base]
    else:
        base = draw(st.lists(LINE, min_size=2, max_size=30))
    a = draw(st.integers(0, len(base) - 1))
    b = draw(st.integers(a + 1, len(base)))
    if a == 0 and b == len(base):
        b -= 1
    shown, kept = [], 0
    for t in base[a:b]:
        op = draw(st.sampled_from(["keep", "keep", "keep", "replace", "insert"]))
        if op == "replace":
            shown.append(draw(NEW))
        else:
            shown.append(t)
            kept += t.strip() not in ("", "}", "{")
            if op == "insert":
                shown.append(draw(NEW))
    # a fragment is recognisable by the file's lines in it: most of what it shows is them
    assume(kept * 2 >= sum(1 for t in shown if t.strip() not in ("", "}", "{")) > 0)
    return base, a, b, shown


def _subsequence(small: list[str], big: list[str]) -> bool:
    it = iter(big)
    return all(any(x == y for y in it) for x in small)


@given(case=st.one_of(fragments(), fragments(unique=True)), data=st.data())
def test_a_fragment_never_deletes_the_rest_of_the_file(case, data):
    base, a, b, shown = case
    text = "".join(t + "\n" for t in base)
    answer = _answer("f.py", shown)
    cuts = data.draw(st.lists(st.integers(0, len(answer)), max_size=20))
    with tempfile.TemporaryDirectory() as d:
        removal = data.draw(st.booleans())  # asked: the rest may go, but not in Accept all
        ws, pending = _run(Path(d), text, answer, cuts=cuts, removal_asked=removal)
        result = _accept_all(ws, pending)
        # the fragment only replaces or adds lines: accepting it never shortens the file
        assert len(result) >= len(base), (base, a, b, shown, result)
        if len(set(t for t in base if t.strip() not in ("", "}"))) == sum(
                1 for t in base if t.strip() not in ("", "}")):
            # lines of code unique (where the region is can be known): every line outside
            # the region is still there, in order
            assert _subsequence(base[:a] + base[b:], result), (base, a, b, shown, result)
        if shown == base[a:b] and not removal:  # the region repeated unchanged: nothing to do
            assert pending.hunks == []


@given(case=fragments(unique=True), data=st.data())
def test_a_fragment_with_markers_at_its_ends_never_deletes_either(case, data):
    """Between markers a segment is placed where its lines are; with repeated lines that
    place is ambiguous, so the file's lines with words are unique here."""
    base, a, b, shown = case
    text = "".join(t + "\n" for t in base)
    marked = ["# ... existing code ..."] * (a > 0) + shown + ["# ... rest unchanged ..."] * (b < len(base))
    answer = _answer("f.py", marked)
    with tempfile.TemporaryDirectory() as d:
        ws, pending = _run(Path(d), text, answer, removal_asked=data.draw(st.booleans()))
        result = _accept_all(ws, pending)
        assert _subsequence(base[:a] + base[b:], result), (base, a, b, shown, result)


@given(base=st.lists(LINE, max_size=25), new=st.lists(st.one_of(LINE, NEW), max_size=25),
       removal=st.booleans())
def test_reading_is_deterministic_and_whole_for_whole_answers(base, new, removal):
    """Whatever the block, the reading is a whole file; a block equal to the file reads as it."""
    r = read_whole(base, new, removal_asked=removal)
    assert read_whole(base, new, removal_asked=removal) == r
    assert read_whole(base, base, removal_asked=removal).lines == base
    if not base:
        assert r.lines == new


def test_left_out_blank_edges_stay_unless_removal_was_asked():
    # models drop a file's trailing blank lines unasked: that is not a deletion to propose;
    # asked to remove things, the block says what is left, blank lines too (flagged, as any
    # edge a whole answer leaves out: Accept all never shortens a file)
    base = ["a", "", ""]
    kept = read_whole(base, ["a"])
    assert kept.lines == base and not kept.flags
    asked = read_whole(base, ["a"], removal_asked=True)
    assert asked.lines == ["a"] and [(s, e) for s, e, _ in asked.flags] == [(1, 3)]
    lead = read_whole(["", "x = 1", "y = 2"], ["x = 1", "y = 3"], removal_asked=True)
    assert lead.lines == ["x = 1", "y = 3"] and [(s, e) for s, e, _ in lead.flags] == [(0, 1)]


def test_a_rewrite_that_drops_code_across_several_hunks_is_flagged(tmp_path):
    # the embedded model asked for a docstring: it rewrote the function and dropped the one
    # before it; no hunk deletes 5 lines, together they delete 8 (steer bench task found it)
    base = ("def _isrecursive(pattern):\n    if isinstance(pattern, bytes):\n"
            "        return pattern == b'**'\n    else:\n        return pattern == '**'\n\n"
            "def has_magic(s):\n    if isinstance(s, bytes):\n"
            "        match = magic_check_bytes.search(s)\n    else:\n"
            "        match = magic_check.search(s)\n    return match is not None\n")
    answer = _answer("f.py", ["import glob", "", "def has_magic(pattern):",
                              '    return bool(glob.glob(f"{pattern}.*"))'])
    ws, pending = _run(tmp_path, base, answer)
    assert len(pending.hunks) >= 2
    assert all("large deletion" in h.warning for h in pending.hunks if len(h.old) > len(h.new))
    assert _accept_all(ws, pending) == base.rstrip("\n").split("\n")  # Accept all leaves them


def test_a_whole_answer_that_drops_a_definition_is_flagged(tmp_path):
    # asked for a type hint, the embedded model renamed the function (its old name appears
    # nowhere in the answer): bulk accepts leave that; asked to remove things, it is not flagged
    base = "def _get_sep(path):\n    return '/'\n\n\ndef normcase(s):\n    return s\n"
    answer = _answer("f.py", ["def posixpath_get_sep(path):", "    return '/'", "", "",
                              "def normcase(s):", "    return s"])
    ws, pending = _run(tmp_path, base, answer)
    (h,) = pending.hunks
    assert h.warning.startswith("deletes _get_sep")
    assert _accept_all(ws, pending) == base.rstrip("\n").split("\n")
    with tempfile.TemporaryDirectory() as d:
        ws, pending = _run(Path(d), base, answer, removal_asked=True)
        assert [h.warning for h in pending.hunks] == [""]
