"""Shared fixtures: real git repositories in temp dirs, and a driver that streams an answer
through the real parser and pending diff in chunks of any size."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, settings

from app.bench.demo import CALC
from app.core.disk.workspace import Workspace
from app.core.edits.diff import PendingDiff
from app.core.edits.formats import make_parser
from app.core.edits.formats.inferred import infer_from
from app.providers import http_stream

# `HYPOTHESIS_PROFILE=deep make test` for a long hunt; the default keeps CI quick.
settings.register_profile("default", max_examples=150, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("deep", max_examples=3000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
# `make mutants` runs the room's tests once per planted bug: fewer examples, each run quick
settings.register_profile("mutants", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def init_repo(path: Path, files: dict[str, str | bytes] | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "t@example.com")
    git(path, "config", "user.name", "t")
    for name, content in (files or {}).items():
        p = path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)
    if files:
        git(path, "add", "-A")
        git(path, "commit", "-qm", "init")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "repo")


def stream(ws: Workspace, answer: str, *, fmt: str = "search_replace", context: Iterable[str] = (),
           cuts: Iterable[int] | None = None, complete: bool = True,
           removal_asked: bool = False, infer: bool = False) -> PendingDiff:
    """Feed `answer` through parser + pending diff, cut at `cuts` (offsets) or whole.
    `removal_asked`: the instruction asked to remove something (a whole-file answer may then
    delete what it left out; otherwise it is read as a fragment). `infer`: a block naming no
    file may be a context file's, as the session reads answers (formats/inferred.py)."""
    snaps = [ws.snapshot(p).prepare() for p in context]
    pending = PendingDiff(ws, snaps)
    pending.removal_asked = removal_asked
    guess = infer_from({s.path: s.lines for s in snaps if s.exists}) if infer else None
    parser = make_parser(fmt, frozenset(s.path for s in snaps), infer=guess)
    pos = 0
    for cut in sorted(set(cuts or ())):
        if pos < cut < len(answer):
            pending.feed(parser.feed(answer[pos:cut]))
            pos = cut
    pending.feed(parser.feed(answer[pos:]))
    pending.feed(parser.finish(complete))
    pending.finish()
    return pending


@pytest.fixture(autouse=True)
def _isolated_user_dirs(tmp_path_factory, monkeypatch):
    """No test reads or writes the real user's config, themes or remembered state; a
    `steer serve` that a test started on demand (the `local` provider) ends with the test."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))
    for var in ("STEER_PROVIDER", "STEER_BASE_URL", "STEER_MODEL", "STEER_API_KEY", "STEER_FORMAT"):
        monkeypatch.delenv(var, raising=False)
    yield
    stop_registered_servers(home / "state" / "steer" / "serve.json")


def stop_registered_servers(state: Path) -> None:
    import json
    import signal
    import time

    try:
        servers = json.loads(state.read_text()).get("servers") or {}
    except (OSError, ValueError):
        return
    pids = [e["pid"] for e in servers.values() if isinstance(e, dict) and "pid" in e]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.05)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# -- the embedded model, always in a process of its own -----------------------------------------
# A native crash in llama.cpp (a build that does not suit this CPU) must fail the test that
# ran the model, not abort the whole pytest run: no test loads the model into this process.
@pytest.fixture(autouse=True)
def _no_model_in_pytest_process():
    before = "llama_cpp" in sys.modules
    yield
    if not before and "llama_cpp" in sys.modules:
        pytest.fail("this test loaded llama.cpp into pytest's own process: run the model in a "
                    "subprocess (the model_server fixture, or run_isolated)")


@pytest.fixture
def model_server() -> SimpleNamespace:
    """The embedded model behind a real `steer serve` process, started as the `local`
    provider starts it (and stopped with the test, by _isolated_user_dirs)."""
    from app.providers.local_serve import default_model_path, ensure_server

    url, token, entry = ensure_server(default_model_path())
    return SimpleNamespace(base_url=url, token=token, pid=entry["pid"])


def run_isolated(code: str, timeout: float = 300) -> tuple[dict, str]:
    """Run `code` in a fresh Python (faulthandler on) that prints one JSON object on its last
    stdout line: (that object, everything else it wrote). A native crash fails the calling
    test with the signal's name and the child's stack, instead of killing pytest."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], env=env,
                         capture_output=True, text=True, timeout=timeout)
    if out.returncode < 0:
        pytest.fail(f"the model's process died of {signal.Signals(-out.returncode).name}:\n"
                    f"{out.stderr[-3000:]}")
    assert out.returncode == 0, out.stderr[-3000:]
    *rest, last = out.stdout.rstrip("\n").split("\n")
    return json.loads(last), "\n".join(rest) + out.stderr


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    """A small repository named `demo` (the name shows in the app's header)."""
    return init_repo(tmp_path / "demo", {"calc.py": CALC, "README.md": "# Demo\n\nA calculator.\n"})


def wait_stopped(proc: subprocess.Popen, timeout: float = 60) -> None:
    """Until a `steer` started with STEER_STOP_AT has SIGSTOPped itself (app/core/faults.py)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        with open(f"/proc/{proc.pid}/stat") as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] in ("T", "t"):
                return
        time.sleep(0.005)
    proc.kill()
    pytest.fail(f"steer did not stop: {proc.communicate()[1]}")


SRC = "".join(f"line {i}\n" for i in range(1, 21))  # a file whose every line is unique


def sr(path: str, old: str, new: str) -> str:
    """A search/replace block, as models write them."""
    return f"{path}\n```\n<<<<<<< SEARCH\n{old}=======\n{new}>>>>>>> REPLACE\n```\n"


# -- what `make test` did not run, said in one line --------------------------------------------
def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """One line naming the skipped tests by reason and file ("skipped: 2 in test_web.py
    (chromium is not installed); ..."), so a developer's run says what it did not check
    (CI installs what they need: .ci/run)."""
    groups: dict[str, dict[str, int]] = {}
    for rep in terminalreporter.stats.get("skipped", []):
        if not isinstance(rep.longrepr, tuple):
            continue
        _where, _line, reason = rep.longrepr
        reason = reason.removeprefix("Skipped: ")
        module = Path(rep.fspath).name
        files = groups.setdefault(reason, {})
        files[module] = files.get(module, 0) + 1
    if groups:
        parts = [f"{sum(files.values())} in {', '.join(sorted(files))} ({reason})"
                 for reason, files in sorted(groups.items(), key=lambda g: -sum(g[1].values()))]
        terminalreporter.write_line("skipped: " + "; ".join(parts))


class Waits(list):
    """The retry waits the providers asked for (`http_stream.wait_out`), in order, each noted
    with what `seen()` returned as it began (set it to what the server has received). The
    waits themselves are skipped: a test proves the order, not the duration."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: Callable[[], object] = lambda: None


@pytest.fixture
def waits(monkeypatch) -> Waits:
    noted = Waits()

    async def wait_out(seconds: float) -> None:
        noted.append((seconds, noted.seen()))
        await asyncio.sleep(0)

    monkeypatch.setattr(http_stream, "wait_out", wait_out)
    return noted
