"""`make mutants`: the functions a test reaches through the processes it starts.

mutmut first runs the tests once to learn which tests reach which function (its "stats" run),
then runs only those tests against each planted bug in that function. It learns this inside
the pytest process only. Many of steer's tests run steer itself in a child process (`steer
run`, a second writer racing an accept, a SIGKILL mid-write), and a child cannot record into
mutmut: it looks for mutmut's config in its own cwd and stops. Without this, each function
reached only from a child counts as "no tests", and its bugs are never run.

Two halves, both only in `make mutants`' scratch copy (app/bench/mutants.py wires them):
- in each child, `sitecustomize` calls `record_in_child()`: each function reached is appended,
  once, to a file of its own in $STEER_MUTANTS_HITS (at once, so a child killed later loses
  nothing);
- in pytest, this module is a plugin (`-p app.bench.mutants_children`): before mutmut files
  the hits of a test (at its teardown), it adds those of the test's children.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HITS = "STEER_MUTANTS_HITS"


def _stats_run() -> bool:
    return os.environ.get("MUTANT_UNDER_TEST") == "stats"


def record_in_child() -> None:
    folder = os.environ.get(HITS)
    if not (folder and _stats_run()):
        return
    from mutmut.mutation import trampoline  # only in the scratch copy's runs

    seen: set[str] = set()
    path = os.path.join(folder, f"{os.getpid()}.hits")

    def record(name: str, caller: str | None = None) -> None:
        if name not in seen:
            seen.add(name)
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(name + "\n")

    trampoline.record_trampoline_hit = record


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: Any, nextitem: Any) -> Iterator[None]:
    folder = os.environ.get(HITS)
    if folder and _stats_run():
        from mutmut.state import state

        for hits in Path(folder).glob("*.hits"):
            state()._stats.update(hits.read_text(encoding="utf-8").split())
            hits.unlink()
    yield


def pytest_configure(config: Any) -> None:
    if _stats_run() and HITS not in os.environ:
        folder = tempfile.mkdtemp(prefix="steer-mutants-hits-")
        os.environ[HITS] = folder
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
