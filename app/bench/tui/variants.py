"""`steer bench variants`: one instruction answered N times at once (app/core/variants), in the
real app and through `steer run --variants N`, against the scripted server at a fixed rate
per answer (`steer serve --replay`, its own process; replays run concurrently).

Each trial is a fresh child process (so its CPU time and peak RSS are its own) holding the
real app, headless, 160x48: the instruction is typed into the prompt and F3 sends it as N
variants, the way a user does, with the `ask` callable building one OpenAIChat per sibling
against the server. Figures per trial:
- wall: the F3 key to the moment the last of the N answers is complete (its `Done`), and,
  over the medians, its ratio to N = 1 (DESIGN: <= 1.1x at 1,000 tokens/s);
- CPU seconds of the app's process per 1,000 tokens received, all variants together;
- token -> screen p50/p99 of the variant on screen (its chunks' arrival to the compositor's
  display after the frame that took them), while the others stream;
- peak RSS of the process.
Then `steer run --variants N --json` end to end (a subprocess, spawn to exit) for the same Ns.
With --model, the same against the embedded model (`steer serve` without --replay): it runs
on the same cores as the app and generates the N answers side by side, so N variants take
longer there; that is reported, not hidden.

Medians over the trials, with the spread (min and max). A benchmark: it measures and never
asserts a time.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app.bench.tui.probe import (
    Stamped,
    child_env,
    instrument,
    pct,
    peak_rss_mb,
    r2,
    screen_latency,
    serve,
    stop,
    workspace,
)
from app.server.generation import split_tokens

INSTRUCTION = "apply the recorded edits"
MODEL_FILE_LINES = 40
FILE_LINES = 2_000  # the edited file (the answer spreads ~20 edits over it)
TARGETS = {"wall_ratio_to_1": 1.1, "token_to_screen_ms_p99_at_4": 33}


async def _trial(root: Path, url: str, n: int, model: str, key: str | None,
                 max_tokens: int | None) -> dict:
    """One set of `n` variants in the real app (this process: a child of `run`)."""
    from app.config import Settings
    from app.providers.openai_chat import OpenAIChat
    from app.ui.app import SteerApp

    def ask(k: int) -> tuple[None, list]:
        return None, [OpenAIChat(url, model, key) for _ in range(k - 1)]

    settings = Settings(max_tokens=max_tokens) if max_tokens else None
    app = SteerApp(root, OpenAIChat(url, model, key), settings, context=["big.py"],
                   watch_files=False, blink=False, ask=ask)
    async with app.run_test(headless=True, size=(160, 48)) as pilot:
        await pilot.pause(0.2)
        displays, frames, _, _ = instrument(app)
        app.main.tick_log = None
        turns: list = []
        stamps: dict[int, Stamped] = {}  # id(turn) -> its chunks, each with its arrival
        variants = app.variants
        ask_set, start_one = variants.ask, variants.start

        def stamped(made):  # every turn's chunks timed from the first (before any arrives)
            for t in made:
                t.chunks = stamps[id(t)] = Stamped()
            turns.extend(made)
            return made

        variants.ask = lambda *a, **k: stamped(ask_set(*a, **k))  # type: ignore[method-assign]
        variants.start = lambda *a, **k: stamped([start_one(*a, **k)])[0]  # type: ignore[method-assign]
        app.main.composer.key_variants = n
        app.main.composer.prompt.value = INSTRUCTION
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        await pilot.press("f3")
        while len(turns) < n or variants.streaming:
            await asyncio.sleep(0.005)
        await pilot.pause(0.1)
        cpu = time.process_time() - cpu0
        shown = variants.session.turn
        arrivals = stamps[id(shown)].times if shown is not None else []
        ms = [x[0] for x in screen_latency(arrivals, frames, displays)]
        tokens = sum(t.deltas for t in turns)
        ended = [t.ended for t in turns if t.ended is not None]
        return {
            "n": n,
            "variants": len(variants.items),
            "complete": sum(1 for t in turns if t.complete),
            "states": sorted({t.state for t in turns}),
            "tokens": tokens,
            "tokens_each": [t.deltas for t in turns],
            "hunks_each": [len(v.session.pending.hunks) if v.session.pending is not None else 0
                           for v in variants.items],
            "wall_s": round(max(ended) - t0, 4) if ended else None,
            "ttft_s_max": r4(max((t.ttft for t in turns if t.ttft is not None), default=None)),
            "cpu_s_per_1000_tokens": round(cpu / max(1, tokens) * 1000, 4),
            "token_to_screen_ms_p50": r2(pct(ms, 0.5)),
            "token_to_screen_ms_p99": r2(pct(ms, 0.99)),
            "shown_chunks_timed": len(ms),
            "peak_rss_mb": peak_rss_mb(),
        }


def _child(root: Path, url: str, n: int, model: str, key_env: str | None,
           max_tokens: int | None, env: dict[str, str]) -> dict:
    """A trial in a fresh process: its CPU time and peak RSS are the trial's alone."""
    args = [str(root), url, str(n), model, key_env or "", str(max_tokens or 0)]
    out = subprocess.run([sys.executable, "-m", "app.bench.tui.variants", *args],
                         capture_output=True, text=True, env=env, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"variants trial (N={n}) failed: {out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _cli(root: Path, url: str, n: int, extra: list[str], env: dict[str, str]) -> dict:
    """`steer run --variants N --json` as a user runs it: spawn to exit."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "app", "run", INSTRUCTION, "-f", "big.py",
                          "--variants", str(n), "--json", "-q", *extra],
                         cwd=root, capture_output=True, text=True, env=env, timeout=900)
    wall = time.perf_counter() - t0
    try:
        data = json.loads(out.stdout)
        # --variants 1 is a plain run (its report has one turn's stats)
        rows = data["variants"] if "variants" in data else [
            {"state": data["stats"]["state"], "tokens": data["stats"]["tokens"],
             "last_token_s": data["stats"]["elapsed_s"]}]
    except (ValueError, KeyError):
        raise RuntimeError(f"steer run --variants {n} (exit {out.returncode}): "
                           f"{out.stderr[-3000:]}") from None
    return {"n": n, "exit_code": out.returncode, "wall_s": round(wall, 4),
            "complete": sum(1 for r in rows if r["state"] == "done"),
            "tokens": sum(r["tokens"] for r in rows),
            "last_token_s_max": max((r["last_token_s"] or 0 for r in rows), default=None)}


def r4(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _spread(rows: list[dict], key: str) -> dict | None:
    xs = [r[key] for r in rows if r.get(key) is not None]
    if not xs:
        return None
    return {"median": round(statistics.median(xs), 4), "min": round(min(xs), 4),
            "max": round(max(xs), 4)}


def _summary(by_n: dict[int, list[dict]], keys: tuple[str, ...]) -> list[dict]:
    out = []
    base = None
    for n, rows in by_n.items():
        row: dict = {"n": n, "trials": len(rows),
                     "all_complete": all(r["complete"] == n for r in rows),
                     "tokens_median": statistics.median(r["tokens"] for r in rows)}
        for k in keys:
            row[k] = _spread(rows, k)
        wall = row["wall_s"]["median"] if row.get("wall_s") else None
        if n == 1:
            base = wall
        row["wall_ratio_to_1"] = round(wall / base, 3) if wall and base else None
        out.append(row)
    return out


APP_KEYS = ("wall_s", "cpu_s_per_1000_tokens", "token_to_screen_ms_p50",
            "token_to_screen_ms_p99", "peak_rss_mb", "ttft_s_max")


def _measure(root: Path, url: str, ns: list[int], repeat: int, model: str, key_env: str | None,
             max_tokens: int | None, cli: list[str] | None, env: dict[str, str]) -> dict:
    app_rows: dict[int, list[dict]] = {}
    cli_rows: dict[int, list[dict]] = {}
    for _ in range(repeat):  # the Ns interleaved, so a slow moment of the machine hits all
        for n in ns:
            app_rows.setdefault(n, []).append(_child(root, url, n, model, key_env, max_tokens, env))
            if cli is not None:
                cli_rows.setdefault(n, []).append(_cli(root, url, n, cli, env))
    out: dict = {"app": _summary(app_rows, APP_KEYS),
                 "app_trials": {str(n): rows for n, rows in app_rows.items()}}
    if cli is not None:
        out["steer_run"] = _summary(cli_rows, ("wall_s", "last_token_s_max"))
    return out


def _model(root: Path, ns: list[int], repeat: int, max_tokens: int, cli: bool) -> dict:
    """The same against the embedded model, on a `steer serve` of its own (its own state
    folder, its own token)."""
    from app.providers import serve_registry

    with tempfile.TemporaryDirectory() as state:
        env = child_env(XDG_STATE_HOME=state, STEER_BENCH_KEY="")
        old = os.environ.get("XDG_STATE_HOME")
        os.environ["XDG_STATE_HOME"] = state
        try:
            env["STEER_BENCH_KEY"] = serve_registry.token()
        finally:
            if old is None:
                del os.environ["XDG_STATE_HOME"]
            else:
                os.environ["XDG_STATE_HOME"] = old
        proc, url = serve(None, env=env)
        try:
            got = _measure(root, url, ns, repeat, "smollm2", "STEER_BENCH_KEY", max_tokens,
                           ["--provider", "local", "--max-tokens", str(max_tokens)] if cli else None,
                           env)
        finally:
            stop(proc)
    return {"max_tokens": max_tokens, "file_lines": MODEL_FILE_LINES, "cpus": os.cpu_count(), **got,
            "note": "the model generates the N answers on the same cores as the app (and "
                    "each other): N variants take longer than one here; the ratio is the "
                    "machine's, not the client's"}


def run(ns: list[int], rate: float = 1000.0, tokens: int = 3000, repeat: int = 3,
        model: bool = False, max_tokens: int = 48, cli: bool = True) -> dict:
    ns = sorted(set(ns) | {1})  # the ratio is to one answer
    with tempfile.TemporaryDirectory() as tmp:
        root, answer_file = workspace(Path(tmp), FILE_LINES, tokens)
        n_tokens = len(split_tokens(answer_file.read_text()))
        env = child_env()
        proc, url = serve(answer_file, rate, env=env)
        try:
            scripted = _measure(root, url, ns, repeat, "replay", None, None,
                                ["--base-url", url, "--model", "replay",
                                 "--format", "search_replace"] if cli else None, env)
        finally:
            stop(proc)
        result = {"bench": "variants", "rate_tokens_per_s_each": rate, "answer_tokens": n_tokens,
                  "answer_edits": answer_file.read_text().count("<<<<<<< SEARCH"),
                  "file_lines": FILE_LINES, "repeat": repeat, "cpus": os.cpu_count(),
                  "ideal_wall_s": round(n_tokens / rate, 3) if rate else None,
                  **scripted, "targets": TARGETS}
        if model:  # a 40-line file: the embedded model's window is 8,192 tokens
            (Path(tmp) / "model").mkdir()
            small, _ = workspace(Path(tmp) / "model", MODEL_FILE_LINES, 50)
            result["model"] = _model(small, ns, repeat, max_tokens, cli)
    return result


if __name__ == "__main__":  # one trial, in the child process `_child` starts
    _root, _url, _n, _model_name, _key_env, _max = sys.argv[1:7]
    print(json.dumps(asyncio.run(_trial(Path(_root), _url, int(_n), _model_name,
                                        os.environ[_key_env] if _key_env else None,
                                        int(_max) or None))))
