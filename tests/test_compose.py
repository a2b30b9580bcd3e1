"""An edit written against the change set's own proposal (a follow-up, or a fix F sends):
its old lines are not in the file, but in the file as the undecided edits make it, often
running from a proposed line into the unchanged ones around it. The edits it touches become
one, over the base lines the match covers; the proposal is the view with the old lines
replaced, whatever the format (search/replace, apply_patch). The real engine on a real file;
the oracle is a list splice of the proposal, not the engine."""

from __future__ import annotations

from conftest import init_repo, sr
from hypothesis import given
from hypothesis import strategies as st

from app.core.disk.workspace import Workspace
from app.core.edits.diff import PendingDiff
from app.core.edits.formats import make_parser
from app.core.edits.hunks import OPEN, REDIRECTED, HunkState
from app.core.review.review import Review

CALC = "def add(a, b):\n    return a + b\n"
GOOD = CALC + "\n\ndef sub(a, b):\n    return a - b\n"


def patch(body: str) -> str:
    return f"*** Begin Patch\n*** Update File: calc.py\n{body}*** End Patch\n"


BROKEN_AP = patch("@@\n def add(a, b):\n     return a + b\n+\n+\n+def sub(a, b):\n+    return a + b\n")
# the fix's context starts on a line of the file and runs into the proposal's lines
FIX_AP = patch("@@\n     return a + b\n \n \n def sub(a, b):\n-    return a + b\n+    return a - b\n")
BROKEN_SR = sr("calc.py", CALC, CALC + "\n\ndef sub(a, b):\n    return a + b\n")
FIX_SR = sr("calc.py", "    return a + b\n\n\ndef sub(a, b):\n    return a + b\n",
            "    return a + b\n\n\ndef sub(a, b):\n    return a - b\n")


def _turn(pending: PendingDiff, fmt: str, answer: str, *, redirect: bool | None = None) -> None:
    """An answer into the change set: the first, or (`redirect` given) one after it."""
    if redirect is not None:
        pending.begin_turn(redirect=redirect)
    parser = make_parser(fmt, frozenset({"calc.py"}))
    pending.feed(parser.feed(answer))
    pending.feed(parser.finish(True))
    pending.finish()


def _rig(tmp_path, text: str = CALC):
    ws = Workspace(init_repo(tmp_path / "r", {"calc.py": text}))
    return ws, PendingDiff(ws, [ws.snapshot("calc.py").prepare()])


def test_an_apply_patch_fix_whose_context_spans_the_proposal_and_the_file_lands(tmp_path):
    ws, pending = _rig(tmp_path)
    _turn(pending, "apply_patch", BROKEN_AP)
    (first,) = pending.hunks
    _turn(pending, "apply_patch", FIX_AP, redirect=True)  # what F sends goes as a redirect
    fd = pending.files["calc.py"]
    assert not fd.errors and not pending.errors
    assert "\n".join(fd.proposal()) + "\n" == GOOD
    (hunk,) = [h for h in pending.hunks if h.state in OPEN]
    assert hunk.id == first.id and not hunk.warning  # the same hunk, proposed again
    Review(ws, pending).accept_all()
    assert (ws.root / "calc.py").read_text() == GOOD


def test_a_search_replace_fix_spanning_the_proposal_and_the_file_lands(tmp_path):
    ws, pending = _rig(tmp_path)
    _turn(pending, "search_replace", BROKEN_SR)
    _turn(pending, "search_replace", FIX_SR, redirect=True)
    assert not pending.errors
    Review(ws, pending).accept_all()
    assert (ws.root / "calc.py").read_text() == GOOD


def test_a_fix_across_two_proposed_edits_and_the_lines_between_makes_them_one(tmp_path):
    text = "".join(f"line {i}\n" for i in range(1, 11))
    ws, pending = _rig(tmp_path, text)
    _turn(pending, "search_replace", sr("calc.py", "line 3\n", "LINE 3\n")
          + sr("calc.py", "line 6\n", "LINE 6\n") + sr("calc.py", "line 9\n", "LINE 9\n"))
    three, six, nine = pending.hunks
    _turn(pending, "search_replace", sr("calc.py", "LINE 3\nline 4\nline 5\nLINE 6\n",
                                        "three\nfour\nfive\nsix\n"), redirect=True)
    assert not pending.errors
    open_ = [h for h in pending.hunks if h.state in OPEN]
    assert [h.id for h in open_] == [three.id, nine.id]  # 3..6 one hunk now; 9 untouched
    assert open_[0].new == ["three", "four", "five", "six"] and not open_[0].redirected
    assert nine.redirected == REDIRECTED  # not proposed again: kept out of Accept all
    assert pending.files["calc.py"].proposal() == [
        "line 1", "line 2", "three", "four", "five", "six", "line 7", "line 8", "LINE 9",
        "line 10"]


def test_a_fix_over_a_decided_hunk_is_refused_and_the_file_is_left(tmp_path):
    text = "".join(f"line {i}\n" for i in range(1, 8))
    ws, pending = _rig(tmp_path, text)
    _turn(pending, "search_replace", sr("calc.py", "line 3\n", "LINE 3\n"))
    (three,) = pending.hunks
    Review(ws, pending).accept([three.id])
    _turn(pending, "search_replace", sr("calc.py", "LINE 3\nline 4\n", "x\ny\n"), redirect=False)
    # LINE 3 is on disk now, not in the base the engine matches: not composed over an accept
    assert three.state == HunkState.ACCEPTED and three.new == ["LINE 3"]
    assert (ws.root / "calc.py").read_text() == text.replace("line 3", "LINE 3")


def test_an_ambiguous_span_is_refused(tmp_path):
    ws, pending = _rig(tmp_path, "p\nsep\nq\n")
    _turn(pending, "search_replace", sr("calc.py", "p\n", "k\nm\n") + sr("calc.py", "q\n", "k\nm\n"))
    # "k m" is in neither the file nor one place of the proposal: which is meant is not known
    _turn(pending, "search_replace", sr("calc.py", "k\nm\n", "K\n"), redirect=False)
    assert pending.errors and "not found" in pending.errors[-1].message
    assert pending.files["calc.py"].proposal() == ["k", "m", "sep", "k", "m"]


LINES = st.lists(st.sampled_from(["x", "y", "z", "w", "v", ""]), min_size=0, max_size=4)
SOME = st.lists(st.sampled_from(["x", "y", "z", "w", "v", ""]), min_size=1, max_size=4)


@given(n=st.integers(6, 14), cuts=st.lists(st.tuples(st.integers(0, 13), st.integers(1, 2),
                                                    SOME), min_size=1, max_size=3),
       data=st.data(), new=LINES)
def test_a_fix_anywhere_in_the_proposal_is_the_proposal_with_those_lines_replaced(
        tmp_path_factory, n, cuts, data, new):
    text = "".join(f"line {i}\n" for i in range(n))
    edits, taken = [], set()
    for at, size, lines in sorted(cuts):  # non-overlapping, separated by a kept line
        span = set(range(at - 1, at + size + 1))
        if at + size > n or span & taken:
            continue
        taken |= span
        old = "".join(f"line {i}\n" for i in range(at, at + size))
        edits.append(sr("calc.py", old, "".join(f"{t} {at}\n" for t in lines)))  # its own lines
    if not edits:
        return
    ws, pending = _rig(tmp_path_factory.mktemp("p"), text)
    _turn(pending, "search_replace", "".join(edits))
    assert not pending.errors
    view = pending.files["calc.py"].proposal()
    proposed = [i for i, t in enumerate(view) if not t.startswith("line ")]
    if not proposed:
        return  # only deletions: every window of the view is in the file too
    # a window holding a proposed line (so not in the file), often running into file lines
    i = data.draw(st.sampled_from(proposed))
    a = data.draw(st.integers(max(0, i - 3), i))
    b = data.draw(st.integers(i + 1, min(len(view), i + 4)))
    old = view[a:b]
    if sum(view[j:j + len(old)] == old for j in range(len(view))) != 1:
        return  # twice in the proposal: ambiguous, refused (test_an_ambiguous_span_is_refused)
    fix = sr("calc.py", "".join(t + "\n" for t in old), "".join(t + "\n" for t in new))
    _turn(pending, "search_replace", fix, redirect=True)
    assert not pending.errors, pending.errors
    expected = view[:a] + new + view[b:]
    assert pending.files["calc.py"].proposal() == expected
    Review(ws, pending).accept([h.id for h in pending.hunks if h.state in OPEN])  # y on each
    assert (ws.root / "calc.py").read_text().splitlines() == expected
