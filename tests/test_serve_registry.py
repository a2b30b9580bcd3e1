"""The shared `steer serve` of the embedded model, as the `local` provider finds it
(app/providers/local_serve.py `ensure_server`): a registered server that died, or that hangs
(stopped with SIGSTOP: the kernel still accepts its connections, nothing answers), is
replaced by the next steer; a server left without clients exits by itself and leaves the
registry, but never in the middle of a request. Real processes on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from app.providers import serve_crash
from app.providers import serve_registry as registry
from app.providers.local_serve import default_model_path, ensure_server, healthy

HERE = Path(__file__).resolve().parents[1]


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not serve_crash.alive(pid):
            return True
        time.sleep(0.05)
    return False


@contextlib.contextmanager
def never_left_stopped(pids: list[int]):
    """A test that stops a server must not leave it stopped (or running) if it fails."""
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                os.kill(pid, signal.SIGCONT)


def test_a_killed_registered_server_is_replaced_by_the_next_steer():
    model = default_model_path()
    _url, token, first = ensure_server(model)
    assert registry.lookup(model) == first
    os.kill(first["pid"], signal.SIGKILL)
    assert wait_gone(first["pid"], 10)
    assert registry.lookup(model) == first  # a kill -9 leaves its entry behind

    url, token, second = ensure_server(model)
    assert second["pid"] != first["pid"]
    assert registry.lookup(model) == second
    assert url == f"http://127.0.0.1:{second['port']}/v1"
    assert healthy(second, token, model)


def test_a_hung_registered_server_is_replaced_and_not_left_serving():
    model = default_model_path()
    _url, token, hung = ensure_server(model)
    pids = [hung["pid"]]
    with never_left_stopped(pids):
        os.kill(hung["pid"], signal.SIGSTOP)
        # it still accepts connections (the kernel does): only the health check's timeout
        # tells it from a live one
        with contextlib.closing(socket.create_connection(
                ("127.0.0.1", hung["port"]), timeout=2)):
            pass
        _url, token, fresh = ensure_server(model)
        pids.append(fresh["pid"])
        assert fresh["pid"] != hung["pid"]
        assert registry.lookup(model) == fresh
        assert healthy(fresh, token, model)
        # the stopped server was stopped for good, not left holding its port
        assert wait_gone(hung["pid"], 10), "the hung server is still there"
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", hung["port"]), timeout=2)


def test_a_server_started_on_demand_exits_when_idle_and_leaves_the_registry(monkeypatch):
    monkeypatch.setenv("STEER_SERVE_IDLE_EXIT", "1")
    model = default_model_path()
    _url, _token, entry = ensure_server(model)
    assert registry.lookup(model) == entry
    assert wait_gone(entry["pid"], 15), "the idle server did not exit"
    assert registry.lookup(model) is None
    assert "no client for" in Path(entry["log"]).read_text(errors="replace")


def test_the_idle_exit_is_documented_with_its_variable():
    out = subprocess.run([sys.executable, "-m", "app", "serve", "--help"], capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(HERE)}, timeout=60)
    assert "--idle-exit" in out.stdout and "STEER_SERVE_IDLE_EXIT" in out.stdout


def test_a_server_does_not_exit_idle_in_the_middle_of_a_request(tmp_path):
    """--idle-exit 1 and an answer that takes several seconds to stream: the answer ends
    whole, and only then does the server exit."""
    answer = tmp_path / "answer.txt"
    answer.write_text(" ".join(f"word{i}" for i in range(40)) + "\n")
    proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--port", "0", "--replay",
                             str(answer), "--rate", "12", "--idle-exit", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(HERE)})
    try:
        line = proc.stdout.readline()
        assert "listening on" in line, proc.stderr.read() if proc.poll() is not None else line
        base = line.rsplit(" ", 1)[-1].strip()
        text = []
        with httpx.stream("POST", f"{base}/chat/completions", timeout=30,
                          json={"model": "replay", "stream": True,
                                "messages": [{"role": "user", "content": "go"}]}) as r:
            for raw in r.iter_lines():
                if raw.startswith("data: {"):
                    for choice in json.loads(raw[6:])["choices"]:
                        text.append(choice["delta"].get("content") or "")
                assert proc.poll() is None or raw.startswith("data: [DONE]")
        assert "".join(text) == answer.read_text()
        assert proc.wait(15) == 0  # and then it exits by itself
        assert "no client for" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
