"""`steer bench task --check`: the same tasks (task.py), each with a test that only its exact
result passes (the file's syntax tree equals the expected one), checked before any accept as
`steer run --check --fix 2` does: the proposal written into a throwaway git worktree, the
test run there, a failure sent back as a follow-up (the same change set), up to FIXES times.

Per back-end and format: the pass rate after 0, 1 and 2 fix rounds; tokens and seconds from
Enter to an accepted change that passes; and how many first proposals that fail the test
Accept all would have written without the check. The scripted back-end's first answer is
broken in a third of the tasks (the target function's last line returns None), and its fix
is the edit a capable model sends against its own proposal. It measures; it asserts nothing.
"""

from __future__ import annotations

import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

from app.bench.task import Task, scripted_answer
from app.core.edits import formats as edit_formats
from app.core.edits.hunks import OPEN

FIXES = 2
TEST = "test_exact.py"


def broken(task: Task) -> str:
    """`task`'s expected file with its function's last line replaced by a wrong return: a
    plausible slip that parses, which only the test tells from the right answer."""
    lines = task.expected.split("\n")
    func = task.name.rsplit(".", 1)[-1]
    start = next(i for i, t in enumerate(lines) if t.startswith(f"def {func}("))
    end = next((i for i in range(start + 1, len(lines)) if lines[i] and not lines[i][0].isspace()),
               len(lines))
    last = max(i for i in range(start + 1, end) if lines[i].strip())
    indent = lines[last][: len(lines[last]) - len(lines[last].lstrip())]
    wrong = "return None" if lines[last].strip() != "return None" else "return 0"
    return "\n".join(lines[:last] + [indent + wrong] + lines[last + 1:])


def _write(fmt: str, path: str, a: str, b: str) -> str:
    write = edit_formats.get(fmt).write
    assert write is not None
    return write(path, a.rstrip("\n").split("\n"), b.rstrip("\n").split("\n"), "python")


def scripted_answers(tasks: list[Task], fmt: str, only: int | None = None) -> list[str]:
    """In the order they are asked: every third task's broken answer then its fix, the
    others' right answer (`only`: task `only`'s alone)."""
    out = []
    for i, t in enumerate(tasks):
        if only is not None and i != only:
            continue
        if i % 3 == 0:
            wrong = broken(t)
            out += [f"Done.\n\n{_write(fmt, t.path, t.base, wrong)}",
                    f"Fixed.\n\n{_write(fmt, t.path, wrong, t.expected)}"]
        else:
            out.append(scripted_answer(t, fmt))
    return out


def _repo(d: Path, task: Task) -> None:
    d.mkdir(parents=True)
    (d / task.path).write_text(task.base)
    (d / TEST).write_text(
        "import ast\nimport pathlib\n\n\ndef test_exact():\n"
        f"    got = ast.dump(ast.parse(pathlib.Path({task.path!r}).read_text()))\n"
        f"    assert got == ast.dump(ast.parse({task.expected!r}))\n")
    for args in (["init", "-q", "-b", "main"], ["add", "."],
                 ["-c", "user.email=b@steer", "-c", "user.name=bench", "commit", "-qm", "task"]):
        subprocess.run(["git", *args], cwd=d, check=True, capture_output=True)


async def one(task: Task, provider, fmt: str, root: Path) -> dict:
    from app.core.conversation import prompts
    from app.core.conversation.session import Session
    from app.core.disk.workspace import Workspace
    from app.core.variants.check import Checks, verdict
    from app.core.variants.group import final_files

    d = root / task.name.replace(":", "_").replace(".", "_") / fmt
    _repo(d, task)
    cmd = f"{shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider {TEST}"
    session = Session(Workspace(d), provider, fmt=fmt, context=[task.path])
    t0 = time.perf_counter()
    turn = await session.ask(task.instruction)
    tokens, passed_at, first_would_write = turn.tokens, None, False
    for rnd in range(FIXES + 1):
        if not turn.complete or session.pending is None or not session.pending.hunks:
            break
        checks = Checks(d, cmd, timeout=60)
        try:
            checks.start(1, final_files(session.pending))
            checks.close_starts()
            await checks.first_pass()
            result = checks.results[1]
        finally:
            await checks.aclose()
        if result.passed:
            passed_at = rnd
            break
        if rnd == 0:  # what Accept all would have written without the check
            first_would_write = any(h.state in OPEN and not h.warning for h in session.pending.hunks)
        if rnd == FIXES:
            break
        turn = await session.ask(prompts.check_failed(cmd, verdict(result), result.output))
        tokens += turn.tokens
    written = False
    if passed_at is not None and session.review is not None:
        written = bool(session.review.accept_all().written)
    t1 = time.perf_counter()
    exact = (d / task.path).read_text() == task.expected  # (the provider is shared: kept open)
    return {"task": task.name, "passed_at": passed_at, "tokens": tokens, "written": written,
            "exact": exact, "enter_to_passing_disk_s": t1 - t0 if written else None,
            "broken_first_would_reach_disk": first_would_write}


def summary(rows: list[dict]) -> dict:
    n = len(rows)
    done = [r for r in rows if r["enter_to_passing_disk_s"] is not None]

    def rate(k: int) -> float:
        return round(sum(1 for r in rows if r["passed_at"] is not None and r["passed_at"] <= k) / n, 3)

    return {
        "tasks": n,
        "pass_rate_after_fixes": {str(k): rate(k) for k in range(FIXES + 1)},
        "tokens_to_passing_change_median": statistics.median(r["tokens"] for r in done) if done else None,
        "enter_to_passing_disk_s_median": round(statistics.median(
            r["enter_to_passing_disk_s"] for r in done), 3) if done else None,
        "broken_first_proposals_that_would_reach_disk": sum(r["broken_first_would_reach_disk"]
                                                          for r in rows),
        "written_and_exact": sum(1 for r in rows if r["written"] and r["exact"]),
    }


async def _scripted(tasks: list[Task], formats: list[str], rate: float, root: Path) -> dict:
    from app.providers.openai_chat import OpenAIChat
    from app.server.chat_server import ChatServer

    result = {}
    for fmt in formats:
        rows = []
        for i, t in enumerate(tasks):  # a server per task: a fix that does not apply cannot
            server = ChatServer(replay=scripted_answers(tasks, fmt, only=i), rate=rate)
            await server.start()  # shift the next task's answers
            provider = OpenAIChat(server.base_url, "scripted")
            try:
                rows.append(await one(t, provider, fmt, root / "scripted"))
            finally:
                await provider.aclose()
                await server.close()
        result[fmt] = {**summary(rows), "rows": rows}
    return result


async def _model(tasks: list[Task], formats: list[str], model_path: str | None, root: Path) -> dict:
    from app.providers.local import LocalModel

    provider = LocalModel(model_path)
    await provider.warm()
    result = {}
    try:
        for fmt in formats:
            rows = []
            for i, t in enumerate(tasks, 1):
                rows.append(await one(t, provider, fmt, root / "model"))
                r = rows[-1]
                verdict = (f"failed every round (1 + {FIXES} fixes)" if r["passed_at"] is None
                           else f"passed at round {r['passed_at']}")
                print(f"steer bench task --check: model {fmt} {i}/{len(tasks)} {t.name}: "
                      f"{verdict}, {r['tokens']} tok", file=sys.stderr, flush=True)
            result[fmt] = {**summary(rows), "rows": rows}
    finally:
        await provider.aclose()
    return result


def run(quick: bool = False, formats: list[str] | None = None, backends: list[str] | None = None,
        rate: float = 1000.0, model_path: str | None = None, rows: bool = False) -> dict:
    from app.bench.task import make_tasks, run_backends
    from app.core.edits.formats import FORMATS

    tasks = make_tasks(quick)
    formats = formats or list(FORMATS)
    out: dict = {"bench": "task", "check": True, "fixes": FIXES, "tasks": len(tasks),
                 "quick": quick, "task_names": [t.name for t in tasks]}
    return run_backends(out, formats, backends, rows,
                        lambda root: _scripted(tasks, formats, rate, root),
                        lambda root: _model(tasks, formats, model_path, root), rate)
