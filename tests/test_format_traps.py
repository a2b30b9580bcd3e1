"""Property tests for the format traps: texts that hold the formats' own markers (a README's
fences, an RST title's ======= underline). Whatever the text and however the answer is cut,
an edit is either read exactly as meant or refused with a message: never a garbled file."""

from __future__ import annotations

import tempfile
from pathlib import Path

from conftest import stream
from hypothesis import given
from hypothesis import strategies as st
from render_answers import RENDERERS

from app.core.disk.workspace import Workspace
from app.core.review.review import Review
from app.core.text.textfile import decode

PROSE = st.sampled_from(["Intro", "", "text", "- item", "Title", "x = 1"])
TAGGED = st.builds(lambda lang, body: [f"```{lang}", *body, "```"],
                   st.sampled_from(["sh", "python", "json"]), st.lists(PROSE, max_size=4))
# documents whose inner blocks all carry a language tag: unambiguous to a careful reader
DOC = st.lists(st.one_of(PROSE.map(lambda t: [t]), TAGGED), max_size=12).map(
    lambda parts: [line for part in parts for line in part])
# anything goes: bare fences, tagged ones, underlines
TRAPS = st.lists(st.sampled_from(["Intro", "", "text", "Title", "```", "```sh", "~~~", "=======",
                                  "-------", "x = 1"]), max_size=16)


def balanced(lines: list[str]) -> bool:
    """Every fenced block inside the text is closed (as CommonMark pairs them). A text that
    leaves one open cannot be fenced with ``` faithfully: its answer has one reading, not
    the one meant (the prompt asks for a longer fence then)."""
    stack: list[str] = []
    for t in lines:
        if not t.startswith(("```", "~~~")):
            continue
        run = t[: len(t) - len(t.lstrip(t[0]))]
        if stack:
            if run == t and run[0] == stack[-1][0] and len(run) >= len(stack[-1]):
                stack.pop()
        else:
            stack.append(run)
    return not stack


def _cuts(data, n: int) -> list[int]:
    return data.draw(st.lists(st.integers(0, max(n, 1)), max_size=30))


def _run(fmt: str, base: list[str] | None, target: list[str], cuts: list[int], name: str):
    answer = RENDERERS[fmt](name, base, target)
    tmp = tempfile.TemporaryDirectory()
    if base is not None:
        Path(tmp.name, name).parent.mkdir(parents=True, exist_ok=True)
        Path(tmp.name, name).write_text("".join(t + "\n" for t in base))
    ws = Workspace(tmp.name)
    # removal asked: a whole file is read as written (these tests are about the parser), and
    # a deletion it may not mean is flagged, for a deliberate accept (_accept_all)
    pending = stream(ws, answer, fmt=fmt, context=[name] if base is not None else [], cuts=cuts,
                     removal_asked=True)
    return tmp, ws, pending


def _accept_all(ws: Workspace, pending) -> None:
    review = Review(ws, pending)
    review.accept_all()
    review.accept([h.id for h in pending.hunks if h.warning and h.state == "pending"])


@given(base=DOC, target=DOC, data=st.data())
def test_a_document_with_tagged_blocks_comes_through_whole(base, target, data):
    if not target or base == target:
        return
    answer = RENDERERS["whole"]("README.md", base, target)
    tmp, ws, pending = _run("whole", base, target, _cuts(data, len(answer)), "README.md")
    with tmp:
        assert not pending.errors, (answer, pending.errors)
        assert pending.files["README.md"].proposal() == target
        _accept_all(ws, pending)
        assert decode(Path(tmp.name, "README.md").read_bytes())[0] == target


@given(fmt=st.sampled_from(sorted(RENDERERS)), base=TRAPS, target=TRAPS,
       name=st.sampled_from(["README.md", "docs/index.rst", "f.txt"]), data=st.data())
def test_a_trap_is_read_exactly_or_refused(fmt, base, target, name, data):
    if base == target or (fmt == "whole" and not (target and balanced(target))):
        return
    answer = RENDERERS[fmt](name, base, target)
    tmp, ws, pending = _run(fmt, base, target, _cuts(data, len(answer)), name)
    with tmp:
        fd = pending.files.get(name)
        if not pending.errors and fd is not None:  # (an empty block first is read as prose)
            assert fd.proposal() == target, answer
        original = Path(tmp.name, name).read_bytes()
        _accept_all(ws, pending)
        now = Path(tmp.name, name).read_bytes()
        # what is written is the target, or the base with only whole, unrefused blocks applied
        # (search/replace blocks are independent); never text the model did not mean
        if fmt == "whole" or not pending.errors:
            assert now == original or decode(now)[0] == target, answer
