"""`steer bench sessions`: what saving sessions costs, measured on the real code.

- resume: a session of 200 turns and 2,000 hunks (built by really asking a loopback server
  200 times, deciding some hunks, so its log is what a long day leaves), resumed in a fresh
  process: wall time and peak RSS, beside the RSS of the same process that only imports.
- write amplification: an answer of ~20,000 tokens editing a 5,000-line file streamed at
  5,000 tokens/s with saving on: bytes the log wrote per byte streamed (the text alone, and
  with the request's base snapshot), and how often it fsynced.
- token -> screen p99 at 5,000 tokens/s in the real app (headless, as `steer bench tui`),
  saving off and on, alternated.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app.bench.fixtures import big_file, search_replace_answer
from app.server.chat_server import ChatServer
from app.server.generation import split_tokens

HERE = Path(__file__).resolve().parents[2]
FILES = 4  # 4 files of 5,000 lines: room for 2,000 distinct edits


def _repo(root: Path) -> list[list[str]]:
    root.mkdir(parents=True)
    files = []
    for i in range(FILES):
        lines = big_file(5_000, seed=7 + i)
        (root / f"m{i}.py").write_text("\n".join(lines) + "\n")
        files.append(lines)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return files


def _answers(files: list[list[str]], turns: int, per_turn: int) -> list[str]:
    """`turns` answers of `per_turn` small edits each, never the same function twice."""
    spots = [(i, s) for i, lines in enumerate(files)
             for s, line in enumerate(lines) if line.startswith("def ")
             and all(lines[s: s + 4]) and len(lines[s: s + 4]) == 4]
    answers = []
    for t in range(turns):
        parts = [f"Turn {t}: small changes.\n\n"]
        for i, s in spots[t * per_turn:(t + 1) * per_turn]:
            body = files[i][s:s + 4]
            new = [body[0], body[1].replace("Compute", "Calculate"), body[2] + "  # checked", body[3]]
            parts.append(f"m{i}.py\n```python\n<<<<<<< SEARCH\n" + "\n".join(body)
                         + "\n=======\n" + "\n".join(new) + "\n>>>>>>> REPLACE\n```\n\n")
        answers.append("".join(parts))
    return answers


async def _build(root: Path, turns: int, per_turn: int) -> tuple[str, int, float]:
    """Really ask `turns` times; accept one hunk and reject one every few turns."""
    from app.core.conversation import resume
    from app.core.conversation.session import Session
    from app.core.disk.workspace import Workspace
    from app.core.edits.hunks import HunkState
    from app.core.storage.store import SessionStore
    from app.providers.openai_chat import OpenAIChat

    files = _repo(root)
    server = ChatServer(replay=_answers(files, turns, per_turn))
    await server.start()
    t0 = time.perf_counter()
    try:
        session = Session(Workspace(root), OpenAIChat(server.base_url, "replay"),
                          fmt="search_replace", context=[f"m{i}.py" for i in range(FILES)])
        log = resume.start(session, SessionStore(root))
        for t in range(turns):
            await session.ask(f"change batch {t}")
            pending, review = session.pending, session.review
            assert pending is not None and review is not None  # an answer opened them
            if t % 4 == 0:
                fresh = [h for h in pending.hunks if h.state == HunkState.PENDING]
                review.reject([fresh[0].id], "not this one")
                review.accept([fresh[-1].id])
        hunks = len(session.pending.hunks) if session.pending is not None else 0
        await session.aclose()
    finally:
        await server.close()
    return log.id, hunks, time.perf_counter() - t0


RESUME = """
import json, sys, time
from pathlib import Path
from app.core.conversation import resume
from app.core.provider import Provider
from app.core.conversation.session import Session
from app.core.storage.store import SessionStore
from app.core.disk.workspace import Workspace
root, sid, only_import = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
out = {}
if not only_import:
    t0 = time.perf_counter()
    s = Session(Workspace(root), Provider())
    r = resume.resume(s, SessionStore(root), sid)
    out["resume_s"] = time.perf_counter() - t0
    out["turns"], out["hunks"] = len(s.turns), len(s.pending.hunks)
    out["open"] = sum(1 for h in s.pending.hunks if h.state.value == "pending")
    s.log.close()
# VmHWM: this process's own peak (ru_maxrss would count the parent it was forked from)
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
out["rss_mb"] = int(hwm.split()[1]) / 1024
print(json.dumps(out))
"""


def _resume_runs(root: Path, sid: str, runs: int = 3) -> dict:
    env = {**os.environ, "PYTHONPATH": str(HERE)}

    def one(only_import: bool) -> dict:
        out = subprocess.run([sys.executable, "-c", RESUME, str(root), sid,
                              "1" if only_import else "0"], capture_output=True, text=True, env=env)
        if out.returncode != 0:
            raise RuntimeError(out.stderr[-2000:])
        return json.loads(out.stdout.strip().splitlines()[-1])

    done = [one(False) for _ in range(runs)]
    base = one(True)
    return {"turns": done[0]["turns"], "hunks": done[0]["hunks"], "open_hunks": done[0]["open"],
            "resume_s_median": round(statistics.median(d["resume_s"] for d in done), 3),
            "resume_s_max": round(max(d["resume_s"] for d in done), 3),
            "rss_mb_max": round(max(d["rss_mb"] for d in done), 1),
            "rss_mb_imports_only": round(base["rss_mb"], 1)}


async def _amplification(root: Path, rate: float) -> dict:
    from app.core.conversation import resume
    from app.core.conversation.session import Session
    from app.core.disk.workspace import Workspace
    from app.core.storage.store import SessionStore
    from app.providers.openai_chat import OpenAIChat

    lines = big_file(5_000)
    root.mkdir(parents=True)
    (root / "big.py").write_text("\n".join(lines) + "\n")
    answer, _ = search_replace_answer("big.py", lines, 20_000)
    server = ChatServer(replay=answer, rate=rate)
    await server.start()
    try:
        session = Session(Workspace(root), OpenAIChat(server.base_url, "replay"),
                          fmt="search_replace", context=["big.py"])
        log = resume.start(session, SessionStore(root))
        log.flush()
        before, fsyncs0 = log.bytes_written, log.fsyncs
        turn = session.start("apply the edits")
        await asyncio.sleep(0)
        log.flush()
        request = log.bytes_written - before  # the turn record with its base snapshot
        streamed_from = log.bytes_written
        fsyncs1 = log.fsyncs
        grew: list[float] = []  # when the bytes on disk grew while the answer streamed

        async def sample() -> None:
            last = log.bytes_written  # the writer thread's count, read every 20 ms
            while True:
                await asyncio.sleep(0.02)
                if (now := log.bytes_written) > last:
                    last = now
                    grew.append(time.perf_counter())

        sampler = asyncio.ensure_future(sample())
        t0 = time.perf_counter()
        await session.wait()
        span = time.perf_counter() - t0
        sampler.cancel()
        gaps = [b - a for a, b in zip([t0, *grew], grew, strict=False)]
        log.flush()
        streamed = len(turn.text.encode("utf-8"))
        text_bytes = log.bytes_written - streamed_from
        out = {
            "offered_tokens_per_s": rate, "tokens": turn.deltas,
            "achieved_tokens_per_s": round(turn.tokens_per_s or 0),
            "bytes_streamed": streamed, "bytes_written_while_streaming": text_bytes,
            "write_amplification": round(text_bytes / streamed, 3),
            "request_record_bytes": request,
            "write_amplification_with_request": round((text_bytes + request) / streamed, 3),
            "fsyncs_while_streaming": log.fsyncs - fsyncs1,
            "stream_s": round(span, 2),
            # what a kill -9 can lose: the longest the streamed text went without reaching
            # the disk (target: FLUSH_EVERY, 1 s, plus a write)
            "unsaved_s_max": round(max(gaps), 3) if gaps else None,
            "fsyncs_total": log.fsyncs - fsyncs0,
        }
        await session.aclose()
    finally:
        await server.close()
    return out


def _latency(tmp: Path, pairs: int) -> dict:
    from app.bench.tui.probe import workspace
    from app.bench.tui.stream import one_rate

    root, answer_file = workspace(tmp, 5_000, 20_000)
    off, on = [], []
    for _ in range(pairs):
        off.append(asyncio.run(one_rate(root, answer_file, 5000)))
        on.append(asyncio.run(one_rate(root, answer_file, 5000, saving={})))

    def pick(runs: list[dict]) -> dict:
        return {"token_to_screen_ms_p99": [r["token_to_screen_ms_p99"] for r in runs],
                "token_to_screen_ms_p50": [r["token_to_screen_ms_p50"] for r in runs],
                "achieved_tokens_per_s": [r["achieved_tokens_per_s"] for r in runs],
                "cpu_s_per_1000_tokens": [r["cpu_s_per_1000_tokens"] for r in runs]}

    return {"offered_tokens_per_s": 5000, "saving_off": pick(off), "saving_on": pick(on)}


@contextlib.contextmanager
def _state_dir(tmp: Path):
    """Sessions of the benchmark go to a temp state dir, never the user's."""
    old = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp / "state")
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("XDG_STATE_HOME", None)
        else:
            os.environ["XDG_STATE_HOME"] = old


def run(turns: int = 200, hunks: int = 2_000, rate: float = 5_000, pairs: int = 2) -> dict:
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        with _state_dir(tmp):
            sid, made, build_s = asyncio.run(_build(tmp / "long", turns, max(1, hunks // turns)))
            log = next((tmp / "state").rglob(f"{sid}.jsonl"))
            resumed = {**_resume_runs(tmp / "long", sid), "log_mb": round(log.stat().st_size / 1e6, 2),
                       "built_in_s": round(build_s, 1)}
            amp = asyncio.run(_amplification(tmp / "amp", rate))
            latency = _latency(tmp, pairs)
    return {
        "bench": "sessions",
        "resume": resumed,
        "write_amplification": amp,
        "token_to_screen": latency,
        "answer_tokens": len(split_tokens(search_replace_answer("big.py", big_file(5_000),
                                                                20_000)[0])),
        "targets": {"token_to_screen_ms_p99_at_5000": 33, "saving_flushes_at_least_every_s": 1.0},
    }
