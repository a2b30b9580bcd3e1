"""The memory of a real `steer serve` process (its RSS from /proc) under hostile clients:
tokenless upgrades with 60 kB heads, tokenless 60 MB bodies, and a mix of 1,000 hostile
requests. The server must refuse them without keeping (or first reading) what they send."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

STEER = [sys.executable, "-c", "import sys; from app.cli import main; sys.exit(main())"]
UPGRADE = (b"GET /v1/responses HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
           + b"".join(b"X-Pad-%d: %s\r\n" % (i, b"a" * 1000) for i in range(60)) + b"\r\n")


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmRSS:"))


@pytest.fixture
def steer_serve(tmp_path: Path) -> Iterator[SimpleNamespace]:
    """`steer serve --replay` requiring the token, as a process of its own."""
    answer = tmp_path / "answer.txt"
    answer.write_text("ok")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen([*STEER, "serve", "--replay", str(answer), "--require-token",
                             "--port", "0"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        port = re.search(r"listening on http://127.0.0.1:(\d+)/v1", line)
        assert port, line
        from app.providers import serve_registry

        yield SimpleNamespace(pid=proc.pid, port=int(port.group(1)), token=serve_registry.token())
    finally:
        proc.terminate()
        proc.wait(10)


class Peak:
    """The highest RSS of a process while the block runs (sampled every 2 ms)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self._stop = pid, 0, threading.Event()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss(self.pid))
            time.sleep(0.002)

    def __enter__(self) -> Peak:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def request(port: int, head: bytes, body: int = 0, timeout: float = 10.0) -> int:
    """Send `head` (then up to `body` bytes while no answer came), return the status (0: the
    connection closed without one)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head)
        answer = asyncio.ensure_future(reader.readline())
        sent = 0
        with contextlib.suppress(ConnectionError, TimeoutError):
            while sent < body and not answer.done():
                writer.write(b"x" * 1_000_000)
                sent += 1_000_000
                await asyncio.wait_for(writer.drain(), 5)
        async with asyncio.timeout(timeout):
            line = await answer
        return int(line.split()[1]) if line else 0
    except ConnectionError:
        return 0
    finally:
        writer.close()


async def bounded(n: int, jobs: list[Callable[[], Awaitable[int]]]) -> list[int]:
    gate = asyncio.Semaphore(n)

    async def one(job: Callable[[], Awaitable[int]]) -> int:
        async with gate:
            return await job()

    return await asyncio.gather(*(one(j) for j in jobs))


def settle(pid: int) -> int:
    time.sleep(0.5)
    return rss(pid)


def test_400_tokenless_upgrades_with_60kB_heads_leave_the_rss_where_it_was(steer_serve):
    s = steer_serve
    jobs = [lambda: request(s.port, UPGRADE)] * 400
    asyncio.run(bounded(16, jobs[:16]))  # warm: the refusal's own code paths
    before = settle(s.pid)
    statuses = asyncio.run(bounded(16, jobs))
    after = settle(s.pid)
    assert set(statuses) == {401}
    assert after - before < 3 * 2**20, (before, after)


def test_4_concurrent_tokenless_60MB_bodies_are_refused_before_they_are_read(steer_serve):
    s = steer_serve
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 60000000\r\n\r\n"
    asyncio.run(request(s.port, head, 2_000_000))  # warm
    before = settle(s.pid)
    with Peak(s.pid) as peak:
        statuses = asyncio.run(bounded(4, [lambda: request(s.port, head, 60_000_000)] * 4))
    after = settle(s.pid)
    assert statuses == [401] * 4
    assert peak.peak - before < 8 * 2**20, (before, peak.peak)
    assert after - before < 3 * 2**20, (before, after)


def test_rss_before_and_after_1000_hostile_requests(steer_serve, capsys):
    s = steer_serve
    auth = f"Authorization: Bearer {s.token}\r\n".encode()

    def post(length: bytes, extra: bytes = b"") -> bytes:
        return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + auth + extra
                + b"Content-Length: " + length + b"\r\n\r\n")

    async def slow_header() -> int:  # one header byte every 0.2 s: closed at the header timeout
        reader, writer = await asyncio.open_connection("127.0.0.1", s.port)
        writer.write(b"GET /health HTTP/1.1\r\n" + auth)
        with contextlib.suppress(ConnectionError):
            for _ in range(100):
                writer.write(b"X")
                await writer.drain()
                with contextlib.suppress(TimeoutError):
                    line = await asyncio.wait_for(reader.readline(), 0.2)
                    writer.close()
                    return int(line.split()[1]) if line else 0
        writer.close()
        return -1

    kinds: list[tuple[int, Callable[[], Awaitable[int]]]] = [
        (401, lambda: request(s.port, UPGRADE)),
        (401, lambda: request(s.port, b"POST /v1/chat/completions HTTP/1.1\r\n"
                              b"Content-Length: 60000000\r\n\r\n", 2_000_000)),
        (413, lambda: request(s.port, post(b"100000000"), 2_000_000)),
        (400, lambda: request(s.port, post(b"-1"))),
        (400, lambda: request(s.port, post(b"abc"))),
        (400, lambda: request(s.port, post(b"99999999999999999999"))),
        (411, lambda: request(s.port, post(b"5", b"Transfer-Encoding: chunked\r\n")
                              .replace(b"Content-Length: 5\r\n", b""))),
        (431, lambda: request(s.port, b"GET /health HTTP/1.1\r\n" + auth
                              + b"".join(b"X-%d: %s\r\n" % (i, b"a" * 4000) for i in range(9))
                              + b"\r\n")),
        (400, lambda: request(s.port, b"GET /health HTTP/9\r\n\r\n")),
        (401, lambda: request(s.port, b"GET /health HTTP/1.1\r\nAuthorization: Bearer no\r\n\r\n")),
    ]
    asyncio.run(bounded(16, [job for _, job in kinds]))  # warm
    before = settle(s.pid)

    async def hostile() -> list[int]:
        slow = [asyncio.ensure_future(slow_header()) for _ in range(16)]
        rest = await bounded(16, [job for _, job in kinds * 99][:1000 - len(slow)])
        return [*await asyncio.gather(*slow), *rest]

    t0 = time.monotonic()
    statuses = asyncio.run(hostile())
    took = time.monotonic() - t0
    after = settle(s.pid)
    expected = [408] * 16 + [status for status, _ in kinds * 99][:1000 - 16]
    assert len(statuses) == 1000 and statuses == expected
    with capsys.disabled():
        print(f"\nsteer serve RSS before 1,000 hostile requests {before / 2**20:.1f} MiB, after "
              f"{after / 2**20:.1f} MiB ({took:.1f} s)")
    assert after - before < 4 * 2**20, (before, after)
