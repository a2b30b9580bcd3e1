"""A mutation score per room of core: `make mutants` (outside `make test`: it takes long).

A test suite that passes says little about the tests; a planted bug that the tests still pass
(a survivor) says where they look away. mutmut plants them one at a time, in a room's files,
and runs the tests that cover the room. Each room runs in a scratch copy of the checkout (the
files git knows, as they are now), with its own `[tool.mutmut]`, so the worktree gets no
`mutants/` folder and the rooms never share results. Per room it prints killed / total and
the survivors by name (`mutmut show NAME` in that copy shows one).

    python -m app.bench.mutants                 # every room
    python -m app.bench.mutants parser lookup   # some rooms (names below)
    python -m app.bench.mutants --keep ...      # leave the scratch copies (printed) to look at
    python -m app.bench.mutants --minutes 20    # each room for at most 20 minutes (partial)

A mutant no test reaches is "no tests"; one the tests hang on is "timeout" (found, but
listed apart from killed); "not checked" ones (a room stopped by --minutes) are not counted.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Room:
    mutate: tuple[str, ...]  # mutmut's only_mutate globs, from the checkout's root
    tests: tuple[str, ...]  # a fast subset that covers the room (no model, no tmux)


ROOMS: dict[str, Room] = {
    "parser": Room(("app/core/edits/formats/parser.py",),
                   ("tests/test_parsers.py", "tests/test_parses.py", "tests/test_format_traps.py",
                    "tests/test_inferred_file.py")),
    "edits": Room(("app/core/edits/*",),
                  ("tests/test_rebase.py", "tests/test_parsers.py", "tests/test_parses.py",
                   "tests/test_format_traps.py", "tests/test_format_records.py",
                   "tests/test_mixed_formats.py", "tests/test_fragments.py",
                   "tests/test_diff_property.py", "tests/test_compose.py",
                   "tests/test_inferred_file.py")),
    "disk": Room(("app/core/disk/*",),
                 ("tests/test_safety.py", "tests/test_state_dir.py", "tests/test_journal_sync.py",
                  "tests/test_textfile.py", "tests/test_cas_fallback.py", "tests/test_races.py",
                  "tests/test_git.py", "tests/test_session_dirs.py", "tests/test_names_as_data.py",
                  "tests/test_sessions.py", "tests/test_kill_resume.py",
                  "tests/test_disk_survivors.py")),
    "review": Room(("app/core/review/*",),
                   ("tests/test_review.py", "tests/test_change_set.py", "tests/test_arrival.py",
                    "tests/test_review_moves.py", "tests/test_rebase.py", "tests/test_safety.py",
                    "tests/test_redirect_leftovers.py", "tests/test_sync.py", "tests/test_git.py",
                    "tests/test_sessions.py", "tests/test_kill_resume.py",
                    "tests/test_review_survivors.py")),
    "lookup": Room(("app/core/knowledge/lookup.py",), ("tests/test_lookup.py",)),
    "check": Room(("app/core/variants/check.py", "app/core/variants/worktrees.py",
                   "app/core/variants/proposal_check.py"),
                  ("tests/test_variant_check.py", "tests/test_check_sandbox.py",
                   "tests/test_proposal_check.py", "tests/test_run_fix.py")),
}

# `mutmut results --all true` prints "    NAME: STATUS"
RESULT = re.compile(r"^\s+(\S+): (\S.*)$")


def _toml_list(items: tuple[str, ...] | list[str]) -> str:
    return "[" + ", ".join(f'"{x}"' for x in items) + "]"


def scratch_copy(dest: Path) -> None:
    """The files git knows (tracked and untracked, not ignored), as they are on disk now."""
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, check=True, capture_output=True).stdout.split(b"\0")
    for raw in names:
        if not raw:
            continue
        rel = os.fsdecode(raw)
        src = ROOT / rel
        if not src.is_file() or src.is_symlink():
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)


def configure(dest: Path, room: Room) -> None:
    # the functions a test reaches through the steer processes it starts (mutants_children)
    (dest / "sitecustomize.py").write_text(
        "from app.bench.mutants_children import record_in_child\n\nrecord_in_child()\n")
    with open(dest / "pyproject.toml", "a", encoding="utf-8") as fh:
        fh.write("\n[tool.mutmut]\n"
                 'source_paths = ["app"]\n'
                 f"only_mutate = {_toml_list(room.mutate)}\n"
                 'also_copy = ["tests", "themes", "pyproject.toml", "sitecustomize.py"]\n'
                 f"pytest_add_cli_args_test_selection = {_toml_list(room.tests)}\n"
                 'pytest_add_cli_args = ["-q", "-p", "no:cacheprovider", "-p", '
                 '"app.bench.mutants_children", "-m", "not model and not tmux"]\n'
                 # the suite leaves threads behind (to_thread, watchers): a worker forked
                 # from the process that ran it can start with a lock held and hang
                 'process_isolation = "forkserver"\n'
                 "timeout_multiplier = 5.0\n")


def run_room(name: str, room: Room, children: int, keep: bool,
             minutes: float = 0) -> tuple[int, int, list[str]]:
    """(killed, total, survivors with their status) of one room."""
    dest = Path(tempfile.mkdtemp(prefix=f"steer-mutants-{name}-"))
    try:
        scratch_copy(dest)
        configure(dest, room)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPATH"] = ""  # mutmut puts mutants/ first; the checkout must not shadow it
        env.setdefault("HYPOTHESIS_PROFILE", "mutants")  # tests/conftest.py: fewer examples
        mutmut = [sys.executable, "-m", "mutmut"]
        started = time.monotonic()
        log = dest / "mutmut-run.log"
        with open(log, "wb") as fh:
            run = subprocess.Popen([*mutmut, "run", "--max-children", str(children)], cwd=dest,
                                   env=env, stdout=fh, stderr=subprocess.STDOUT,
                                   start_new_session=True)
            try:
                code = run.wait(timeout=minutes * 60 if minutes else None)
            except subprocess.TimeoutExpired:  # out of time: what was tested is counted
                os.killpg(run.pid, signal.SIGTERM)
                run.wait()
                code = 0
                print(f"{name}: stopped after {minutes:g} min (the budget); partial")
        if code != 0:
            print(log.read_text(errors="replace")[-3000:], file=sys.stderr)
            keep = True
            raise SystemExit(f"{name}: mutmut run failed ({code}); copy kept at {dest}")
        out = subprocess.run([*mutmut, "results", "--all", "true"], cwd=dest, env=env,
                             check=True, capture_output=True, text=True).stdout
        statuses = {m[1]: m[2].strip() for line in out.splitlines() if (m := RESULT.match(line))}
        count = Counter(statuses.values())
        killed = count["killed"]
        total = len(statuses) - count["not checked"]
        survivors = sorted(f"{k} ({v})" for k, v in statuses.items()
                           if v not in ("killed", "not checked"))
        print(f"{name}: {killed} / {total} killed in {time.monotonic() - started:.0f} s"
              f"  ({', '.join(f'{s} {n}' for s, n in sorted(count.items()))})")
        for s in survivors:
            print(f"    {s}")
        if keep:
            print(f"    (scratch copy: {dest}; `cd {dest} && mutmut show NAME`)")
        return killed, total, survivors
    finally:
        if not keep:
            shutil.rmtree(dest, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m app.bench.mutants", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rooms", nargs="*", help=f"rooms (default: all): {', '.join(ROOMS)}")
    ap.add_argument("--children", type=int, default=os.cpu_count() or 1,
                    help="mutants tested at once")
    ap.add_argument("--keep", action="store_true", help="keep the scratch copies")
    ap.add_argument("--minutes", type=float, default=0,
                    help="stop each room after this long and report what was tested")
    args = ap.parse_args(argv)
    if unknown := [r for r in args.rooms if r not in ROOMS]:
        ap.error(f"no room {', '.join(unknown)}; the rooms: {', '.join(ROOMS)}")
    names = args.rooms or list(ROOMS)
    if "edits" in names and "parser" in names:
        names.remove("parser")  # edits holds it
    if not args.rooms:
        names = [n for n in names if n != "parser"]
    total = killed = 0
    for name in names:
        k, t, _ = run_room(name, ROOMS[name], args.children, args.keep, args.minutes)
        killed, total = killed + k, total + t
    if len(names) > 1:
        print(f"all: {killed} / {total} killed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
