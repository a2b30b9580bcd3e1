"""What the app benchmarks measure with (`steer bench tui`, `steer bench variants`): the
scripted server in a process of its own (so the app's CPU is measured alone), turn chunks
stamped as they arrive, the frames and the compositor's displays recorded, and the two
matched into token -> screen latencies; percentiles and roundings for the JSON."""

from __future__ import annotations

import gc
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from app.bench.fixtures import big_file, search_replace_answer

# the checkout, for child processes that import `app`
ROOT = Path(__file__).resolve().parents[3]


def pct(xs: list[float], p: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def r2(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


class Stamped(list):
    """turn.chunks, recording when each chunk arrived (bench only)."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def append(self, item: str) -> None:
        self.times.append(time.perf_counter())
        super().append(item)


def serve(answer_file: Path | None, rate: float = 0.0,
          env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """`steer serve --replay answer_file --rate rate --port 0` (without a file: the embedded
    model), started and listening; returns the process and its base URL."""
    replay = ["--replay", str(answer_file), "--rate", str(rate)] if answer_file is not None else []
    proc = subprocess.Popen([sys.executable, "-m", "app", "serve", *replay, "--port", "0"],
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None  # stdout=PIPE
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"steer serve did not start: {line!r}")
    return proc, line.rsplit(" ", 1)[-1].strip()


def stop(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait()


def workspace(tmp: Path, lines: int, tokens: int) -> tuple[Path, Path]:
    """A git folder holding big.py (`lines` lines), and the search/replace answer of about
    `tokens` tokens that edits it, in a file for `steer serve --replay`."""
    root = tmp / "bench"
    root.mkdir()
    text = big_file(lines)
    (root / "big.py").write_text("\n".join(text) + "\n")
    answer, _ = search_replace_answer("big.py", text, tokens)
    answer_file = tmp / "answer.txt"
    answer_file.write_text(answer)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root, answer_file


def collected() -> None:
    """Between two app runs in this process: what the last one left is collected, as a
    fresh process would start (the peak RSS is then the largest run's, not their sum)."""
    for cb in [cb for cb in gc.callbacks if getattr(cb, "__name__", "") == "on_gc"]:
        gc.callbacks.remove(cb)
    gc.collect()


def instrument(app) -> tuple[list[float], list[tuple[float, int]], list, list]:
    from app.ui.compat import on_display

    displays: list[float] = []
    frames: list[tuple[float, int]] = []  # (time, chunks taken so far)
    on_display(app, lambda: displays.append(time.perf_counter()))
    app.main.painted.subscribe(lambda _: frames.append((time.perf_counter(), app.main.sync.chunks)))
    ticks: list = []
    app.main.tick_log = ticks
    collections: list[tuple[float, float, int]] = []  # (start, end, generation)

    started = [0.0]  # when the collection running now started

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            collections.append((started[0], time.perf_counter(), info["generation"]))

    gc.callbacks.append(on_gc)
    return displays, frames, ticks, collections


def ms(x: float | None) -> float | None:
    return None if x is None else round(x * 1000, 2)


def breakdown(lat: list[tuple[float, float, float]], ticks: list, collections: list,
               t0: float, t1: float) -> dict:
    """Where the time of the slow frames goes: waiting for the tick, our frame, Textual's
    layout/render/write, garbage collection inside the tick."""
    ticks = [t for t in ticks if t0 <= t.start <= t1]
    if not ticks:
        return {}

    def gc_in(t) -> float:
        return sum(min(e, t.end) - max(s, t.start) for s, e, _ in collections if s < t.end and e > t.start)

    durations = [t.end - t.start for t in ticks]
    slowest = max(ticks, key=lambda t: t.end - t.start)
    worst = max(lat, key=lambda x: x[0]) if lat else None
    out = {
        "ticks": len(ticks),
        "tick_ms_p50": ms(pct(durations, 0.5)), "tick_ms_p95": ms(pct(durations, 0.95)),
        "tick_ms_p99": ms(pct(durations, 0.99)),
        "slowest_tick": {"total_ms": ms(slowest.end - slowest.start),
                         "our_frame_ms": ms(slowest.frame_end - slowest.start),
                         "textual_render_ms": ms(slowest.end - slowest.frame_end),
                         "layout_pass": slowest.layout, "gc_ms": ms(gc_in(slowest)),
                         "repainted": slowest.dirty},
        "gc_full_collections": sum(1 for s, _, g in collections if g == 2 and t0 <= s <= t1),
        "gc_ms_max": ms(max((e - s for s, e, _ in collections if t0 <= s <= t1), default=0.0)),
    }
    if worst is not None:
        latency, arrival, shown = worst
        tick = next((t for t in ticks if t.start >= arrival), None)
        out["slowest_token"] = {
            "latency_ms": round(latency, 2),
            "waiting_for_tick_ms": ms(tick.start - arrival) if tick else None,
            "tick_ms": ms(tick.end - tick.start) if tick else None,
            "after_tick_ms": ms(shown - tick.end) if tick else None,
        }
    return out


def screen_latency(arrivals: list[float], frames: list[tuple[float, int]],
                   displays: list[float]) -> list[tuple[float, float, float]]:
    """Each chunk's arrival to the first display after the frame that took it:
    (ms, arrival, on screen). `frames` are (time, chunks taken so far) of the turn shown."""
    lat: list[tuple[float, float, float]] = []
    fi = di = 0
    for i, ta in enumerate(arrivals):
        while fi < len(frames) and frames[fi][1] <= i:
            fi += 1
        if fi == len(frames):
            break
        tf = frames[fi][0]
        while di < len(displays) and displays[di] < tf:
            di += 1
        if di == len(displays):
            break
        lat.append(((displays[di] - ta) * 1000, ta, displays[di]))
    return lat


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child process that imports this checkout's `app`."""
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}
