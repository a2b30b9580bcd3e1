"""The `local` default: the embedded model (or --model-path) behind a shared `steer serve`.

The model is loaded once per machine, not once per steer: the first steer starts a server
for its model (a detached process that exits after a while without clients), later ones find
it in the registry (app/providers/serve_registry.py), check it (the pid lives, /health
answers with the token, for the same model) and connect over the Responses WebSocket. So the
model stays loaded and warm between runs, and several steers share it.

The 135M model needs the answer started for it and copies whole files best: the capabilities
say prefill and the "whole" format, and the prefill reaches the server as steer's `prefill`
extension of `response.create`.

A native crash of the model takes the server with it. The request that was running ends
with one line that names the crash (app/providers/serve_crash.py) instead of a socket close
code, is never retried on a fresh server (a build that crashes once crashes again), and the
next request starts a fresh server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import httpx

from app.core.disk.state_home import StateUnusable
from app.core.events import Error
from app.core.provider import STALL_TIMEOUT, Capabilities
from app.providers import http_stream, serve_crash
from app.providers import serve_registry as registry
from app.providers.openai_responses import STEER_TIMEOUT, OpenAIResponses

IDLE_EXIT = 900.0  # seconds without a client before a server started on demand exits
IDLE_EXIT_ENV = "STEER_SERVE_IDLE_EXIT"  # ... or this many, when set (tests, a shared box)
START_TIMEOUT = 120.0  # loading the 135M model takes about a second; a large GGUF longer


class ServerStartError(ConnectionError):
    """No server for the model could be found or started (reported as a network error)."""

    final = True  # trying again would only start another server that fails the same way


def default_model_path() -> str:
    from app.providers.local import default_model_path as path

    return path()


def healthy(entry: dict, token: str, model_path: str) -> bool:
    try:
        r = httpx.get(f"http://{entry['host']}:{entry['port']}/health", timeout=2.0,
                      headers={"Authorization": f"Bearer {token}"})
        info = r.json()
    except (httpx.HTTPError, ValueError):
        return False
    return r.status_code == 200 and info.get("pid") == entry["pid"] and (
        info.get("model_path") == model_path)


def log_path() -> Path:
    return registry.directory() / "serve.log"  # beside the registry (a temp dir's, maybe)


def idle_exit_default() -> float:
    """$STEER_SERVE_IDLE_EXIT seconds when it holds a number, else IDLE_EXIT."""
    try:
        return float(os.environ[IDLE_EXIT_ENV])
    except (KeyError, ValueError):
        return IDLE_EXIT


def ensure_server(model_path: str, *, idle_exit: float | None = None) -> tuple[str, str, dict]:
    """(base URL, token, registry entry) of a running `steer serve` for this model, started
    if need be (exiting after `idle_exit` s without a client: idle_exit_default()).
    Blocking: call it in a thread."""
    if idle_exit is None:
        idle_exit = idle_exit_default()
    token = registry.token()
    with registry.locked("spawn.lock"):  # two steers starting at once start one server
        entry = registry.lookup(model_path)
        if entry and serve_crash.alive(entry["pid"]) and healthy(entry, token, model_path):
            return f"http://{entry['host']}:{entry['port']}/v1", token, entry
        if entry:  # dead, or not answering: forget it (a live one that hangs is stopped)
            _retire(model_path, entry)
        log = log_path()
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])  # where the app package lives
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        start = log.stat().st_size if log.exists() else 0
        with open(log, "ab") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "app", "serve", "--port", "0", "--model-path", model_path,
                 "--idle-exit", f"{idle_exit:g}"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env,
                start_new_session=True)  # detached: it outlives this steer, for the next one
        serve_crash.adopt(proc)  # reaped the moment it exits: never a zombie while we run
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if not serve_crash.alive(proc.pid):
                raise ServerStartError(_start_failure(proc.pid, log, start))
            entry = registry.lookup(model_path)
            if entry and entry["pid"] == proc.pid and healthy(entry, token, model_path):
                return f"http://{entry['host']}:{entry['port']}/v1", token, entry
            time.sleep(0.05)
        proc.kill()
        raise ServerStartError(f"steer serve did not start within {START_TIMEOUT:g} s (see {log})")


def _start_failure(pid: int, log: Path, start: int) -> str:
    """Why a server we started died before it listened: its own last word ("steer serve:
    cannot start: …"), or the crash, never a page of traceback."""
    serve_crash.wait_gone(pid, 1.0)
    with open(log, "rb") as f:
        f.seek(start)
        text = f.read().decode(errors="replace")
    said = [line for line in text.splitlines() if line.startswith("steer serve: cannot start")]
    if said:
        return said[-1][len("steer serve: "):] + f" (see {log})"
    return serve_crash.diagnose(pid, log, start)


def _retire(model_path: str, entry: dict) -> None:
    """A registered server that is dead or does not answer its health check is removed from
    the registry; a live one that hangs is stopped, so that one server per model runs."""
    import signal

    pid = entry["pid"]
    if serve_crash.alive(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
        if not serve_crash.wait_gone(pid, 3.0):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    registry.unregister(model_path, pid)


class ServedLocal(OpenAIResponses):
    name = "local"
    # parallel: each instance has its own sockets and the server queues the generations
    capabilities = Capabilities(warm_up=True, prefill=True, native_steer=True, cancel="close",
                                preferred_format="whole", model_class="tiny", grammar=True,
                                parallel=True, seed=True)

    def __init__(self, model_path: str | None = None, *,
                 connect_timeout: float = http_stream.CONNECT_TIMEOUT,
                 stall_timeout: float = STALL_TIMEOUT, retries: int = http_stream.RETRIES,
                 steer_timeout: float = STEER_TIMEOUT) -> None:
        self.model_path = str(Path(model_path).resolve()) if model_path else default_model_path()
        if self.model_path != default_model_path():  # another GGUF: priced as capable
            self.capabilities = replace(self.capabilities, preferred_format=None,
                                        model_class="capable")
        super().__init__("http://127.0.0.1/v1", Path(self.model_path).stem, None,
                         connect_timeout=connect_timeout, stall_timeout=stall_timeout,
                         retries=retries, steer_timeout=steer_timeout)
        self._found: tuple[str, str] | None = None
        self.server: dict | None = None  # the registry entry of the server in use (pid, port, log)

    def _where(self) -> str:
        return f"steer serve ({self.model_path})" if self._found is None else super()._where()

    async def _endpoint(self) -> tuple[str, str | None]:
        if self._found is None or not self.pool.idle:  # (re)check: the server may have exited
            if not Path(self.model_path).is_file():
                raise ServerStartError(f"no GGUF model at {self.model_path}")
            try:
                url, token, self.server = await asyncio.to_thread(ensure_server, self.model_path)
            except StateUnusable as exc:  # no folder for the registry: trying again won't help
                raise ServerStartError(str(exc)) from None
            self._found = (url, token)
            self.base_url, self._key = self._found
        return self._found

    async def _diagnose(self, err: Error) -> Error:
        """A dropped connection to our server: when the server is gone, say why, by name,
        and let the next request start a fresh one. Never retried: it would only crash the
        fresh server too."""
        entry = self.server
        if err.kind != "network" or entry is None:
            return err
        pid = entry["pid"]
        if not await asyncio.to_thread(serve_crash.wait_gone, pid, 2.0):
            return err  # the server lives: a network fault like any other
        log = Path(entry.get("log") or log_path())
        line = await asyncio.to_thread(serve_crash.diagnose, pid, log, entry.get("log_offset", 0))
        registry.unregister(self.model_path, pid)
        self._found, self.server = None, None
        await self.pool.aclose()  # its sockets went with it
        return Error("model", line, retryable=False)
