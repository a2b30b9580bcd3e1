"""The parse check behind line mode's ⚠ (app/core/text/parses.py): a change is flagged
exactly when it turns a file that parsed into one that does not."""

from __future__ import annotations

import ast

from hypothesis import given, settings
from hypothesis import strategies as st

from app.bench.demo import CALC
from app.core.text import parses

LINES = CALC.splitlines()


def parses_really(lines: list[str]) -> bool:
    try:
        ast.parse("\n".join(lines) + "\n")
    except (SyntaxError, ValueError):
        return False
    return True


def test_the_minus_line_alone_of_a_replace_pair_is_flagged():
    i = LINES.index("def add(a, b):")
    after = LINES[:i] + LINES[i + 1:]  # the def goes, its body stays
    msg = parses.breaks("calc.py", LINES, after)
    assert msg and f"line {i + 1}" in msg


def test_the_plus_line_alone_of_a_replace_pair_is_flagged():
    i = LINES.index("def add(a, b):")
    after = LINES[: i + 1] + ["def add(a: float, b: float) -> float:"] + LINES[i + 1:]
    assert parses.breaks("calc.py", LINES, after)


def test_whole_pairs_and_files_steer_cannot_parse_are_not_flagged():
    i = LINES.index("def add(a, b):")
    after = LINES[:i] + ["def add(a: float, b: float) -> float:"] + LINES[i + 1:]
    assert parses.breaks("calc.py", LINES, after) == ""
    assert parses.breaks("notes.txt", LINES, LINES[1:]) == ""  # not a language steer parses
    assert parses.breaks("calc.PY", LINES, ["def ("]) != ""  # the suffix, whatever its case


def test_a_file_already_broken_is_not_the_picks_fault():
    broken = ["def f(:"] + LINES
    assert parses.breaks("calc.py", broken, broken[:-1]) == ""


def test_odd_bytes_are_a_message_not_a_crash():
    assert parses.breaks("calc.py", LINES, LINES + ["x = '\x00'"])  # a NUL byte
    deep = parses.breaks("calc.py", LINES, ["x = " + "(" * 5000 + ")" * 5000])
    assert "nest" in deep or "recursion" in deep.lower()  # the parser's limit, said


@settings(max_examples=150, deadline=None)
@given(st.sets(st.integers(0, len(LINES) - 1), max_size=6))
def test_flagged_exactly_when_the_result_stops_parsing(dropped):
    after = [t for i, t in enumerate(LINES) if i not in dropped]
    flagged = parses.breaks("calc.py", LINES, after) != ""
    assert flagged == (not parses_really(after))
