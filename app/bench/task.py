"""`steer bench task`: tokens and seconds to an *accepted* change, per edit format.

Fast tokens are not fast tasks: what a user feels is the time and tokens from Enter to the
accepted file on disk, and whether the answer applied exactly. This benchmark runs a fixed
set of small tasks on real files, made at run time from functions of the Python standard
library, each with its expected result (a docstring, a renamed local, a return type hint, a
typo fixed), through the real Session, parser, pending diff and accept:

- `scripted`: a loopback Chat Completions server (`steer serve --replay`'s server) streaming at
  1,000 tokens/s the answer a capable model writes in each format (whole files are sent the
  file as the predicted output, as steer does);
- `model`: the embedded model (SmolLM2-135M, or --model-path), in process.

Per back-end and format it prints the exact-apply rate, the answer tokens spent per changed
line accepted exactly, the time from Enter to the accepted file on disk, and for whole-file
answers how many would have deleted code they should not have if read literally (and how
many still did after steer read them). It measures; it asserts nothing.
"""

from __future__ import annotations

import ast
import asyncio
import difflib
import importlib
import inspect
import io
import os
import statistics
import sys
import tempfile
import textwrap
import time
import tokenize
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path

from app.core.edits import formats as edit_formats
from app.core.edits.formats import FORMATS, make_parser
from app.core.edits.formats.events import EditBegin, EditEnd, Line
from app.core.text.linediff import line_diff

# (module, function, kind, argument): the same tasks on every run and machine with 3.11+
TASKS: list[tuple[str, str, str, str]] = [
    ("colorsys", "rgb_to_yiq", "docstring", "Convert RGB to YIQ."),
    ("posixpath", "splitext", "docstring", "Split the extension from a path."),
    ("calendar", "_prevmonth", "docstring", "Return the year and month before this one."),
    ("glob", "has_magic", "docstring", "Tell whether a pattern has wildcards."),
    ("difflib", "_calculate_ratio", "docstring", "Return the similarity ratio."),
    ("statistics", "_isfinite", "docstring", "Tell whether x is finite."),
    ("colorsys", "rgb_to_yiq", "rename", "y:luma"),
    ("zipfile", "_gen_crc", "rename", "crc:value"),
    ("calendar", "_nextmonth", "rename", "month:mon"),
    ("urllib.parse", "_splitnetloc", "rename", "delim:cut"),
    ("shutil", "_destinsrc", "rename", "src:source"),
    ("quopri", "encodestring", "rename", "outfp:out"),
    ("glob", "has_magic", "hint", "bool"),
    ("calendar", "_prevmonth", "hint", "tuple"),
    ("difflib", "_calculate_ratio", "hint", "float"),
    ("colorsys", "rgb_to_yiq", "hint", "tuple"),
    ("posixpath", "_get_sep", "hint", "str"),
    ("urllib.parse", "splittype", "hint", "tuple"),
    ("glob", "has_magic", "typo", "retrun"),
    ("calendar", "_nextmonth", "typo", "retrun"),
    ("difflib", "_calculate_ratio", "typo", "retrun"),
    ("statistics", "_isfinite", "typo", "retrun"),
    ("posixpath", "_get_sep", "typo", "retrun"),
    ("zipfile", "_gen_crc", "typo", "retrun"),
]
QUICK = (0, 6, 12, 18, 1, 7)  # one or two of each kind


@dataclass
class Task:
    name: str
    path: str
    instruction: str
    base: str
    expected: str

    @property
    def changed_lines(self) -> int:
        a, b = self.base.split("\n"), self.expected.split("\n")
        return sum(max(a2 - a1, b2 - b1) for a1, a2, b1, b2 in line_diff(a, b))


def _module(module: str) -> tuple[str, list[ast.FunctionDef]]:
    src = inspect.getsource(importlib.import_module(module))
    return src, [n for n in ast.parse(src).body
                 if isinstance(n, ast.FunctionDef) and not n.decorator_list]


def _function(module: str, name: str) -> str:
    """The source of a top-level function, read from its module's file (a C accelerator may
    stand in for the Python function at run time)."""
    src, funcs = _module(module)
    node = next(n for n in funcs if n.name == name)
    lines = src.split("\n")[node.lineno - 1 : node.end_lineno]
    return textwrap.dedent("\n".join(lines)).rstrip("\n") + "\n"


def _neighbour(module: str, name: str) -> str:
    """Another small top-level function of the same module: the rest of the file, which a
    change to `name` must leave alone."""
    _, funcs = _module(module)
    sizes = {n.name: (n.end_lineno or n.lineno) - n.lineno + 1 for n in funcs}  # (parse sets it)
    names = [n.name for n in funcs]
    i = names.index(name)
    for other in names[i + 1 :] + names[:i][::-1]:
        if other != name and 3 <= sizes[other] <= 10:
            return _function(module, other)
    return ""


def _rename(src: str, func: str, old: str, new: str) -> str:
    """`src` with the name `old` renamed to `new` inside function `func` (tokens, not text)."""
    tree = ast.parse(src)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == func)
    out, lines = [], src.split("\n")
    edits: dict[int, list[tuple[int, int]]] = {}
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        row = tok.start[0]
        end = node.end_lineno or node.lineno  # (set by ast.parse; Optional in the stubs)
        if tok.type == tokenize.NAME and tok.string == old and node.lineno <= row <= end:
            edits.setdefault(row - 1, []).append((tok.start[1], tok.end[1]))
    for i, line in enumerate(lines):
        for s, e in sorted(edits.get(i, []), reverse=True):
            line = line[:s] + new + line[e:]
        out.append(line)
    return "\n".join(out)


def make_tasks(quick: bool = False) -> list[Task]:
    tasks = []
    chosen = [TASKS[i] for i in QUICK] if quick else TASKS
    for n, (module, func, kind, arg) in enumerate(chosen):
        target = _function(module, func)
        rest = _neighbour(module, func)
        # the function first in half of the files, second in the other half
        parts = [target, rest] if n % 2 == 0 else [rest, target]
        base = "\n\n".join(p.rstrip("\n") for p in parts if p) + "\n"
        lines = base.split("\n")
        def_at = next(i for i, t in enumerate(lines) if t.startswith(f"def {func}("))
        if kind == "docstring":
            body = lines[def_at + 1]
            indent = body[: len(body) - len(body.lstrip())]
            expected = "\n".join(lines[: def_at + 1] + [f'{indent}"""{arg}"""'] + lines[def_at + 1 :])
            instruction = f'Add the docstring "{arg}" to {func}.'
        elif kind == "rename":
            old, new = arg.split(":")
            expected = _rename(base, func, old, new)
            instruction = f"Rename the local variable {old} to {new} in {func}."
        elif kind == "hint":
            line = lines[def_at]
            k = line.rindex("):")
            expected = "\n".join(lines[:def_at] + [line[:k] + f") -> {arg}:" + line[k + 2 :]]
                                 + lines[def_at + 1 :])
            instruction = f"Add the return type hint -> {arg} to {func}."
        else:  # typo: the file has one, the expected result is the original
            end = def_at + _function(module, func).count("\n")
            at = next(i for i in range(def_at, end) if "return " in lines[i])
            expected = base
            lines[at] = lines[at].replace("return ", f"{arg} ", 1)
            base = "\n".join(lines)
            instruction = f'Fix the typo "{arg}" in {func}.'
        path = f"{module.replace('.', '_')}_{func.strip('_')}.py"
        tasks.append(Task(f"{kind}:{module}.{func}", path, instruction, base, expected))
    return tasks


# -- the answers a capable model writes ----------------------------------------------------------
def scripted_answer(task: Task, fmt: str) -> str:
    """The answer a capable model writes for `task` in `fmt` (the format's record writes it)."""
    write = edit_formats.get(fmt).write
    assert write is not None, f"{fmt} is not a format a model writes"
    a, b = task.base.rstrip("\n").split("\n"), task.expected.rstrip("\n").split("\n")
    return write(task.path, a, b, "python")


# -- measuring ----------------------------------------------------------------------------------
def _literal(text: str, path: str) -> list[str] | None:
    """The first whole-file block for `path` in an answer, read literally."""
    p = make_parser("whole", frozenset({path}))
    lines, inside = [], False
    for ev in p.feed(text) + p.finish():
        if isinstance(ev, EditBegin):
            inside = ev.kind == "whole"
        elif isinstance(ev, Line) and inside:
            lines.append(ev.text)
        elif isinstance(ev, EditEnd) and inside:
            return lines
    return lines if inside else None


def _lost(task: Task, result: list[str]) -> int:
    """Lines of code the expected result keeps from the file that `result` deletes: with
    nothing in their place (a wrong rewrite of a line is wrong, but not a deletion)."""
    base = task.base.rstrip("\n").split("\n")
    exp = task.expected.rstrip("\n").split("\n")
    kept = {j for m in difflib.SequenceMatcher(None, base, exp, autojunk=False).get_matching_blocks()
            for j in range(m.b, m.b + m.size) if exp[j].strip()}
    lost = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, exp, result,
                                                       autojunk=False).get_opcodes():
        if tag in ("delete", "replace") and (i2 - i1) > (j2 - j1):
            lost += min(sum(1 for i in range(i1, i2) if i in kept), (i2 - i1) - (j2 - j1))
    return lost


async def _one(task: Task, provider, fmt: str, root: Path) -> dict:
    from app.core.conversation.session import Session
    from app.core.disk.workspace import Workspace

    d = root / task.name.replace(":", "_").replace(".", "_") / fmt
    d.mkdir(parents=True)
    (d / task.path).write_text(task.base)
    session = Session(Workspace(d), provider, fmt=fmt, context=[task.path])
    t0 = time.perf_counter()
    turn = await session.ask(task.instruction)
    assert session.review is not None and session.pending is not None
    out = session.review.accept_all() if turn.complete else None
    t1 = time.perf_counter()
    got = (d / task.path).read_text()
    row = {"task": task.name, "exact": got == task.expected, "tokens": turn.tokens,
           "written": bool(out and out.written), "enter_to_disk_s": t1 - t0,
           "flagged": sum(1 for h in session.pending.hunks if h.warning),
           "lost_lines": _lost(task, got.rstrip("\n").split("\n"))}
    if turn.usage is not None and turn.usage.accepted_prediction is not None:
        row["prediction"] = [turn.usage.accepted_prediction, turn.usage.rejected_prediction]
    if edit_formats.get(fmt).whole_file:
        literal = _literal(turn.text, task.path)
        row["literal_lost_lines"] = _lost(task, literal) if literal else 0
    return row


def _summary(tasks: list[Task], rows: list[dict], fmt: str) -> dict:
    exact = [r for r, t in zip(rows, tasks, strict=True) if r["exact"]]
    changed = sum(t.changed_lines for r, t in zip(rows, tasks, strict=True) if r["exact"])
    tokens = sum(r["tokens"] for r in rows)
    times = [r["enter_to_disk_s"] for r in rows if r["exact"]]
    out = {
        "tasks": len(rows),
        "exact": len(exact),
        "exact_apply_rate": round(len(exact) / len(rows), 3) if rows else None,
        "answer_tokens": tokens,
        "tokens_per_task": round(tokens / len(rows), 1) if rows else None,
        "tokens_per_accepted_changed_line": round(tokens / changed, 1) if changed else None,
        "enter_to_disk_s_median": round(statistics.median(times), 3) if times else None,
        "enter_to_disk_s_all_median": round(statistics.median(r["enter_to_disk_s"] for r in rows), 3),
        "flagged_hunks": sum(r["flagged"] for r in rows),
        # accepted with Accept all: files that lost lines of code they should have kept
        "accepted_files_that_deleted_code": sum(1 for r in rows if r["lost_lines"]),
        "accepted_lines_of_code_deleted": sum(r["lost_lines"] for r in rows),
    }
    if edit_formats.get(fmt).whole_file:
        # the same answers read literally (a whole file is the whole file), as before issue 11
        out["literal_reading_would_delete_code"] = sum(1 for r in rows if r.get("literal_lost_lines"))
        out["literal_reading_lines_deleted"] = sum(r.get("literal_lost_lines", 0) for r in rows)
    preds = [r["prediction"] for r in rows if "prediction" in r]
    if preds:
        out["prediction_tokens_accepted_rejected"] = [sum(p[0] for p in preds), sum(p[1] for p in preds)]
    return out


async def _scripted(tasks: list[Task], formats: list[str], rate: float, root: Path) -> dict:
    from app.providers.openai_chat import OpenAIChat
    from app.server.chat_server import ChatServer

    result = {}
    for fmt in formats:
        server = ChatServer(replay=[scripted_answer(t, fmt) for t in tasks], rate=rate)
        await server.start()
        provider = OpenAIChat(server.base_url, "scripted")
        try:
            rows = [await _one(t, provider, fmt, root / "scripted") for t in tasks]
        finally:
            await provider.aclose()
            await server.close()
        result[fmt] = {**_summary(tasks, rows, fmt), "rows": rows}
    return result


async def _model(tasks: list[Task], formats: list[str], model_path: str | None, root: Path) -> dict:
    from app.providers.local import LocalModel

    provider = LocalModel(model_path)
    await provider.warm()
    result = {}
    for fmt in formats:
        rows = []
        for i, t in enumerate(tasks, 1):
            rows.append(await _one(t, provider, fmt, root / "model"))
            r = rows[-1]
            print(f"steer bench task: model {fmt} {i}/{len(tasks)} {t.name}: "
                  f"{'exact' if r['exact'] else 'not exact'}, {r['tokens']} tok, "
                  f"{r['enter_to_disk_s']:.1f} s", file=sys.stderr, flush=True)
        result[fmt] = {**_summary(tasks, rows, fmt), "rows": rows}
    return result


def run(quick: bool = False, formats: list[str] | None = None, backends: list[str] | None = None,
        rate: float = 1000.0, model_path: str | None = None, rows: bool = False) -> dict:
    tasks = make_tasks(quick)
    formats = formats or list(FORMATS)
    out: dict = {"bench": "task", "tasks": len(tasks), "quick": quick,
                 "task_names": [t.name for t in tasks],
                 "mean_file_lines": round(statistics.mean(t.base.count("\n") for t in tasks), 1)}
    return run_backends(out, formats, backends, rows,
                        lambda root: _scripted(tasks, formats, rate, root),
                        lambda root: _model(tasks, formats, model_path, root), rate)


def run_backends(out: dict, formats: list[str], backends: list[str] | None, rows: bool,
                 scripted: Callable[[Path], Coroutine[None, None, dict]],
                 model: Callable[[Path], Coroutine[None, None, dict]], rate: float) -> dict:
    """Run the back-ends asked for in a scratch folder (their journal too), into `out`;
    every task's row kept only with `rows`. Shared with task_check.py."""
    backends = backends or ["scripted", "model"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        old = os.environ.get("XDG_STATE_HOME")
        os.environ["XDG_STATE_HOME"] = str(root / "state")  # the journal of these runs
        try:
            if "scripted" in backends:
                out["scripted"] = {"rate_tokens_per_s": rate, **asyncio.run(scripted(root))}
            if "model" in backends:
                out["model"] = asyncio.run(model(root))
        finally:
            if old is None:
                os.environ.pop("XDG_STATE_HOME", None)
            else:
                os.environ["XDG_STATE_HOME"] = old
    if not rows:
        for backend in ("scripted", "model"):
            for fmt in formats:
                out.get(backend, {}).get(fmt, {}).pop("rows", None)
    return out
