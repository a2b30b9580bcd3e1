"""Keeping in step with the working tree and git, measured at the core (no UI): a real
repository of 50,000 files, a real watcher, other processes changing things.

Figures:
- external edit -> rebased: a file with pending hunks (5,000 lines) is rewritten by another
  process; from just before its write to the SyncUpdate carrying the rebased file;
- external `git commit` -> status updated: from the moment git wrote the branch ref (its
  mtime) to the SyncUpdate whose status shows the commit;
- a checkout rewriting 10,000 files: from its start to the last update, how many updates it
  took, and the longest event-loop stall meanwhile (a 1 ms ticker's worst gap);
- initial data on 50,000 files (file list, status, branch: what the first paint needs) and
  the process's RSS after it and after the watches are in place.
Stalls are the worst gap of a 1 ms ticker; `idle_loop_stall_ms_max` is the same ticker with
nothing of steer's running, and `git_only_loop_stall_ms_max` while only git commits and
runs status (no watcher, no Sync): the machine's own noise to read them against.
The UI's own first paint is `steer bench tui`. Targets from the issue: p99 <= 200 ms,
stall <= 50 ms, first paint <= 1 s, RSS <= 200 MB.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app.bench.fixtures import big_file, search_replace_answer
from app.core.disk.workspace import Workspace
from app.core.edits.diff import PendingDiff
from app.core.edits.formats import make_parser
from app.core.git.sync import Sync


def _pct(xs: list[float], p: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(len(xs) * p))], 1)


def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def build_repo(root: Path, files: int, changed: int) -> Path:
    """`files` files on `main` (plus big.py); branch `other` changes `changed` of them. Built
    with git fast-import, then checked out."""
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    for k, v in (("user.email", "b@example.com"), ("user.name", "bench")):
        subprocess.run(["git", "config", k, v], cwd=root, check=True)
    big = "\n".join(big_file(5_000)) + "\n"
    per_dir = 500
    out = []
    for branch in ("main", "other"):
        out.append(f"commit refs/heads/{branch}\ncommitter b <b@example.com> 0 +0000\ndata 4\nbase\n")
        if branch == "other":
            out.append("from refs/heads/main\n")
        else:
            out.append(f"M 100644 inline big.py\ndata {len(big.encode())}\n{big}\n")
        for i in range(changed if branch == "other" else files):
            body = f"file {i}\n" + ("changed\n" if branch == "other" else "")
            out.append(f"M 100644 inline d{i // per_dir}/f{i}.txt\ndata {len(body)}\n{body}\n")
    subprocess.run(["git", "fast-import", "--quiet"], cwd=root, input="".join(out).encode(), check=True)
    subprocess.run(["git", "checkout", "-q", "-f", "main"], cwd=root, check=True)
    return root


def _pending(ws: Workspace) -> PendingDiff:
    lines = big_file(5_000)
    answer, _ = search_replace_answer("big.py", lines, 3_000)
    snap = ws.snapshot("big.py").prepare()
    pending = PendingDiff(ws, [snap])
    parser = make_parser("search_replace", frozenset({"big.py"}))
    pending.feed(parser.feed(answer))
    pending.feed(parser.finish())
    pending.finish()
    return pending


class _Ticker:
    """The event loop's responsiveness: the worst gap between 1 ms sleeps."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            self.worst = max(self.worst, now - last)
            last = now

    def start(self) -> None:
        self.worst = 0.0
        self._task = asyncio.ensure_future(self._run())

    def stop(self) -> float:
        if self._task is not None:
            self._task.cancel()
        return round(self.worst * 1000, 1)


async def _measure(root: Path, trials: int) -> dict:
    ws = Workspace(root)
    t0 = time.perf_counter()
    rss_before = _rss_mb()
    pending = _pending(ws)
    sync = Sync.open(ws, lambda: pending, changes=pending.listeners)
    first = await sync.initial()
    initial_s = time.perf_counter() - t0
    updates: asyncio.Queue = asyncio.Queue()
    stop = asyncio.Event()

    async def follow() -> None:
        async for u in sync.updates(stop):
            updates.put_nowait((time.perf_counter(), time.time_ns(), u))

    follower = asyncio.ensure_future(follow())
    t1 = time.perf_counter()
    await sync.wait_ready(120)
    watch_ready_s = time.perf_counter() - t1
    rss_watching = _rss_mb()
    ticker = _Ticker()

    async def next_update(cond, timeout: float = 30.0):
        deadline = time.perf_counter() + timeout
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError("no update")
            got = await asyncio.wait_for(updates.get(), left)
            if cond(got[2]):
                return got

    async def drain(quiet: float = 0.3) -> None:
        while True:
            try:
                await asyncio.wait_for(updates.get(), quiet)
            except TimeoutError:
                return

    # external edits of a file with pending hunks
    big = root / "big.py"
    text = big.read_text()
    edit_ms: list[float] = []
    ticker.start()
    for i in range(trials):
        new = ("# edited outside\n" + text) if i % 2 == 0 else text
        start = time.perf_counter()
        await asyncio.to_thread(big.write_text, new)
        done, _, _ = await next_update(lambda u: any(r.path == "big.py" for r in u.rebased))
        edit_ms.append((done - start) * 1000)
        await drain(0.1)
    edit_stall = ticker.stop()
    hunks_ok = all(h.state.value == "pending" for h in pending.hunks)

    # external commits
    commit_ms: list[float] = []
    assert sync.git is not None  # the bench made a repository
    ref = Path(sync.git.common_dir) / "refs" / "heads" / "main"
    ticker.start()
    for i in range(max(5, trials // 2)):
        (root / "d0" / "f0.txt").write_text(f"commit {i}\n")
        await drain(0.3)
        await asyncio.to_thread(subprocess.run, ["git", "commit", "-qam", f"c{i}"], cwd=root, check=True)
        _, wall, _ = await next_update(lambda u: u.status is not None and "d0/f0.txt" not in u.status)
        commit_ms.append((wall - os.stat(ref).st_mtime_ns) / 1e6)
    commit_stall = ticker.stop()
    await drain(1.5)  # the last commit's full status comes after its quick one
    ticker.start()
    await asyncio.sleep(2.0)
    idle_stall = ticker.stop()  # the machine's own noise: nothing of steer's runs now

    # a checkout rewriting 10,000 files
    ticker.start()
    start = time.perf_counter()
    proc = await asyncio.create_subprocess_exec("git", "checkout", "-q", "other", cwd=root)
    await proc.wait()
    git_s = time.perf_counter() - start
    seen = []
    done_at = None
    while True:
        try:
            t, _, u = await asyncio.wait_for(updates.get(), 2.0)
        except TimeoutError:
            break
        seen.append(u)
        done_at = t
    checkout_stall = ticker.stop()
    stop.set()
    await follower
    await sync.aclose()
    # the same ticker while git alone works (no steer watching): what git costs this machine
    ticker.start()
    for i in range(5):
        (root / "d0" / "f0.txt").write_text(f"baseline {i}\n")
        await asyncio.to_thread(subprocess.run, ["git", "commit", "-qam", f"b{i}"], cwd=root, check=True)
        await asyncio.to_thread(subprocess.run, ["git", "status", "--porcelain"], cwd=root,
                                check=True, capture_output=True)
    git_only_stall = ticker.stop()
    return {
        "files": len(first.files or []),
        "initial_data_s": round(initial_s, 3),
        "watch_ready_s": round(watch_ready_s, 2),
        "rss_mb_before": rss_before,
        "rss_mb_after_initial_and_watch": rss_watching,
        "idle_loop_stall_ms_max": idle_stall,
        "git_only_loop_stall_ms_max": git_only_stall,
        "load_average": os.getloadavg()[0],
        "external_edit_to_rebased_ms": {"trials": len(edit_ms), "p50": _pct(edit_ms, 0.5),
                                         "p99": _pct(edit_ms, 0.99), "max": _pct(edit_ms, 1.0),
                                         "hunks_still_pending": hunks_ok,
                                         "loop_stall_ms_max": edit_stall},
        "external_commit_to_status_ms": {"trials": len(commit_ms), "p50": _pct(commit_ms, 0.5),
                                         "p99": _pct(commit_ms, 0.99), "max": _pct(commit_ms, 1.0),
                                         "loop_stall_ms_max": commit_stall},
        "checkout_10k_files": {
            "git_checkout_s": round(git_s, 2),
            "settled_s": round(done_at - start, 2) if done_at else None,
            "bursts": len({u.first_event for u in seen}),
            "updates": len(seen),
            "paths_in_updates": [len(u.paths) for u in seen],
            "branch_after": next((u.branch for u in reversed(seen) if u.branch), None),
            "loop_stall_ms_max": checkout_stall,
        },
    }


def run(trials: int = 40, files: int = 50_000, changed: int = 10_000) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        root = build_repo(Path(tmp) / "repo", files, changed)
        build_s = time.perf_counter() - t0
        result = asyncio.run(_measure(root, trials))
    return {"bench": "sync", "python": sys.version.split()[0], "repo_build_s": round(build_s, 1),
            **result,
            "targets": {"edit_p99_ms": 200, "commit_p99_ms": 200, "loop_stall_ms": 50,
                        "first_paint_s": 1.0, "rss_mb": 200}}
