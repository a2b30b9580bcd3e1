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


_DIVIDER = "======="


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
        # a refusal is free only where the text holds the format's own divider: a block whose
        # lines are "=======" has two readings (the answers are fenced as the prompts ask, so
        # an inner fence never closes a block); anything else is read exactly
        if pending.errors or fd is None:
            assert fmt == "search_replace" and _DIVIDER in base + target, (answer, pending.errors)
        original = Path(tmp.name, name).read_bytes()
        _accept_all(ws, pending)
        now = Path(tmp.name, name).read_bytes()
        # what is written is the target, or the base with only whole, unrefused blocks applied
        # (search/replace blocks are independent); never text the model did not mean
        if fmt == "whole" or not pending.errors:
            assert now == original or decode(now)[0] == target, answer


def test_refusals_are_counted_and_only_the_ambiguous_are_refused():
    """The property test above lets a refusal through only for a text holding the divider;
    here, over a fixed corpus, the count: every format reads every other example exactly,
    and what search/replace refuses is bounded by the examples that hold the divider."""
    import random

    alphabet = ["Intro", "", "text", "Title", "```", "```sh", "~~~", _DIVIDER, "-------", "x = 1"]
    rng = random.Random(7)
    seen = {f: [0, 0, 0] for f in RENDERERS}  # examples, refused, holding the divider
    for i in range(240):
        fmt = sorted(RENDERERS)[i % len(RENDERERS)]
        base = [rng.choice(alphabet) for _ in range(rng.randint(0, 16))]
        target = [rng.choice(alphabet) for _ in range(rng.randint(0, 16))]
        name = rng.choice(["README.md", "docs/index.rst", "f.txt"])
        if base == target or (fmt == "whole" and not (target and balanced(target))):
            continue
        tmp, ws, pending = _run(fmt, base, target, [], name)
        with tmp:
            fd = pending.files.get(name)
            refused = bool(pending.errors) or fd is None
            if not refused:
                assert fd is not None and fd.proposal() == target
            seen[fmt][0] += 1
            seen[fmt][1] += refused
            seen[fmt][2] += _DIVIDER in base + target
    for fmt, (n, refused, divided) in seen.items():
        assert n >= 20, seen  # enough examples of each to count
        assert refused <= (divided if fmt == "search_replace" else 0), seen
    assert seen["search_replace"][0] - seen["search_replace"][1] >= 10, seen  # not all refused
