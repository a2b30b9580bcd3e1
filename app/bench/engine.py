"""Parser + pending diff at full speed: a recorded ~20,000-token search/replace answer fed one
token at a time against a 5,000-line and a 50,000-line file."""

from __future__ import annotations

import gc
import statistics
import tempfile
import time
from pathlib import Path

from app.bench.fixtures import big_file, search_replace_answer
from app.core.disk.workspace import Workspace
from app.core.edits.diff import PendingDiff
from app.core.edits.formats import make_parser
from app.server.generation import split_tokens


def _case(file_lines: int, target_tokens: int, repeat: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        lines = big_file(file_lines)
        Path(tmp, "big.py").write_text("\n".join(lines) + "\n")
        ws = Workspace(tmp)
        answer, edits = search_replace_answer("big.py", lines, target_tokens)
        tokens = split_tokens(answer)
        rates, finish_ms, per_chunk = [], [], []
        hunks = 0
        for r in range(repeat):
            snap = ws.snapshot("big.py").prepare()  # request time, not stream time
            pending = PendingDiff(ws, [snap])
            parser = make_parser("search_replace", frozenset({"big.py"}))
            feed, pfeed = pending.feed, parser.feed
            gc.collect()
            if r % 2 == 0:  # throughput pass: no per-chunk clock in the loop
                t0 = time.perf_counter()
                for tok in tokens:
                    feed(pfeed(tok))
                rates.append(len(tokens) / (time.perf_counter() - t0))
            else:  # latency pass: the cost of every chunk
                clock = time.perf_counter_ns
                costs = []
                for tok in tokens:
                    ns = clock()
                    feed(pfeed(tok))
                    costs.append(clock() - ns)
                per_chunk.extend(costs)
            t = time.perf_counter()
            pending.feed(parser.finish())
            pending.finish()
            finish_ms.append((time.perf_counter() - t) * 1000)
            hunks = len(pending.hunks)
            assert not pending.errors, pending.errors[:3]
        per_chunk.sort()
        return {
            "file_lines": file_lines,
            "answer_tokens": len(tokens),
            "edits": edits,
            "hunks": hunks,
            "tokens_per_s_median": round(statistics.median(rates)),
            "tokens_per_s_all": [round(x) for x in rates],
            "chunk_us_p50": round(per_chunk[len(per_chunk) // 2] / 1000, 2),
            "chunk_us_p99": round(per_chunk[int(len(per_chunk) * 0.99)] / 1000, 2),
            "chunk_us_max": round(per_chunk[-1] / 1000, 1),
            "finish_ms_median": round(statistics.median(finish_ms), 2),
        }


def run(tokens: int = 20_000, repeat: int = 5) -> dict:
    small = _case(5_000, tokens, repeat)
    large = _case(50_000, tokens, repeat)
    return {
        "bench": "engine",
        "target_tokens_per_s": 200_000,
        "file_5k": small,
        "file_50k": large,
        "p50_ratio_50k_over_5k": round(large["chunk_us_p50"] / small["chunk_us_p50"], 2),
        "p99_ratio_50k_over_5k": round(large["chunk_us_p99"] / small["chunk_us_p99"], 2),
    }
