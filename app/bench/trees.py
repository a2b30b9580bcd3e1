"""Trees for the repository-map benchmark and tests: a generated project of any size (Python,
JavaScript and Go modules that define functions and classes and import each other's), and a
copy of this machine's standard library, each made a git repository (aider's map needs one).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

VERBS = ("load save parse render build check merge split fetch store index score rank apply "
         "encode decode resolve compute filter group sort scan sync flush close open start "
         "stop reset retry verify format export import collect update remove insert").split()
NOUNS = ("invoice record ledger account user session token order cart item price tax report "
         "chart table column row query cursor batch queue worker job task event message "
         "channel buffer packet frame header payload schema field value config policy rule "
         "route handler client server socket stream cache entry bucket shard region zone").split()
ADJS = ("pending active stale remote local cached partial nested signed raw final draft "
        "primary shared hidden public private daily weekly legacy").split()
PER_DIR = 200


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def git_commit_all(root: Path) -> None:
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.email", "bench@example.com")
    _git(root, "config", "user.name", "bench")
    _git(root, "config", "gc.auto", "0")  # no repack in the background of a measurement
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "tree")


def _name(rnd: random.Random) -> str:
    return f"{rnd.choice(VERBS)}_{rnd.choice(ADJS)}_{rnd.choice(NOUNS)}"


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(w.title() for w in rest)


def generate_tree(root: Path, files: int, seed: int = 5, *, commit: bool = True) -> list[tuple[str, str]]:
    """`files` source files under `root` (80% Python, 10% JavaScript, 10% Go), each defining
    a few functions (and some a class) and calling functions of earlier modules. Returns every
    (path, function name) defined, for instructions that name a function."""
    rnd = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    defined: list[tuple[str, str]] = []
    py_funcs: list[tuple[str, str]] = []  # (module, name) importable from Python
    for i in range(files):
        folder = f"pkg{i // PER_DIR:03d}"
        kind = rnd.random()
        names = [_name(rnd) for _ in range(rnd.randint(2, 5))]
        calls = [rnd.choice(py_funcs) for _ in range(rnd.randint(1, 4))] if py_funcs else []
        if kind < 0.8:
            rel = f"{folder}/mod{i:05d}.py"
            lines = [f'"""Module {i}: {names[0].replace("_", " ")}."""', ""]
            lines += [f"from {m} import {n}" for m, n in sorted(set(calls))]
            lines.append("")
            for k, name in enumerate(names):
                arg = rnd.choice(NOUNS)
                lines.append(f"def {name}({arg}, limit: int = {k + 1}) -> list:")
                lines.append(f'    """{name.replace("_", " ").capitalize()} for each {arg}."""')
                lines.append("    out = []")
                for _module, n in calls[k % max(1, len(calls)):][:2]:
                    lines.append(f"    out.append({n}({arg}))")
                lines.append("    return out[:limit]")
                lines.append("")
            if rnd.random() < 0.4:
                cls = "".join(w.title() for w in names[0].split("_")[1:]) + "Service"
                lines += [f"class {cls}:", f"    def run(self, {NOUNS[i % len(NOUNS)]}):",
                          f"        return {names[0]}({NOUNS[i % len(NOUNS)]})", ""]
            module = rel[:-3].replace("/", ".")
            py_funcs.extend((module, n) for n in names)
        elif kind < 0.9:
            rel = f"{folder}/web{i:05d}.js"
            names = [_camel(n) for n in names]
            lines = [f"// module {i}"]
            for name in names:
                lines += [f"export function {name}(items, limit = 10) {{",
                          "  return items.slice(0, limit).map((x) => x * 2);", "}", ""]
        else:
            rel = f"{folder}/svc{i:05d}.go"
            names = [_camel(n)[0].upper() + _camel(n)[1:] for n in names]
            lines = [f"package pkg{i // PER_DIR:03d}", ""]
            for name in names:
                lines += [f"func {name}(items []int, limit int) []int {{",
                          "\tif len(items) > limit {", "\t\treturn items[:limit]", "\t}",
                          "\treturn items", "}", ""]
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
        defined.extend((rel, n) for n in names)
    for d in range(0, files, PER_DIR):  # packages
        init = root / f"pkg{d // PER_DIR:03d}" / "__init__.py"
        if not init.exists():
            init.write_text("")
    (root / "README.md").write_text("# generated\n\nA generated project for benchmarks.\n")
    if commit:
        git_commit_all(root)
    return defined


def stdlib_path() -> Path:
    here = Path("/root/.pyenv/versions/3.11.7/lib/python3.11")
    return here if here.is_dir() else Path(sysconfig.get_paths()["stdlib"])


def copy_stdlib(dest: Path, source: Path | None = None) -> tuple[Path, list[tuple[str, str]]]:
    """The standard library (without site-packages and caches) copied to `dest` as a git
    repository. Returns the source it copied and every (path, function name) its Python files
    define at the start of a line or indented (found with a regular expression, not with the
    map's own parser)."""
    source = source or stdlib_path()
    shutil.copytree(source, dest, symlinks=True,
                    ignore=shutil.ignore_patterns("site-packages", "__pycache__", "*.pyc"))
    git_commit_all(dest)
    defs: list[tuple[str, str]] = []
    pattern = re.compile(r"^\s*(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\(", re.MULTILINE)
    for dirpath, _, names in os.walk(dest):
        if ".git" in dirpath.split(os.sep):
            continue
        for n in sorted(names):
            if n.endswith(".py"):
                p = Path(dirpath, n)
                text = p.read_text("utf-8", "replace")
                rel = p.relative_to(dest).as_posix()
                defs.extend((rel, m) for m in pattern.findall(text))
    return source, sorted(defs)
