"""`steer bench context`: the repository map against aider's, on this machine's standard
library and on a generated tree, in the same run.

For each tree (a git repository in a temp dir): steer's cold build (no cache) and warm build
(from its disk cache), each as launch -> a map a request can use (paths only at first) ->
the full map; what `current()` costs a request while the build runs and once it is done; the
update after one file changes; the map's size in tokens; recall over instructions that name a
function but not its file. Then aider's `--show-repo-map` on the same tree, cold (its tags
cache removed) and warm, with its start-up measured apart on an empty repository, and, with
`--aider-recall`, aider's own ranking on the same instructions through its RepoMap class.
aider is installed at run time into a throwaway venv, never into steer's.

"Cold" means no tag cache, for both; the files themselves are in the OS page cache for both
(each tree was just written). The figures are measurements, not assertions.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app.bench.trees import copy_stdlib, generate_tree, git_commit_all
from app.core.knowledge.builder import MapBuilder
from app.core.knowledge.cache import RACY
from app.core.knowledge.render import HEADER, HEADER_PATHS, estimate_tokens

TEMPLATES = (
    "Make {name} raise a ValueError when it gets an empty input.",
    "Add type hints to the {name} function.",
    "{name} is slow on large inputs; speed it up.",
    "Write a docstring for {name} that explains its arguments.",
    "Add logging to the {name} function so failures are easier to trace.",
)
AIDER_VENV = Path("/tmp/aider-venv")
AIDER_FLAGS = ("--show-repo-map", "--model", "gpt-4o", "--no-show-model-warnings",
               "--no-check-update", "--analytics-disable", "--no-gitignore", "--no-auto-commits",
               "--no-dirty-commits", "--no-pretty", "--no-fancy-input", "--yes-always",
               "--no-restore-chat-history", "--map-multiplier-no-files", "1")


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _pcts(xs: list[float]) -> dict[str, float]:
    if not xs:
        return {}
    s = sorted(xs)
    return {"p50": _ms(s[len(s) // 2]), "p99": _ms(s[min(len(s) - 1, int(len(s) * 0.99))]),
            "max": _ms(s[-1])}


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def instructions(defs: list[tuple[str, str]], n: int, seed: int = 3) -> list[tuple[str, str, str]]:
    """`n` instructions naming a function (not a dunder) but not its file: (text, the file
    defining it, the name), one per name."""
    rnd = random.Random(seed)
    pool = sorted({(p, name) for p, name in defs if not (name.startswith("__") and name.endswith("__"))})
    rnd.shuffle(pool)
    out, seen = [], set()
    for path, name in pool:
        if name in seen:
            continue
        seen.add(name)
        out.append((rnd.choice(TEMPLATES).format(name=name), path, name))
        if len(out) == n:
            break
    return out


# -- steer ------------------------------------------------------------------------------------
def _launch(root: Path, cache: Path, probe: str, budget: int, nice: int) -> dict:
    """Start a builder and ask for maps while it builds, as a request would."""
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    rss0 = _rss_mb()
    b = MapBuilder(root, cache=cache, nice=nice).start()
    first_map = full = None
    costs: list[float] = []
    while full is None:
        t = time.perf_counter()
        m = b.current(probe, budget=budget)
        costs.append(time.perf_counter() - t)
        if first_map is None and m.files:
            first_map = time.perf_counter() - t0
        if m.complete:
            full = time.perf_counter() - t0
            break
        if b.status().state == "failed":
            raise RuntimeError(b.status().error)
        time.sleep(0.02)  # a request every 20 ms: far more often than a person sends them
    b.wait()
    ranked = b.timings.get("ranked")
    return {"builder": b, "launch_to_first_map_s": round(first_map or full, 3),
            "launch_to_full_map_s": round(full, 3),
            "launch_to_pagerank_s": round(ranked, 3) if ranked is not None else None,
            "current_during_build_ms": _pcts(costs),
            "requests_during_build": len(costs), "files_parsed": b.parsed,
            "phases_s": {k: round(v, 3) for k, v in b.timings.items()},
            "rss_mb_added": round(_rss_mb() - rss0, 1), "loadavg_1min_before": round(load, 2)}


def _update(b: MapBuilder, root: Path, defs: list[tuple[str, str]], trials: int) -> dict:
    py = sorted({p for p, _ in defs if p.endswith(".py")})
    rnd = random.Random(9)
    costs, applied, visible = [], [], 0
    for i in range(trials):
        rel = rnd.choice(py)
        path = root / rel
        path.write_text(path.read_text() + f"\n\ndef bench_added_function_{i}(x):\n    return x\n")
        v = b.status().version
        t = time.perf_counter()
        b.update([rel])
        while b.status().version == v:
            time.sleep(0.0002)
        costs.append(time.perf_counter() - t)
        applied.append(b.timings.get("last_update", 0.0))
        visible += rel in b.current(f"bench_added_function_{i}").files[:1]
    b.wait()
    return {"update_to_published_ms": _pcts(costs), "apply_in_thread_ms": _pcts(applied),
            "trials": trials, "new_function_ranked_first": visible,
            "rank_refresh_after_update_ms": _ms(b.timings.get("last_rank", 0.0))}


def _recall(b: MapBuilder, asks: list[tuple[str, str, str]], budget: int) -> dict:
    hits, positions, tokens, costs = 0, [], [], []
    for text, path, _ in asks:
        t = time.perf_counter()
        m = b.current(text, budget=budget)
        costs.append(time.perf_counter() - t)
        tokens.append(m.tokens)
        if path in m.files:
            hits += 1
            positions.append(m.files.index(path) + 1)
    return {"instructions": len(asks), "file_in_map": hits,
            "recall": round(hits / len(asks), 3) if asks else None,
            "file_first": sum(1 for p in positions if p == 1),
            "mean_position_when_found": round(statistics.mean(positions), 2) if positions else None,
            "current_ready_ms": _pcts(costs), "map_tokens_mean": round(statistics.mean(tokens)) if tokens else 0}


def measure_steer(root: Path, defs: list[tuple[str, str]], asks: list[tuple[str, str, str]],
                  budget: int, work: Path, updates: int, nice: int = 10) -> dict:
    cache = work / f"steer-cache-{root.name}"
    probe = asks[0][0] if asks else ""
    cold = _launch(root, cache, probe, budget, nice)
    cold.pop("builder").close()
    warm = _launch(root, cache, probe, budget, nice)
    b = warm.pop("builder")
    try:
        plain = b.current("", budget=budget)
        out = {"cold": cold, "warm": warm, "request_waits_for_build_ms": 0.0,
               "map_tokens_no_instruction": plain.tokens, "files_in_map": len(plain.files),
               "recall": _recall(b, asks, budget), "update": _update(b, root, defs, updates)}
    finally:
        b.close()
    return out


# -- aider ------------------------------------------------------------------------------------
def ensure_aider(version: str, venv: Path = AIDER_VENV) -> tuple[Path, float]:
    """aider's executable in its own throwaway venv (installed from PyPI when missing)."""
    exe = venv / "bin" / "aider"
    t = time.perf_counter()
    ok = exe.exists() and subprocess.run([str(venv / "bin" / "python"), "-c",
                                          f"import importlib.metadata as m; assert m.version('aider-chat') == '{version}'"],
                                         capture_output=True).returncode == 0
    if not ok:
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", f"aider-chat=={version}"],
                       check=True)
    return exe, time.perf_counter() - t


def _aider_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(HOME=str(home), LITELLM_LOCAL_MODEL_COST_MAP="True", AIDER_ANALYTICS="false",
               GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="b@example.com",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="b@example.com")
    return env


def _aider_once(exe: Path, root: Path, budget: int, home: Path, timeout: float) -> dict:
    load = os.getloadavg()[0]
    cmd = [str(exe), *AIDER_FLAGS, "--map-tokens", str(budget),
           "--chat-history-file", str(home / "chat.md"), "--input-history-file", str(home / "input")]
    t = time.perf_counter()
    done = subprocess.run(cmd, cwd=root, env=_aider_env(home), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    seconds = time.perf_counter() - t
    out = done.stdout
    start = out.find("Here are summaries of some files")
    text = out[start:] if start >= 0 else ""
    return {"seconds": round(seconds, 3), "exit": done.returncode, "loadavg_1min_before": round(load, 2),
            "map_tokens": estimate_tokens(text),
            "map_found": start >= 0, "files_listed": sum(1 for line in text.splitlines()
                                                         if line and line[0] not in " │⋮" and " " not in line)}


AIDER_RECALL = r"""
import json, re, sys, time
from collections import defaultdict
from pathlib import Path
from aider.io import InputOutput
from aider.models import Model
from aider.repomap import RepoMap
root, budget, asks_file, cap = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
asks = json.load(open(asks_file))
files = json.load(open(asks_file + ".files"))
io = InputOutput(pretty=False, yes=True, fancy_input=False)
rm = RepoMap(map_tokens=budget, root=root, main_model=Model("gpt-4o"), io=io, map_mul_no_files=1)
stems = defaultdict(set)
for f in files:
    base = Path(f).stem.lower()
    if len(base) >= 5:
        stems[base].add(f)
abs_files = [str(Path(root) / f) for f in files]
out, t0 = [], time.perf_counter()
for text, path, name in asks:
    if time.perf_counter() - t0 > cap:
        break
    idents = set(re.split(r"\W+", text))
    fnames = set()
    for i in idents:
        if len(i) >= 5:
            fnames |= stems[i.lower()]
    t = time.perf_counter()
    m = rm.get_repo_map(set(), abs_files, mentioned_fnames=fnames, mentioned_idents=idents) or ""
    listed = [ln.rstrip(":") for ln in m.splitlines() if ln and ln[0] not in " │⋮" and " " not in ln]
    out.append({"hit": path in listed, "seconds": time.perf_counter() - t})
print(json.dumps(out))
"""


def _aider_recall(exe: Path, root: Path, asks: list[tuple[str, str, str]], budget: int,
                  home: Path, cap: float) -> dict:
    files = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True,
                           check=True).stdout.split("\n")
    asks_file = home / f"asks-{root.name}.json"
    asks_file.write_text(json.dumps(asks))
    Path(str(asks_file) + ".files").write_text(json.dumps([f for f in files if f]))
    script = home / "aider_recall.py"
    script.write_text(AIDER_RECALL)
    python = exe.parent / "python"
    done = subprocess.run([str(python), str(script), str(root), str(budget), str(asks_file), str(cap)],
                          cwd=root, env=_aider_env(home), capture_output=True, text=True,
                          timeout=cap + 1800, stdin=subprocess.DEVNULL)
    try:
        rows = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"error": (done.stderr or done.stdout)[-500:]}
    hits = [r for r in rows if r["hit"]]
    return {"instructions": len(rows), "file_in_map": len(hits),
            "recall": round(len(hits) / len(rows), 3) if rows else None,
            "seconds_per_instruction": round(statistics.mean(r["seconds"] for r in rows), 2) if rows else None,
            "stopped_after_s": cap if len(rows) < len(asks) else None}


def measure_aider(exe: Path, root: Path, asks: list[tuple[str, str, str]], budget: int, work: Path,
                  recall: int, recall_cap: float, timeout: float) -> dict:
    home = work / f"aider-home-{root.name}"
    home.mkdir(exist_ok=True)
    empty = work / "aider-empty"
    if not empty.exists():
        empty.mkdir()
        (empty / "README").write_text("empty\n")
        git_commit_all(empty)
        _aider_once(exe, empty, budget, home, timeout)  # first run ever: writes its config
    startup = _aider_once(exe, empty, budget, home, timeout)
    shutil.rmtree(root / ".aider.tags.cache.v4", ignore_errors=True)
    cold = _aider_once(exe, root, budget, home, timeout)
    warm = _aider_once(exe, root, budget, home, timeout)
    out = {"startup_on_empty_repo_s": startup["seconds"], "cold": cold, "warm": warm,
           "cold_minus_startup_s": round(cold["seconds"] - startup["seconds"], 3),
           "warm_minus_startup_s": round(warm["seconds"] - startup["seconds"], 3)}
    if recall:
        out["recall"] = _aider_recall(exe, root, asks[:recall], budget, home, recall_cap)
    return out


# -- launch -> request, through `steer run` ------------------------------------------------------
def _steer_run(root: Path, state: Path, instruction: str, server) -> dict:
    """One `steer run` in a fresh process against the loopback server: launch -> the request
    at the server, and what map it carried."""
    env = {**os.environ, "XDG_STATE_HOME": str(state), "XDG_CONFIG_HOME": str(state / "config")}
    for var in ("STEER_PROVIDER", "STEER_BASE_URL", "STEER_MODEL", "STEER_API_KEY"):
        env.pop(var, None)
    seen = len(server.stats.bodies)
    t0 = time.time()
    done = subprocess.run([sys.executable, "-m", "app", "run", instruction, "-C", str(root),
                           "--base-url", server.base_url, "--model", "replay", "--no-save",
                           "--quiet"], env=env, capture_output=True, text=True, timeout=900)
    total = time.time() - t0
    arrived = server.stats.requests[seen] if len(server.stats.requests) > seen else None
    body = server.stats.bodies[seen] if len(server.stats.bodies) > seen else {}
    maps = [m.get("content") or "" for m in body.get("messages", [])[1:-1]]
    kind = ("full" if maps and maps[0].startswith(HEADER) else
            "paths only" if maps and maps[0].startswith(HEADER_PATHS) else "none")
    return {"launch_to_request_s": round(arrived - t0, 3) if arrived else None,
            "map": kind, "map_tokens": estimate_tokens(maps[0]) if maps else 0,
            "tools_offered": [t["function"]["name"] for t in body.get("tools", [])],
            "exit_code": done.returncode, "process_s": round(total, 2),
            "stderr_tail": done.stderr.strip().splitlines()[-1:] if done.returncode else []}


def measure_launch(files: int, work: Path) -> dict:
    """A generated tree of `files` files: the first `steer run` (no cache) and the second
    (the cache the first left), each from launch to its request at the server."""
    from app.server.chat_server import ServerThread

    root = work / f"launch-{files}"
    defs = generate_tree(root, files)
    time.sleep(RACY)
    name = instructions(defs, 1)[0][0]
    state = work / "launch-state"
    with ServerThread(replay="Nothing to change.\n") as server:
        first = _steer_run(root, state, name, server)
        second = _steer_run(root, state, name, server)
    return {"tree": {"generated_files": files, **_tree_facts(root)}, "instruction": name,
            "first_run": first, "second_run": second,
            "loadavg_1min": round(os.getloadavg()[0], 2)}


# -- the run ----------------------------------------------------------------------------------
def _tree_facts(root: Path) -> dict:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True,
                           check=True).stdout.split(b"\0")
    size = sum((root / f.decode()).stat().st_size for f in files if f and (root / f.decode()).is_file())
    return {"files": sum(1 for f in files if f), "mb": round(size / 1e6, 1)}


def run(files: int = 50_000, n_instructions: int = 50, budget: int = 1500, aider: bool = True,
        aider_version: str = "0.86.2", aider_recall: int = 50, aider_recall_cap: float = 600.0,
        stdlib: str | None = None, updates: int = 10, trees: str = "stdlib,generated,launch",
        nice: int = 0, launch_files: int = 20_000) -> dict:
    out: dict = {"bench": "context", "cpus": os.cpu_count(), "budget_tokens": budget,
                 "worker_nice": nice,
                 "targets": {"cold_build_vs_aider": ">= 10x faster", "update_ms": "<= 50",
                             "request_wait_ms": 0, "launch_to_map_s_20k_files": "<= 2"}}
    exe = None
    if aider:
        exe, install_s = ensure_aider(aider_version)
        out["aider"] = {"version": aider_version, "venv": str(exe.parent.parent),
                        "install_s": round(install_s, 1), "flags": " ".join(AIDER_FLAGS)}
    with tempfile.TemporaryDirectory(prefix="steer-bench-context-") as tmp:
        work = Path(tmp)
        for which in trees.split(","):
            if which == "launch":  # steer run itself: launch -> request, first and second run
                out["launch"] = measure_launch(launch_files, work)
                continue
            t = time.perf_counter()
            if which == "stdlib":
                root = work / "stdlib"
                source, defs = copy_stdlib(root, Path(stdlib) if stdlib else None)
                facts = {"source": str(source), **_tree_facts(root)}
            else:
                root = work / "generated"
                defs = generate_tree(root, files)
                facts = {"generated_files": files, **_tree_facts(root)}
            facts["made_in_s"] = round(time.perf_counter() - t, 1)
            time.sleep(RACY)  # files as old as a real checkout's: a save records their stat
            asks = instructions(defs, n_instructions)
            row: dict = {"tree": facts,
                         "steer": measure_steer(root, defs, asks, budget, work, updates, nice)}
            if exe is not None:
                row["aider"] = measure_aider(exe, root, asks, budget, work, aider_recall,
                                             aider_recall_cap, timeout=3600)
                s, a = row["steer"], row["aider"]
                row["cold_speedup"] = round(a["cold"]["seconds"] / s["cold"]["launch_to_full_map_s"], 1)
                row["cold_speedup_to_pagerank"] = round(
                    a["cold"]["seconds"] / s["cold"]["launch_to_pagerank_s"], 1)
                row["cold_speedup_without_aider_startup"] = round(
                    a["cold_minus_startup_s"] / s["cold"]["launch_to_full_map_s"], 1)
                row["warm_speedup"] = round(a["warm"]["seconds"] / s["warm"]["launch_to_full_map_s"], 1)
            out[which] = row
    return out
