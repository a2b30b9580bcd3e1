"""The `local` default: the embedded model (or --model-path) behind a shared `steer serve`.

The model is loaded once per machine, not once per steer: the first steer starts a server
for its model (a detached process that exits after a while without clients), later ones find
it in the registry (app/providers/serve_registry.py), check it (the pid lives, /health
answers with the token, for the same model) and connect over the Responses WebSocket. So the
model stays loaded and warm between runs, and several steers share it.

The 135M model needs the answer started for it and copies whole files best: the capabilities
say prefill and the "whole" format, and the prefill reaches the server as steer's `prefill`
extension of `response.create`.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import httpx

from app.core.provider import Capabilities
from app.providers import serve_registry as registry
from app.providers.openai_responses import OpenAIResponses

IDLE_EXIT = 1800.0  # seconds without a client before a server started on demand exits
START_TIMEOUT = 180.0


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


def ensure_server(model_path: str, *, idle_exit: float = IDLE_EXIT) -> tuple[str, str]:
    """(base URL, token) of a running `steer serve` for this model, started if need be.
    Blocking: call it in a thread."""
    token = registry.token()
    with registry.locked("spawn.lock"):  # two steers starting at once start one server
        entry = registry.lookup(model_path)
        if entry and registry.pid_alive(entry["pid"]) and healthy(entry, token, model_path):
            return f"http://{entry['host']}:{entry['port']}/v1", token
        log = registry.state_dir() / "serve.log"
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
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                with open(log, "rb") as f:
                    f.seek(start)
                    tail = f.read().decode(errors="replace").strip()[-600:]
                raise ServerStartError(f"steer serve exited with code {proc.returncode}"
                                       + (f": {tail}" if tail else ""))
            entry = registry.lookup(model_path)
            if entry and entry["pid"] == proc.pid and healthy(entry, token, model_path):
                return f"http://{entry['host']}:{entry['port']}/v1", token
            time.sleep(0.05)
        proc.kill()
        raise ServerStartError(f"steer serve did not start within {START_TIMEOUT:g} s (see {log})")


class ServedLocal(OpenAIResponses):
    name = "local"
    capabilities = Capabilities(warm_up=True, prefill=True, native_steer=True, cancel="close",
                                preferred_format="whole", model_class="tiny", grammar=True)

    def __init__(self, model_path: str | None = None, **kw: object) -> None:
        self.model_path = str(Path(model_path).resolve()) if model_path else default_model_path()
        if self.model_path != default_model_path():  # another GGUF: priced as capable
            self.capabilities = replace(self.capabilities, preferred_format=None,
                                        model_class="capable")
        super().__init__("http://127.0.0.1/v1", Path(self.model_path).stem, None, **kw)  # type: ignore[arg-type]
        self._found: tuple[str, str] | None = None

    def _where(self) -> str:
        return f"steer serve ({self.model_path})" if self._found is None else super()._where()

    async def _endpoint(self) -> tuple[str, str | None]:
        if self._found is None or not self.pool.idle:  # (re)check: the server may have exited
            if not Path(self.model_path).is_file():
                raise ServerStartError(f"no GGUF model at {self.model_path}")
            self._found = await asyncio.to_thread(ensure_server, self.model_path)
            self.base_url, self._key = self._found
        return self._found
