"""`steer run` and `steer undo` end to end: the real CLI in a subprocess, a real git repository
in a temp dir, a real OpenAI-compatible server on 127.0.0.1 (replaying a recorded answer, with
faults where a test needs one), and the embedded model where marked."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SRC, git, init_repo, sr, wait_stopped

from app.server.chat_server import ServerThread
from app.server.generation import Faults, split_tokens

STEER = [sys.executable, "-c", "import sys; from app.cli import main; sys.exit(main())"]
KEY = "sk-test-5f1e9c0ffee0123456789abcdef"


ANSWER = ("Two small changes.\n\n" + sr("f.txt", "line 3\n", "line three\n")
          + sr("f.txt", "line 10\n", "line ten\nline ten b\n") + "\nDone.\n")
EXPECTED = SRC.replace("line 3\n", "line three\n").replace("line 10\n", "line ten\nline ten b\n")


def steer(root: Path, *args: str, env: dict[str, str] | None = None,
          timeout: float = 120) -> subprocess.CompletedProcess:
    e = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), **(env or {})}
    return subprocess.run([*STEER, *args], cwd=root, env=e, capture_output=True, text=True,
                          timeout=timeout)


def served(answer: str = ANSWER, **faults: object) -> ServerThread:
    return ServerThread(replay=answer, faults=Faults(**faults))  # type: ignore[arg-type]


def run_args(server, *extra: str) -> list[str]:
    return ["run", "edit it", "-f", "f.txt", "--base-url", server.base_url, "--model", "replay",
            "--format", "search_replace", *extra]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "r", {"f.txt": SRC, "other.txt": "keep me\n"})


def clean(root: Path) -> bool:
    return git(root, "status", "--porcelain") == ""


# -- the happy path --------------------------------------------------------------------------
def test_accept_all_writes_exactly_the_proposal_and_the_printed_diff_applies(repo, tmp_path):
    with served() as server:
        out = steer(repo, *run_args(server, "--accept", "all"))
    assert out.returncode == 0, out.stderr
    assert (repo / "f.txt").read_text() == EXPECTED
    assert (repo / "other.txt").read_text() == "keep me\n"
    assert "accepted 2 hunks" in out.stderr and "Two small changes." in out.stderr
    # the diff on stdout is what `git apply` takes, and it gives the same file
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy)
    git(copy, "checkout", "--", "f.txt")
    (tmp_path / "p.diff").write_text(out.stdout)
    git(copy, "apply", str(tmp_path / "p.diff"))
    assert (copy / "f.txt").read_text() == EXPECTED


def test_without_accept_the_diff_is_printed_and_nothing_is_written(repo):
    with served() as server:
        out = steer(repo, *run_args(server))
    assert out.returncode == 0, out.stderr
    assert "-line 3\n+line three\n" in out.stdout and "+line ten b\n" in out.stdout
    assert clean(repo)


def test_json_report(repo):
    with served() as server:
        out = steer(repo, *run_args(server, "--json", "--accept", "all"))
    assert out.returncode == 0, out.stderr
    rep = json.loads(out.stdout)
    text = json.dumps(rep)
    assert "Two small changes." in text and "+line three" in text
    assert rep["exit_code"] == 0 and rep["stats"]["tokens"] == len(split_tokens(ANSWER))
    assert rep["stats"]["state"] == "done" and rep["files"][0]["path"] == "f.txt"
    assert (repo / "f.txt").read_text() == EXPECTED
    # the words around the edits, one paragraph break where each block stood
    assert rep["explanation"] == "Two small changes.\n\nDone."


# -- an answer cut short writes nothing --------------------------------------------------------
@pytest.mark.parametrize("fault", [{"drop_after": 20}, {"stall_after": 20, "stall_seconds": 30},
                                   {"status": 500}, {"malformed_after": 20}])
def test_an_answer_cut_short_writes_nothing_and_exits_3(repo, fault):
    assert len(split_tokens(ANSWER)) > 20
    with served(**fault) as server:
        out = steer(repo, *run_args(server, "--accept", "all", "--stall-timeout", "1"))
    assert out.returncode == 3, out.stderr
    assert "nothing was written" in out.stderr
    assert clean(repo)


def test_connection_refused_is_a_provider_error(repo):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nobody listens there
    out = steer(repo, "run", "x", "-f", "f.txt", "--base-url", f"http://127.0.0.1:{port}/v1",
                "--model", "m", "--accept", "all")
    assert out.returncode == 3 and "nothing was written" in out.stderr
    assert clean(repo)


# -- malformed and refused edits ---------------------------------------------------------------
def test_a_search_block_not_found_is_refused_and_the_others_still_apply(repo):
    answer = sr("f.txt", "line 3\n", "line three\n") + sr("f.txt", "no such line\n", "x\n")
    with served(answer) as server:
        out = steer(repo, *run_args(server, "--accept", "all"))
    assert out.returncode == 4
    assert "edit refused" in out.stderr and "f.txt" in out.stderr
    assert (repo / "f.txt").read_text() == SRC.replace("line 3\n", "line three\n")


@pytest.mark.parametrize("path", ["../evil.txt", "/tmp/steer-evil.txt", ".git/config"])
def test_paths_outside_the_workspace_are_refused(repo, path):
    answer = f"{path}\n```\nowned\n```\n" + sr("f.txt", "line 3\n", "line three\n")
    before = (repo / ".git" / "config").read_bytes()
    with served(answer) as server:
        out = steer(repo, "run", "x", "-f", "f.txt", "--base-url", server.base_url, "--model", "r",
                    "--format", "whole", "--accept", "all")
    assert out.returncode == 4, out.stderr
    assert "edit refused" in out.stderr
    assert not (repo.parent / "evil.txt").exists() and not Path("/tmp/steer-evil.txt").exists()
    assert (repo / ".git" / "config").read_bytes() == before


# -- usage and configuration errors ------------------------------------------------------------
def test_a_binary_context_file_is_a_usage_error(repo):
    (repo / "blob.bin").write_bytes(b"\x00\x01\x02\xff" * 10)
    with served() as server:
        out = steer(repo, "run", "x", "-f", "blob.bin", "--base-url", server.base_url, "--model", "r")
        assert out.returncode == 2 and "blob.bin" in out.stderr
        assert server.stats.requests == []  # refused before anything was sent


def test_unknown_provider_is_a_usage_error(repo):
    out = steer(repo, "run", "x", "--provider", "nope")
    assert out.returncode == 2 and "nope" in out.stderr


def test_a_hosted_preset_without_its_key_is_a_configuration_error(repo):
    env = {k: "" for k in ("OPENAI_API_KEY", "STEER_API_KEY")}
    out = steer(repo, "run", "x", "-f", "f.txt", "--provider", "openai", "--model", "gpt-4.1",
                env=env)
    assert out.returncode == 2 and "OPENAI_API_KEY" in out.stderr


def test_openai_chat_without_a_base_url_is_a_configuration_error(repo):
    out = steer(repo, "run", "x", "--provider", "openai-chat", "--model", "m")
    assert out.returncode == 2 and "base" in out.stderr.lower()


# -- keys --------------------------------------------------------------------------------------
def test_the_preset_key_is_sent_as_bearer_and_never_printed(repo):
    with served() as server:
        out = steer(repo, *run_args(server, "--provider", "groq", "--json"),
                    env={"GROQ_API_KEY": KEY, "STEER_API_KEY": ""})
        assert server.stats.headers[0]["authorization"] == f"Bearer {KEY}"
    assert out.returncode == 0, out.stderr
    assert KEY not in out.stdout + out.stderr


def test_steer_api_key_overrides_the_preset_variable(repo):
    with served() as server:
        out = steer(repo, *run_args(server, "--provider", "groq"),
                    env={"GROQ_API_KEY": "sk-wrong", "STEER_API_KEY": KEY})
        assert server.stats.headers[0]["authorization"] == f"Bearer {KEY}"
    assert out.returncode == 0, out.stderr


def test_an_auth_error_does_not_leak_the_key(repo):
    with served(status=401) as server:
        out = steer(repo, *run_args(server, "--provider", "groq", "--accept", "all"),
                    env={"GROQ_API_KEY": KEY, "STEER_API_KEY": ""})
    assert out.returncode == 3
    assert KEY not in out.stdout + out.stderr
    assert clean(repo)


def test_an_sse_error_event_exits_3_and_writes_nothing(repo):
    """A server that sends `event: error` mid-answer, then goes on to finish as if nothing
    happened (exact bytes, from a bare socket server on 127.0.0.1)."""
    import socketserver
    import threading

    def event(obj: object, name: str = "") -> bytes:
        head = f"event: {name}\n".encode() if name else b""
        return head + b"data: " + json.dumps(obj).encode() + b"\n\n"

    choice = {"index": 0, "delta": {"content": ANSWER}, "finish_reason": None}
    body = (event({"choices": [choice]}) + event({"message": "the model overloaded"}, "error")
            + event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            + b"data: [DONE]\n\n")

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            length = 0
            while (line := self.rfile.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            self.rfile.read(length)
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
                             + body)

    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        out = steer(repo, "run", "edit it", "-f", "f.txt", "--base-url", url, "--model", "m",
                    "--format", "search_replace", "--accept", "all")
        server.shutdown()
    assert out.returncode == 3, out.stderr
    assert "127.0.0.1 reported an error mid-answer: the model overloaded" in out.stderr
    assert "nothing was written" in out.stderr
    assert clean(repo) and (repo / "f.txt").read_text() == SRC


# -- undo --------------------------------------------------------------------------------------
def test_undo_restores_the_exact_bytes_and_deletes_a_created_file(repo):
    answer = sr("f.txt", "line 3\n", "line three\n") + sr("new.txt", "", "fresh\n")
    with served(answer) as server:
        out = steer(repo, "run", "x", "-f", "f.txt", "--base-url", server.base_url, "--model", "r",
                    "--format", "search_replace", "--accept", "all")
    assert out.returncode == 0, out.stderr
    assert (repo / "new.txt").read_text() == "fresh\n"
    undo = steer(repo, "undo")
    assert undo.returncode == 0, undo.stderr
    assert (repo / "f.txt").read_text() == SRC
    assert not (repo / "new.txt").exists()
    assert clean(repo)


def test_undo_refuses_when_the_accepted_lines_changed_since(repo):
    with served() as server:
        assert steer(repo, *run_args(server, "--accept", "all")).returncode == 0
    mine = EXPECTED.replace("line three\n", "line three, edited by me\n")
    (repo / "f.txt").write_text(mine)
    undo = steer(repo, "undo")
    assert undo.returncode == 4
    assert "f.txt" in undo.stderr and "changed" in undo.stderr
    assert (repo / "f.txt").read_text() == mine


# -- file formats are kept ---------------------------------------------------------------------
def test_crlf_bom_and_mode_survive_an_accept(repo):
    data = "\ufeff" + SRC.replace("\n", "\r\n")
    (repo / "f.txt").write_bytes(data.encode("utf-8"))
    os.chmod(repo / "f.txt", 0o755)
    git(repo, "commit", "-qam", "crlf")
    with served() as server:
        out = steer(repo, *run_args(server, "--accept", "all"))
    assert out.returncode == 0, out.stderr
    raw = (repo / "f.txt").read_bytes()
    assert raw == ("\ufeff" + EXPECTED.replace("\n", "\r\n")).encode("utf-8")
    assert stat.S_IMODE((repo / "f.txt").stat().st_mode) == 0o755


# -- the embedded model ------------------------------------------------------------------------
# These hold on any llama-cpp-python build: they check the contract (a clean exit, the file on
# disk exactly what the printed diff says, nothing deleted unflagged), never one version's
# greedy text. The model always runs in a `steer serve` process of its own.
TINY = "def greet():\n    return 'hi'\n"
TWO = ('def greet(name):\n    return f"Hello, {name}!"\n\n\n'
       'def add(a, b):\n    return a + b\n')


def _check_model_run(root: Path, name: str, before: str, out: subprocess.CompletedProcess) -> None:
    """What the contract guarantees whatever a 135M model writes: a clean exit (0 done, 4 an
    edit refused, 3 only for an answer the token limit cut short, said so, nothing written),
    no traceback, and a file on disk that is the original with exactly the printed diff
    applied (or the original, when nothing was written)."""
    assert out.returncode in (0, 3, 4), out.stderr
    assert "Traceback" not in out.stderr
    now = (root / name).read_text()
    if out.returncode == 3:  # a 135M model rambles: the limit is an outcome, never a crash
        assert "the answer ended early (length); nothing was written" in out.stderr, out.stderr
        assert now == before
        return
    if now == before:
        return
    assert out.returncode == 0 or "wrote" in out.stderr, out.stderr
    check = root.parent / "applied"
    shutil.rmtree(check, ignore_errors=True)
    init_repo(check, {name: before})
    patched = subprocess.run(["git", "apply", "-"], cwd=check, input=out.stdout, text=True,
                             capture_output=True)
    assert patched.returncode == 0, patched.stderr
    assert (check / name).read_text() == now, "the file on disk is not what the diff says"


@pytest.mark.model
def test_steer_run_with_the_embedded_model_keeps_the_contract(tmp_path):
    root = init_repo(tmp_path / "m", {"greet.py": TINY})
    out = steer(root, "run", "Add a docstring to greet.", "-f", "greet.py", "--accept", "all",
                "--max-tokens", "200", timeout=300)
    _check_model_run(root, "greet.py", TINY, out)


@pytest.mark.model
def test_steer_run_with_no_flags_on_a_two_function_file(tmp_path):
    """A newcomer's first command: no provider, no file picked, no --accept."""
    root = init_repo(tmp_path / "m", {"two.py": TWO})
    out = steer(root, "run", "Add a docstring to greet in two.py.", timeout=300)
    assert out.returncode in (0, 3, 4), out.stderr  # 3: cut short by the limit, and said so
    assert out.returncode != 3 or "the answer ended early (length)" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and "code 1006" not in out.stderr
    assert (root / "two.py").read_text() == TWO  # without --accept nothing is written


def _state_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _registered_servers(state: Path) -> dict:
    try:
        return json.loads((state / "steer" / "serve.json").read_text()).get("servers") or {}
    except (OSError, ValueError):
        return {}


@pytest.mark.model
def test_a_model_server_crash_mid_answer_is_named_and_leaves_no_server(tmp_path):
    """SIGSEGV to `steer serve` while it generates (what a llama.cpp build that does not suit
    the CPU does): `steer run` exits 3 when the server dies, not at its stall timeout, says the embedded model crashed and where
    its log is, never a socket close code, writes nothing, and no server is left running."""
    import time

    root = init_repo(tmp_path / "m", {"two.py": TWO})
    state = Path(os.environ["XDG_STATE_HOME"])
    # the server it starts stops itself after sending three tokens (app/core/faults.py)
    e = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
         "STEER_STOP_AT": "serve:generating"}
    proc = subprocess.Popen([*STEER, "run", "Add a docstring to greet.", "-f", "two.py",
                             "--accept", "all", "--max-tokens", "300", "--stall-timeout", "600"],
                            cwd=root, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        pid = None
        while time.monotonic() < deadline:  # the server it started, stopped mid-answer
            servers = _registered_servers(state)
            pid = next(iter(servers.values()))["pid"] if servers else None
            if pid is not None and _state_of(pid) in ("T", "t"):
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        assert pid is not None and _state_of(pid) in ("T", "t"), "no server stopped mid-answer"
        os.kill(pid, signal.SIGSEGV)  # delivered as it continues, in the middle of generating
        os.kill(pid, signal.SIGCONT)
        # the crash is noticed when it happens: waiting for the stall timeout (600 s) would
        # outlast the give-up (this only ends a test that would otherwise hang)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = err.decode()
    assert proc.returncode == 3, err
    assert "the embedded model crashed (SIGSEGV" in err, err
    assert str(state / "steer" / "serve.log") in err and "--base-url" in err
    assert "code 1006" not in err and "Traceback" not in err, err
    assert (root / "two.py").read_text() == TWO  # an answer cut short writes nothing
    assert not Path(f"/proc/{pid}").exists(), "the crashed server is a zombie"
    assert _registered_servers(state) == {}  # no fresh server was started for a retry
    assert "pid" in (state / "steer" / "serve.log").read_text()  # the log names the end


@pytest.mark.model
def test_steer_run_against_steer_serve_on_loopback(tmp_path):
    root = init_repo(tmp_path / "m", {"greet.py": TINY})
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    e = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    server = subprocess.Popen([*STEER, "serve", "--port", str(port)], env=e, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = server.stdout.readline()  # printed once the model is loaded and listening
        assert re.search(rf"listening on http://127.0.0.1:{port}/v1", line), line
        from app.providers import serve_registry

        token = serve_registry.read()["token"]  # steer serve takes only requests that carry it
        out = steer(root, "run", "Add a docstring to greet.", "-f", "greet.py", "--accept", "all",
                    "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "smollm2",
                    "--format", "whole", "--max-tokens", "200", timeout=300,
                    env={"STEER_API_KEY": token})
    finally:
        server.terminate()
        server.wait(10)
    _check_model_run(root, "greet.py", TINY, out)  # the file on disk is what the diff says
    # the whole answer came through the server, timed by the client (over plain chat
    # completions there is no prefill, so the tiny model may not name the file it edits)
    m = re.search(r"· done · [\d,]+ tok/s · (\d+) tok", out.stderr)
    assert m and int(m.group(1)) > 0, out.stderr


# -- no traceback exits: every failure has its exit code and says what was written -------------
def child(root: Path, *args: str, stop: str) -> subprocess.Popen:
    """`steer` that SIGSTOPs itself at `stop` (app/core/faults.py)."""
    e = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "STEER_STOP_AT": stop}
    return subprocess.Popen([sys.executable, "-m", "app", *args], cwd=root, env=e,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def immutable(path: Path, on: bool) -> None:
    subprocess.run(["chattr", "+i" if on else "-i", str(path)], check=True, capture_output=True)


@pytest.fixture
def three(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "r", {"a/f.txt": SRC, "b/f.txt": SRC, "c/f.txt": SRC})


def test_a_permission_error_half_way_reports_written_and_not_written(three):
    try:
        immutable(three / "b", True)  # a real EPERM from the kernel, even for root
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("chattr +i is not available here")
    try:
        answer = "".join(sr(f"{d}/f.txt", "line 3\n", "line three\n") for d in "abc")
        with served(answer) as server:
            out = steer(three, "run", "x", "--base-url", server.base_url, "--model", "r",
                        "--format", "search_replace", "--accept", "all", "--json")
    finally:
        immutable(three / "b", False)
    assert out.returncode == 4 and "Traceback" not in out.stderr
    rep = json.loads(out.stdout)
    assert rep["written"] == ["a/f.txt", "c/f.txt"]
    assert len(rep["not_written"]) == 1 and "b/f.txt" in rep["not_written"][0]
    assert "not permitted" in rep["not_written"][0]
    assert "not written: b/f.txt" in out.stderr and "steer undo" in out.stderr
    assert (three / "b/f.txt").read_text() == SRC
    undo = steer(three, "undo")
    assert undo.returncode == 0, undo.stderr
    assert clean(three)


def test_a_lone_surrogate_in_the_answer_is_a_refused_edit(repo):
    answer = sr("f.txt", "line 3\n", "line \ud800\n") + sr("other.txt", "keep me\n", "kept\n")
    with served(answer) as server:
        out = steer(repo, *run_args(server, "--accept", "all"))
    assert out.returncode == 4 and "Traceback" not in out.stderr
    assert "surrogate" in out.stderr and "wrote other.txt" in out.stderr
    assert (repo / "f.txt").read_text() == SRC and (repo / "other.txt").read_text() == "kept\n"
    assert "\\ud800" in out.stdout  # the printed diff shows it escaped


def test_a_file_swapped_for_an_outside_symlink_before_the_accept(repo, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text(SRC)
    with served() as server:
        proc = child(repo, *run_args(server, "--accept", "all", "-q"), stop="run:accepting")
        wait_stopped(proc)
        os.unlink(repo / "f.txt")
        (repo / "f.txt").symlink_to(secret)
        os.kill(proc.pid, signal.SIGCONT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 4 and "Traceback" not in err
    assert "f.txt" in err and "symlink" in err
    assert secret.read_text() == SRC


def test_a_move_destination_created_while_streaming_is_kept(repo):
    answer = ("*** Begin Patch\n*** Update File: f.txt\n*** Move to: g.txt\n@@\n line 1\n-line 2\n"
              "+two\n*** End Patch\n")
    with served(answer) as server:
        proc = child(repo, "run", "x", "-f", "f.txt", "--base-url", server.base_url, "--model", "r",
                     "--format", "apply_patch", "--accept", "all", "-q", stop="run:accepting")
        wait_stopped(proc)
        (repo / "g.txt").write_text("mine\n")
        os.kill(proc.pid, signal.SIGCONT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 4 and "g.txt" in err
    assert (repo / "g.txt").read_text() == "mine\n" and (repo / "f.txt").read_text() == SRC


def test_undo_refuses_a_fifo_at_once_instead_of_hanging(repo):
    with served() as server:
        assert steer(repo, *run_args(server, "--accept", "all")).returncode == 0
    os.unlink(repo / "f.txt")
    os.mkfifo(repo / "f.txt")
    undo = steer(repo, "undo", timeout=30)
    assert undo.returncode == 4 and "FIFO" in undo.stderr and "Traceback" not in undo.stderr


def test_read_only_files_need_the_flag(repo):
    os.chmod(repo / "f.txt", 0o444)
    with served() as server:
        out = steer(repo, *run_args(server, "--accept", "all"))
        assert out.returncode == 4 and "read-only" in out.stderr
        assert (repo / "f.txt").read_text() == SRC
        out = steer(repo, *run_args(server, "--accept", "all", "--allow-read-only"))
    assert out.returncode == 0, out.stderr
    assert (repo / "f.txt").read_text() == EXPECTED
    assert stat.S_IMODE((repo / "f.txt").stat().st_mode) == 0o444


def test_a_journal_that_cannot_be_written_means_nothing_is_written(repo):
    journal = repo / ".git" / "steer" / "journal"
    journal.mkdir(parents=True)
    try:
        immutable(journal, True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("chattr +i is not available here")
    try:
        with served() as server:
            out = steer(repo, *run_args(server, "--accept", "all"))
    finally:
        immutable(journal, False)
    assert out.returncode == 4 and "Traceback" not in out.stderr
    assert "nothing written" in out.stderr and clean(repo)


def test_undo_with_a_lost_journal_blob_says_so(repo):
    with served() as server:
        assert steer(repo, *run_args(server, "--accept", "all")).returncode == 0
    for blob in (repo / ".git" / "steer" / "journal" / "blobs").iterdir():
        blob.unlink()
    undo = steer(repo, "undo")
    assert undo.returncode == 4 and "Traceback" not in undo.stderr and "undo stopped" in undo.stderr
    assert (repo / "f.txt").read_text() == EXPECTED


def test_steer_serve_names_a_replay_file_it_cannot_read(tmp_path):
    out = steer(tmp_path, "serve", "--replay", str(tmp_path / "missing.txt"))
    assert out.returncode == 2
    assert "--replay" in out.stderr and "missing.txt: No such file or directory" in out.stderr
    assert "Traceback" not in out.stderr
