"""A hunk that adds invisible characters (bidi controls, zero-width characters, terminal
controls: app/core/text/invisible.py) is flagged like a large deletion, in every edit format and
for an ACP agent's edits: Accept all and `steer run --accept all` leave it, a deliberate
accept takes it. Lines that only keep the invisible characters they had are not flagged."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from conftest import init_repo, sr, stream
from hypothesis import given
from hypothesis import strategies as st
from invisible_oracle import points
from render_answers import RENDERERS
from test_cli import run_args, served, steer

from app.core.conversation.agent import AgentHost
from app.core.disk.journal import Journal
from app.core.disk.workspace import Workspace
from app.core.edits.diff import PendingDiff
from app.core.edits.hunks import HunkState
from app.core.review.review import Review
from app.core.text.textfile import decode

# what a hostile file, answer or agent would slip into code (no NUL: that makes a file
# binary; no CR: that is a line ending): bidi controls, zero-width characters, terminal
# controls, and default-ignorable letters and marks an identifier can hold
SLY = ["\u202e", "\u2066", "\u2069", "\u200b", "\u200d", "\u2028", "\ufeff", "\u00ad",
       "\x1b", "\x07", "\x08", "\x7f", "\x9b", "\x0c", "\u3164", "\u115f", "\uffa0",
       "\u034f", "\u17b4", "\u180b", "\ufe00", "\ufe0f", "\U000e0100", "\U000e0041"]
FMT = st.sampled_from(sorted(RENDERERS))


def _ws(tmp: str, base: list[str]) -> Workspace:
    Path(tmp, "f.txt").write_text("".join(t + "\n" for t in base))
    return Workspace(tmp)


def _points(lines: list[str]) -> set[str]:  # by Unicode's lists, not the app's
    return points(lines)


@st.composite
def slipped(draw):
    """A clean file of unique lines and a target that changes some of them, with invisible
    characters slipped into some of the new lines."""
    n = draw(st.integers(1, 14))
    base = [f"line {i} = {i * 7}" for i in range(n)]
    target: list[str] = []
    fresh = iter(range(1000, 2000))
    for line in base:
        op = draw(st.sampled_from(["keep", "keep", "change", "drop", "insert"]))
        if op in ("keep", "insert"):
            target.append(line)
        if op in ("change", "insert"):
            target.append(f"new {next(fresh)} = 1")
    k = len(target)
    new_at = [i for i, t in enumerate(target) if t.startswith("new ")]
    if not new_at:
        target.append(f"new {next(fresh)} = 1")
        new_at = [k]
    for i in draw(st.lists(st.sampled_from(new_at), min_size=1, max_size=3, unique=True)):
        ch = draw(st.sampled_from(SLY))
        at = draw(st.integers(0, len(target[i])))
        target[i] = target[i][:at] + ch + target[i][at:]
    return base, target


@given(fmt=FMT, case=slipped())
def test_a_hunk_adding_invisible_characters_is_flagged_and_left_by_accept_all(fmt, case):
    base, target = case
    answer = RENDERERS[fmt]("f.txt", base, target)
    with tempfile.TemporaryDirectory() as tmp:
        ws = _ws(tmp, base)
        pending = stream(ws, answer, fmt=fmt, context=["f.txt"], removal_asked=True)
        assert not pending.errors, pending.errors
        hunks = pending.files["f.txt"].hunks
        # each hunk whose new lines hold an invisible character is flagged, naming it
        for h in hunks:
            named = _points(h.new)
            assert bool(h.hidden) == bool(named), (h.old, h.new, h.hidden)
            assert all(p in h.hidden for p in named)
            if named:
                assert h.hidden.startswith("invisible characters: U+") and h.hidden in h.warning
        assert set().union(*(_points(h.new) for h in hunks)) == _points(target)
        review = Review(ws, pending)
        review.accept_all()
        left = [h for h in hunks if h.warning]
        assert left and all(h.state == HunkState.PENDING for h in left)
        assert all(h.state == HunkState.ACCEPTED for h in hunks if not h.warning)
        disk = decode(Path(tmp, "f.txt").read_bytes())[0]
        assert not _points(disk)  # nothing invisible reached the disk with Accept all
        review.accept([h.id for h in left])  # a deliberate accept takes them
        # byte for byte: a U+FEFF the accept put first is a byte-order mark to a reader
        assert Path(tmp, "f.txt").read_bytes() == "".join(t + "\n" for t in target).encode()


@st.composite
def kept(draw):
    """A file whose unique lines already hold invisible characters here and there, and a
    target that edits around them, or edits those lines keeping the characters they had."""
    n = draw(st.integers(1, 14))
    base = []
    for i in range(n):
        line = f"line {i} = {i * 7}"
        if draw(st.booleans()):
            ch = draw(st.sampled_from(SLY))
            line = f"line {i} = '{ch}'"
        base.append(line)
    target: list[str] = []
    fresh = iter(range(1000, 2000))
    for line in base:
        op = draw(st.sampled_from(["keep", "change", "drop", "insert", "extend"]))
        if op == "keep":
            target.append(line)
        elif op == "change":
            target.append(f"new {next(fresh)} = 1")
        elif op == "insert":
            target += [line, f"new {next(fresh)} = 1"]
        elif op == "extend":  # the line is edited and keeps its invisible character
            target.append(f"{line}  # {next(fresh)}")
    return base, target


@given(fmt=FMT, case=kept())
def test_lines_that_only_keep_their_invisible_characters_are_not_flagged(fmt, case):
    base, target = case
    if base == target or (fmt == "whole" and not target):
        return
    answer = RENDERERS[fmt]("f.txt", base, target)
    with tempfile.TemporaryDirectory() as tmp:
        ws = _ws(tmp, base)
        pending = stream(ws, answer, fmt=fmt, context=["f.txt"], removal_asked=True)
        assert not pending.errors, pending.errors
        hunks = pending.files["f.txt"].hunks
        assert hunks and not any(h.hidden for h in hunks), [(h.old, h.new, h.hidden) for h in hunks]
        Review(ws, pending).accept_all()
        if not any(h.warning for h in hunks):  # (whole files: a deletion may be flagged)
            assert decode(Path(tmp, "f.txt").read_bytes())[0] == target


def test_one_more_of_a_character_the_line_had_is_flagged():
    with tempfile.TemporaryDirectory() as tmp:
        ws = _ws(tmp, ["a = 1", "s = 'x\u200by'", "b = 2"])
        pending = stream(ws, sr("f.txt", "s = 'x\u200by'\n", "s = 'x\u200by\u200b'\n"),
                         context=["f.txt"])
        [h] = pending.files["f.txt"].hunks
        assert h.warning == "invisible characters: U+200B"


def test_both_flags_are_named_when_a_hunk_has_both():
    base = [f"def f{i}():\n    return {i}\n" for i in range(12)]
    text = "".join(base)
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "f.py").write_text(text)
        ws = Workspace(tmp)
        # a whole file that drops most of the code (unasked) and adds an override
        answer = "f.py\n```\ndef f0():\n    return '\u202e0'\n```\n"
        pending = stream(ws, answer, fmt="whole", context=["f.py"])
        flagged = [h for h in pending.files["f.py"].hunks if h.hidden]
        assert flagged and all("U+202E" in h.warning for h in flagged)


def test_an_acp_agents_edit_adding_a_bidi_override_is_flagged(tmp_path):
    """An agent's proposal goes through the same pending diff (AgentHost.propose)."""
    root = tmp_path
    (root / "f.txt").write_text("if admin:\n    grant()\nok\n")
    ws = Workspace(root)
    session = type("S", (), {})()
    session.ws, session.pending, session.on_change = ws, PendingDiff(ws), lambda: None
    host = AgentHost(session)  # type: ignore[arg-type]
    review = Review(ws, session.pending, Journal(root / "journal"))
    fd = session.pending.file("f.txt")
    host.propose(fd, ["if admin:\u202e \u2066# not really\u2069", "    grant()", "ok!"])
    by_new = {h.new[0]: h for h in fd.hunks}
    sly, plain = by_new["if admin:\u202e \u2066# not really\u2069"], by_new["ok!"]
    assert sly.warning == "invisible characters: U+202E, U+2066, U+2069" and not plain.warning
    review.accept_all()
    assert (root / "f.txt").read_text() == "if admin:\n    grant()\nok!\n"
    review.accept([sly.id])
    assert (root / "f.txt").read_text() == "if admin:\u202e \u2066# not really\u2069\n    grant()\nok!\n"


@pytest.mark.parametrize("fmt", ["search_replace", "apply_patch", "whole"])
def test_steer_run_accept_all_leaves_the_flagged_hunk_and_says_so(tmp_path, fmt):
    src = "".join(f"line {i}\n" for i in range(1, 21))
    repo = init_repo(tmp_path / "r", {"f.txt": src})
    target = src.replace("line 3\n", "line three\n").replace("line 15\n", "line 1\u200b5\u202e\n")
    base_lines, target_lines = src.splitlines(), target.splitlines()
    answer = RENDERERS[fmt]("f.txt", base_lines, target_lines)
    with served(answer) as server:
        out = steer(repo, *run_args(server, "--accept", "all", "--format", fmt))
    # rule 9: not everything proposed was written, so not 0
    assert out.returncode == 4, out.stderr
    assert (repo / "f.txt").read_text() == src.replace("line 3\n", "line three\n")
    assert ("not written: f.txt: 1 hunk left: hunk #" in out.stderr
            and "at line 15: invisible characters: U+200B, U+202E" in out.stderr
            and "left for a deliberate accept" in out.stderr), out.stderr


@pytest.mark.parametrize("ch", ["\u3164", "\u034f"])
def test_steer_run_accept_all_leaves_a_hangul_filler_or_a_grapheme_joiner(tmp_path, ch):
    """Two default-ignorable characters a hand list missed: a search/replace hunk that adds
    one is flagged, and `steer run --accept all` writes nothing of it and exits 4."""
    src = "".join(f"line {i}\n" for i in range(1, 21))
    repo = init_repo(tmp_path / "r", {"f.txt": src})
    answer = sr("f.txt", "line 15\n", f"line{ch} 15\n")
    with served(answer) as server:
        out = steer(repo, *run_args(server, "--accept", "all"))
    assert out.returncode == 4, out.stderr
    assert (repo / "f.txt").read_text() == src
    assert (f"at line 15: invisible characters: U+{ord(ch):04X}" in out.stderr
            and "left for a deliberate accept" in out.stderr), out.stderr
