"""Property tests: for random base/target texts, rendered in each edit format and cut into
random chunks, the pending diff reproduces the target, its hunks equal a fresh full diff,
and accepting any subset of hunks writes exactly the matching file."""

from __future__ import annotations

import tempfile
from pathlib import Path

from conftest import stream
from diff_oracle import splice
from hypothesis import given
from hypothesis import strategies as st
from render_answers import RENDERERS

from app.core.disk.workspace import Workspace
from app.core.edits.formats import make_parser
from app.core.edits.formats.events import EditBegin
from app.core.edits.hunks import HunkState
from app.core.review.review import Review
from app.core.text.linediff import line_diff
from app.core.text.textfile import decode

# Lines from a small alphabet so that texts repeat themselves (ambiguity is the hard part),
# but never look like format markers (the formats cannot express those lines).
LINE = st.sampled_from(["a", "b", "c", "", "    d = 1", "e e", "  f", "return x", "}", "x = [1, 2]"])
TEXT = st.lists(LINE, max_size=30)
FMT = st.sampled_from(sorted(RENDERERS))


def _cuts(data, n: int) -> list[int]:
    return data.draw(st.lists(st.integers(0, max(n, 1)), max_size=40))


def _setup(tmp: str, base: list[str] | None) -> Workspace:
    if base is not None:
        Path(tmp, "f.txt").write_text("".join(t + "\n" for t in base))
    return Workspace(tmp)


def _valid(fmt: str, base: list[str] | None, target: list[str]) -> bool:
    if fmt == "whole" and not target:
        return False  # an empty fenced block is not taken as "empty the file"
    return base is None or base != target


@given(fmt=FMT, base=st.one_of(st.none(), TEXT), target=TEXT, data=st.data())
def test_stream_rebuilds_target_and_matches_full_diff(fmt, base, target, data):
    if not _valid(fmt, base, target):
        return
    answer = RENDERERS[fmt]("f.txt", base, target)
    with tempfile.TemporaryDirectory() as tmp:
        ws = _setup(tmp, base)
        ctx = ["f.txt"] if base is not None else []
        # a whole file asked to remove things may delete what it leaves out (flagged)
        pending = stream(ws, answer, fmt=fmt, context=ctx, cuts=_cuts(data, len(answer)),
                         removal_asked=True)
        assert not pending.errors, (answer, pending.errors)
        fd = pending.files["f.txt"]
        assert fd.proposal() == target
        full = line_diff(base or [], target)
        assert [(h.base_start, h.base_end, h.new) for h in fd.hunks] == [
            (a1, a2, target[b1:b2]) for a1, a2, b1, b2 in full]
        assert all(h.state == HunkState.PENDING and not h.incomplete for h in fd.hunks)
        ids = [h.id for h in fd.hunks]
        assert len(set(ids)) == len(ids)


@given(fmt=FMT, base=TEXT, target=TEXT, data=st.data())
def test_accept_subset_writes_exactly_those_hunks(fmt, base, target, data):
    if not _valid(fmt, base, target):
        return
    answer = RENDERERS[fmt]("f.txt", base, target)
    with tempfile.TemporaryDirectory() as tmp:
        ws = _setup(tmp, base)
        original = Path(tmp, "f.txt").read_bytes()
        pending = stream(ws, answer, fmt=fmt, context=["f.txt"], cuts=_cuts(data, len(answer)),
                         removal_asked=True)
        hunks = pending.files["f.txt"].hunks
        chosen = data.draw(st.lists(st.sampled_from([h.id for h in hunks]), unique=True)) if hunks else []
        review = Review(ws, pending)
        # decide one hunk at a time, in random order: each accept rebases on the last one
        for hid in data.draw(st.permutations(chosen)):
            out = review.accept([hid])
            assert out.accepted == [hid] and not out.conflicts
        review.reject([h.id for h in hunks if h.id not in chosen])
        expected = splice(base, [(h.base_start, h.base_end, h.new) for h in hunks if h.id in chosen])
        assert decode(Path(tmp, "f.txt").read_bytes())[0] == expected
        if not chosen:
            assert Path(tmp, "f.txt").read_bytes() == original
        if len(chosen) == len(hunks):
            assert decode(Path(tmp, "f.txt").read_bytes())[0] == target


@given(fmt=FMT, base=TEXT, target=TEXT)
def test_accept_all_then_undo_restores_bytes(fmt, base, target):
    if not _valid(fmt, base, target):
        return
    answer = RENDERERS[fmt]("f.txt", base, target)
    with tempfile.TemporaryDirectory() as tmp:
        ws = _setup(tmp, base)
        original = Path(tmp, "f.txt").read_bytes()
        pending = stream(ws, answer, fmt=fmt, context=["f.txt"], removal_asked=True)
        hunks = pending.hunks
        review = Review(ws, pending)
        review.accept_all()
        # flagged deletions (whole files only) stay out of a bulk accept, and only they
        flagged = [h for h in hunks if h.warning]
        assert not flagged or fmt == "whole"
        assert all(h.state == (HunkState.PENDING if h.warning else HunkState.ACCEPTED)
                   for h in hunks)
        assert decode(Path(tmp, "f.txt").read_bytes())[0] == splice(
            base, [(h.base_start, h.base_end, h.new) for h in hunks if not h.warning])
        if flagged:
            review.accept([h.id for h in flagged])  # a deliberate accept takes them
        assert decode(Path(tmp, "f.txt").read_bytes())[0] == target
        while review.can_undo:
            review.undo()
        assert Path(tmp, "f.txt").read_bytes() == original
        assert all(h.state == HunkState.PENDING for h in pending.hunks)


# file names as real projects have them: brackets (Next.js routes), parentheses, spaces,
# non-ASCII; those with spaces name a file only when it exists (the parser asks)
NAMES = st.sampled_from(["f.txt", "lib/[id].ts", "app/[slug]/page.tsx", "app/(auth)/page.tsx",
                         "a (copy).py", "my notes/to do.md", "données/été.py", "src/日本語.py"])


@given(fmt=FMT, base=st.one_of(st.none(), TEXT), target=TEXT, name=NAMES, data=st.data())
def test_parser_is_chunking_invariant(fmt, base, target, name, data):
    if not _valid(fmt, base, target):
        return
    if " " in name and base is None and fmt != "apply_patch":
        return  # a new file whose name has spaces is named by apply_patch's header only
    exists = {name, "other.py"}.__contains__ if base is not None else {"other.py"}.__contains__
    # a block for another file first: the odd name's block must not go to it
    answer = RENDERERS[fmt]("other.py", ["x"], ["y"]) + RENDERERS[fmt](name, base, target)
    p = make_parser(fmt, exists=exists)
    reference = p.feed(answer) + p.finish()
    assert [e.path for e in reference if isinstance(e, EditBegin)][-1:] == [name]
    assert {e.path for e in reference if isinstance(e, EditBegin)} == {"other.py", name}
    cuts = sorted(set(_cuts(data, len(answer))))
    p = make_parser(fmt, exists=exists)
    events, pos = [], 0
    for c in cuts:
        events += p.feed(answer[pos:c])
        pos = max(pos, c)
    events += p.feed(answer[pos:]) + p.finish()
    assert events == reference
    one = make_parser(fmt, exists=exists)
    single = [e for ch in answer for e in one.feed(ch)] + one.finish()
    assert single == reference
