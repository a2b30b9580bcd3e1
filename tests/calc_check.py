"""The check scenario of tests/test_run_fix.py and tests/test_proposal_check.py: calc.py
gains `sub`, its test fails on the first answer (`sub` adds) and passes on the fix, which is
an edit against the proposal's own text."""

from __future__ import annotations

import shlex
import sys

from conftest import sr

CHECK = f"{shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider test_calc.py"
CALC = "def add(a, b):\n    return a + b\n"
TESTS = ("from calc import add, sub\n\n\ndef test_add():\n    assert add(2, 1) == 3\n\n\n"
         "def test_sub():\n    assert sub(2, 1) == 1\n")
BROKEN = "Added sub.\n\n" + sr("calc.py", CALC, CALC + "\n\ndef sub(a, b):\n    return a + b\n")
FIXED = ("Fixed sub.\n\n"
         + sr("calc.py", "def sub(a, b):\n    return a + b\n", "def sub(a, b):\n    return a - b\n"))
GOOD = CALC + "\n\ndef sub(a, b):\n    return a - b\n"
