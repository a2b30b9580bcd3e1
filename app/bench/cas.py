"""`steer bench cas`: what is left of the window in which a save could be lost while steer
writes a file. Times the marks Workspace.swap sets, over many writes per file size, both ways:

- `exchange` (Linux renameat2): steer's file goes in by an atomic exchange and the check reads
  the file it displaced, so a save by path has no window: before the exchange it is the file
  checked, after it it replaces steer's write. `check_us` is exchange -> displaced file read
  and compared: a writer that opened the file *before* the exchange and writes into it late
  is still caught until then; a write through such an old descriptor after that goes into the
  displaced file, which is then removed.
- `rename` (the fallback where exchange is not supported): move the target aside, read and
  compare what was moved, then put steer's file in place without replacing. A save landing
  in between is kept (it takes the path first; steer's write gives way). `window_us` is the
  start of that check -> steer's file in place: the time the path is absent (a reader then
  finds no file); `gap_us` is check done -> steer's file in place.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from app.core.disk.workspace import Content, Workspace


def _figures(values_ns: list[int]) -> dict:
    us = sorted(v / 1000 for v in values_ns)
    return {"p50": round(statistics.median(us), 1), "p99": round(us[int(len(us) * 0.99) - 1], 1),
            "max": round(us[-1], 1)}


def _case(mode: str, size: int, writes: int, where: str | None) -> dict:
    with tempfile.TemporaryDirectory(dir=where) as tmp:
        ws = Workspace(tmp)
        ws.exchange = mode == "exchange"
        texts = [Content(data=(b"%d" % i) * (size // len(b"%d" % i)), mode=0o644) for i in range(2)]
        Path(tmp, "f.txt").write_bytes(texts[0].data or b"")
        stamps: dict[str, int] = {}

        def mark(label: str) -> None:
            stamps[label] = time.perf_counter_ns()

        checks, windows, gaps, totals = [], [], [], []
        for i in range(writes):
            stamps.clear()
            t0 = time.perf_counter_ns()
            ws.swap("f.txt", texts[i % 2], texts[(i + 1) % 2], tag="bench", marks=mark)
            totals.append(time.perf_counter_ns() - t0)
            checks.append(stamps["checked"] - stamps["check"])
            windows.append(stamps["done"] - stamps["check"])
            gaps.append(stamps["done"] - stamps["checked"])
        if mode == "exchange":
            return {"swap_us": _figures(totals), "check_us": _figures(checks)}
        return {"swap_us": _figures(totals), "window_us": _figures(windows), "gap_us": _figures(gaps)}


def run(sizes: list[int], writes: int, where: str | None = None) -> dict:
    out: dict = {"writes_per_size": writes, "filesystem_dir": where or tempfile.gettempdir()}
    for mode in ("exchange", "rename"):
        out[mode] = {f"{size}B": _case(mode, size, writes, where) for size in sizes}
    out["exchange_supported"] = Workspace(tempfile.gettempdir()).exchange
    return out
