"""The real app, headless, against `steer serve --replay` on 127.0.0.1 (a separate process, so
the app's CPU is measured alone), streaming a recorded ~20,000-token answer that edits a
5,000-line file at several rates.

Figures per rate: achieved tokens/s (what the client consumed, first to last token),
token-to-screen latency (a token's arrival at the client to the first screen update that
includes it: the frame that takes it, then the compositor's render), frames per second,
CPU seconds per 1,000 tokens, peak RSS. Then Esc-to-stopped: a key event posted mid-stream
to the moment the generation is stopped and the screen has been redrawn. Then first paint
of the app on a 50,000-file repository, in a fresh process.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from textual import events

from app.bench.tui.probe import (
    Stamped,
    breakdown,
    child_env,
    collected,
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


async def one_rate(root: Path, answer_file: Path, rate: float, saving: dict | None = None) -> dict:
    from app.providers.openai_chat import OpenAIChat
    from app.ui.app import SteerApp

    proc, url = serve(answer_file, rate)
    try:
        app = SteerApp(root, OpenAIChat(url, "replay"), context=["big.py"], watch_files=False,
                       blink=False, saving=saving)
        async with app.run_test(headless=True, size=(160, 48)) as pilot:
            await pilot.pause(0.2)
            displays, frames, ticks, collections = instrument(app)
            cpu0 = time.process_time()
            app.main.composer.send("apply the recorded edits")
            turn = app.session.turn
            assert turn is not None  # send() started it
            turn.chunks = Stamped()
            while app.session.streaming:
                await asyncio.sleep(0.005)
            await pilot.pause(0.1)
            cpu = time.process_time() - cpu0
            app.main.tick_log = None
            arrivals = turn.chunks.times
            lat = screen_latency(arrivals, frames, displays)  # (ms, arrival, on screen)
            span = arrivals[-1] - arrivals[0] if len(arrivals) > 1 else 0
            in_stream = [d for d in displays if arrivals and arrivals[0] <= d <= arrivals[-1]]
            ms = [x[0] for x in lat]
            return {
                "offered_tokens_per_s": rate or "unthrottled",
                "tokens": turn.deltas,
                "hunks": len(turn.pending.hunks) if turn.pending is not None else 0,
                "achieved_tokens_per_s": round((len(arrivals) - 1) / span) if span else None,
                "token_to_screen_ms_p50": r2(pct(ms, 0.5)),
                "token_to_screen_ms_p95": r2(pct(ms, 0.95)),
                "token_to_screen_ms_p99": r2(pct(ms, 0.99)),
                "frames_per_s": round(len(in_stream) / span, 1) if span else None,
                "cpu_s_per_1000_tokens": round(cpu / max(1, turn.deltas) * 1000, 4),
                "state": turn.state,
                "frames": breakdown(lat, ticks, collections, arrivals[0], arrivals[-1]) if arrivals else {},
            }
    finally:
        stop(proc)


async def _esc_trials(root: Path, answer_file: Path, trials: int) -> dict:
    from app.providers.openai_chat import OpenAIChat
    from app.ui.app import SteerApp

    proc, url = serve(answer_file, 5000)
    rnd = random.Random(5)
    stops: list[float] = []
    try:
        app = SteerApp(root, OpenAIChat(url, "replay"), context=["big.py"], watch_files=False, blink=False)
        async with app.run_test(headless=True, size=(160, 48)) as pilot:
            await pilot.pause(0.2)
            displays, *_ = instrument(app)
            for _ in range(trials):
                app.main.composer.send("apply the recorded edits")
                await asyncio.sleep(0.1 + rnd.random() * 0.3)
                if not app.session.streaming:
                    continue
                t0 = time.perf_counter()
                n = len(displays)
                app.post_message(events.Key("escape", None))
                while app.session.streaming or len(displays) == n:
                    await asyncio.sleep(0)
                stops.append((time.perf_counter() - t0) * 1000)
                turn = app.session.turn
                assert turn is not None and turn.state == "interrupted"
                if app.session.review is not None:  # next trial starts a fresh change set
                    app.session.review.reject_all()
                await pilot.pause(0.05)
    finally:
        stop(proc)
    return {"trials": len(stops), "esc_to_stopped_ms_p50": r2(pct(stops, 0.5)),
            "esc_to_stopped_ms_p99": r2(pct(stops, 0.99)),
            "esc_to_stopped_ms_max": round(max(stops), 2) if stops else None}


FIRST_PAINT = """
import asyncio, json, resource, sys, time
t0 = time.perf_counter()
from pathlib import Path
from app.providers.openai_chat import OpenAIChat
from app.ui.app import SteerApp

async def main():
    from app.ui.compat import on_display
    app = SteerApp(Path(sys.argv[1]), OpenAIChat("http://127.0.0.1:9/v1", "x"), watch_files=False)
    out = {}
    on_display(app, lambda: out.setdefault("first_paint_s", time.perf_counter() - t0))
    async with app.run_test(headless=True, size=(160, 48)) as pilot:
        while not app.main.live.files:
            await asyncio.sleep(0.01)
        out["files_listed"] = len(app.main.live.files)
        out["tree_ready_s"] = time.perf_counter() - t0
        await pilot.pause(0.2)
    out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))

asyncio.run(main())
"""


def _first_paint(tmp: Path, n_files: int = 50_000) -> dict:
    root = tmp / "big-repo"
    for i in range(n_files):
        d = root / f"pkg{i // 1000:02d}" / f"mod{(i // 100) % 10}"
        if i % 100 == 0:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"file{i}.py").write_text(f"x = {i}\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    runs = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", FIRST_PAINT, str(root)], capture_output=True,
                             text=True, env=child_env())
        if out.returncode != 0:
            raise RuntimeError(out.stderr[-2000:])
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {
        "files": runs[0]["files_listed"],
        "first_paint_s_median": round(statistics.median(r["first_paint_s"] for r in runs), 3),
        "tree_ready_s_median": round(statistics.median(r["tree_ready_s"] for r in runs), 3),
        "rss_mb_max": round(max(r["rss_mb"] for r in runs), 1),
    }


def run(rates: list[float], tokens: int = 20_000, esc_trials: int = 20) -> dict:
    del tokens  # the recorded answer is ~20,000 tokens (bench.fixtures)
    with tempfile.TemporaryDirectory() as tmp:
        root, answer_file = workspace(Path(tmp), 5_000, 20_000)
        n_tokens = len(split_tokens(answer_file.read_text()))
        results = []
        for r in rates:
            results.append(asyncio.run(one_rate(root, answer_file, r)))
            collected()
        esc = asyncio.run(_esc_trials(root, answer_file, esc_trials))
        first = _first_paint(Path(tmp))
    return {
        "bench": "tui",
        "answer_tokens": n_tokens,
        "file_lines": 5000,
        "rates": results,
        "esc": esc,
        "peak_rss_mb": peak_rss_mb(),
        "first_paint_50k_files": first,
        "targets": {"keeps_up_with_tokens_per_s": 20_000, "token_to_screen_ms_p99_at_5000": 33,
                    "esc_to_stopped_ms_p99": 50, "rss_mb": 200, "first_paint_s": 1.0},
    }
