"""`steer doctor` end to end: the real command in a subprocess, in a temp home (conftest's
XDG dirs), against the real embedded model, real loopback servers and a real closed port.
No key it is given may ever reach its output, even when a server echoes the key back."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.server.chat_server import ChatServer, ServerThread
from app.server.http import HttpRequest, HttpResponse

HERE = Path(__file__).resolve().parents[1]
KEY = "sk-doctor-5e1b7c90a4d2f386"


def doctor(*args: str, env: dict[str, str] | None = None,
           timeout: float = 240) -> subprocess.CompletedProcess:
    home = Path(os.environ["XDG_CONFIG_HOME"]).parent  # conftest's temp home
    full = {**os.environ, "HOME": str(home), "PYTHONPATH": str(HERE), **(env or {})}
    return subprocess.run([sys.executable, "-m", "app", "doctor", *args], capture_output=True,
                          text=True, env=full, timeout=timeout)


def report(*args: str, **kw) -> tuple[subprocess.CompletedProcess, dict]:
    done = doctor("--json", *args, **kw)
    return done, json.loads(done.stdout)


def write_config(text: str) -> Path:
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "steer" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def assert_no_key(done: subprocess.CompletedProcess, key: str = KEY) -> None:
    assert key not in done.stdout and key not in done.stderr
    assert key[3:] not in done.stdout + done.stderr  # not even in part


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.model
def test_doctor_passes_with_the_embedded_model():
    done, r = report()
    assert done.returncode == 0, done.stdout + done.stderr
    assert r["ok"] is True and r["failures"] == []
    for name in ("python", "steer", "textual", "rich", "llama-cpp-python", "websockets"):
        assert r["versions"][name], name
    model = r["model"]
    assert model["checked"] and model["ok"]
    assert 1 <= len(model["tokens"]) <= 8 and "".join(model["tokens"]).strip()
    assert model["load_s"] > 0 and model["first_token_s"] > 0
    assert model["llama_cpp"] == r["versions"]["llama-cpp-python"]
    assert "CPU :" in r["cpu"]["llama_system_info"]  # llama.cpp's own view, from the child
    assert r["cpu"]["build_not_cpu"] == []  # it ran: the build suits this CPU
    assert r["cpu"]["cores"] >= 1 and r["cpu"]["flags"]
    assert r["config"]["provider"] == "local" and r["config"]["model_path"] == model["path"]
    assert r["config"]["config_file_exists"] is False
    assert r["endpoint"]["checked"] is False


def test_the_text_report_is_one_screen_and_says_all_is_well():
    done = doctor("--skip-model")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "all checks passed"
    assert len(lines) <= 40  # one screen
    for label in ("versions", "cpu", "model", "config", "endpoint", "server"):
        assert any(line.startswith(label + " ") for line in lines), label
    assert "not checked: --skip-model" in done.stdout
    assert "serve.log" in done.stdout


def test_a_configured_endpoint_that_answers_passes_and_its_key_never_shows():
    with ServerThread(replay="hi", token=KEY, model_name="coder") as server:
        write_config(f'provider = "openai-chat"\nbase_url = "{server.base_url}"\n'
                     'model = "coder"\napi_key_env = "MY_GATEWAY_KEY"\n')
        done, r = report(env={"MY_GATEWAY_KEY": KEY})
        text = doctor(env={"MY_GATEWAY_KEY": KEY})
    for d in (done, text):
        assert d.returncode == 0, d.stdout + d.stderr
        assert_no_key(d)
    e = r["endpoint"]  # the server requires the key: a 200 means it was sent, as Bearer
    assert e["ok"] and e["status"] == 200 and e["models"] == 1 and e["model_listed"] is True
    assert e["url"] == server.base_url + "/models" and e["seconds"] < 10
    assert r["config"]["api_key_env"] == "MY_GATEWAY_KEY" and r["config"]["api_key_set"] is True
    assert r["model"]["checked"] is False  # the embedded model is not the one in use
    assert "API key: MY_GATEWAY_KEY = ***" in text.stdout
    assert f"GET {server.base_url}/models answered 200" in text.stdout


class EchoingServer(ChatServer):
    """Answers every request 401, echoing the key it was sent (as OpenAI does for a wrong key:
    "Incorrect API key provided: sk-...")."""

    async def handle(self, req: HttpRequest) -> HttpResponse:
        given = req.headers.get("authorization", "").removeprefix("Bearer ")
        return HttpResponse.json({"error": {"message": f"Incorrect API key provided: {given}. "
                                            "You can find your API key in your account.",
                                            "type": "invalid_request_error"}}, 401)


def test_a_server_that_echoes_the_key_gets_it_masked_and_the_check_fails():
    rig = ServerThread(replay="hi")
    rig.server = EchoingServer(replay="hi")  # the same loopback server, echoing
    with rig as server:
        # a variable whose name says nothing of a key: masked because the config names it
        write_config('api_key_env = "LAB_GATEWAY"\n')
        args = ("--provider", "openai-chat", "--base-url", server.base_url, "--model", "m")
        done, r = report(*args, env={"LAB_GATEWAY": KEY})
        text = doctor(*args, env={"LAB_GATEWAY": KEY})
    for d in (done, text):
        assert d.returncode == 1
        assert_no_key(d)
        assert "Incorrect API key provided: ***." in d.stdout  # the reason is kept, masked
    assert r["endpoint"]["status"] == 401 and not r["endpoint"]["ok"]
    assert r["config"]["api_key_env"] == "LAB_GATEWAY" and r["config"]["api_key_set"]
    last = text.stdout.splitlines()[-1].strip()
    assert last.startswith(f"endpoint: {server.base_url}/models answered 401")
    assert last.endswith("(the key was refused)")


def test_an_endpoint_that_refuses_the_connection_fails_with_one_clear_line():
    url = f"http://127.0.0.1:{free_port()}/v1"
    done = doctor("--base-url", url, "--model", "m")
    assert done.returncode == 1
    tail = done.stdout.splitlines()[-2:]
    assert tail[0] == "1 check(s) failed:"
    assert tail[1].startswith(f"  endpoint: cannot connect to {url}/models: ConnectError")
    assert "Connection refused" in tail[1]
    assert "Traceback" not in done.stdout + done.stderr


def test_a_model_path_that_is_not_a_gguf_fails_the_model_check_clearly(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_text("this is a text file, not a model\n")
    done = doctor("--model-path", str(bad))
    assert done.returncode == 1
    failed = [line for line in done.stdout.splitlines() if line.startswith("  model: ")]
    assert failed == [f"  model: {bad} is not a GGUF model (it does not start with 'GGUF') "
                      f"(details: {Path(os.environ['XDG_STATE_HOME']) / 'steer' / 'doctor.log'})"]
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.model
def test_a_model_check_killed_by_a_signal_is_named_with_a_way_forward():
    # STEER_DOCTOR_CHILD_SIGNAL (app/doctor/probe.py) makes the doctor's child SIGSEGV itself
    # right after loading the model: a real death by signal, of a real process
    env = {"STEER_DOCTOR_CHILD_SIGNAL": "SEGV"}
    done, r = report(env=env)
    assert done.returncode == 1
    m = r["model"]
    assert m["signal"] == "SIGSEGV" and m["stage"] == "generating" and not m["ok"]
    assert m["load_s"] > 0  # it loaded, then died
    log = Path(m["log"]).read_text()
    assert "Fatal Python error: Segmentation fault" in log  # the child ran with faulthandler
    text = doctor(env=env)
    assert text.returncode == 1
    line = text.stdout.splitlines()[-1]
    assert "model: the embedded model crashed (SIGSEGV) while generating" in line
    assert "--provider/--base-url" in line and "pin another llama-cpp-python" in line
    assert "Traceback" not in text.stdout + text.stderr


def test_a_broken_config_file_is_one_failure_and_the_rest_is_still_checked():
    write_config('provider = "local"\nstall_timeout = "soon"\n')
    done, r = report("--skip-model")
    assert done.returncode == 1
    assert len(r["failures"]) == 1 and r["failures"][0].startswith("config: invalid configuration")
    assert r["versions"]["textual"] and r["cpu"]["cores"]


@pytest.mark.model
def test_a_running_embedded_server_is_shown_with_its_rss(tmp_path):
    state = Path(os.environ["XDG_STATE_HOME"]) / "steer"
    state.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    with open(state / "serve.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--port", "0",
                                 "--idle-exit", "120"], stdout=subprocess.DEVNULL, stderr=log,
                                env=env)
    try:
        deadline = time.monotonic() + 60
        while "servers" not in (json.loads((state / "serve.json").read_text())
                                if (state / "serve.json").exists() else {}):
            assert time.monotonic() < deadline and proc.poll() is None, "steer serve never registered"
            time.sleep(0.1)
        token = json.loads((state / "serve.json").read_text())["token"]
        done, r = report("--skip-model")
        text = doctor("--skip-model")
    finally:
        proc.terminate()
        proc.wait(10)
    assert done.returncode == 0, done.stdout
    [server] = r["server"]["running"]
    assert server["pid"] == proc.pid and server["alive"] and server["answers"]
    assert server["rss_bytes"] > 10 * 2**20  # a loaded model
    assert r["server"]["log"] == str(state / "serve.log") and r["server"]["log_bytes"] > 0
    assert f"steer serve pid {proc.pid} on {server['address']}: " in text.stdout
    assert_no_key(done, token)
    assert_no_key(text, token)


def test_a_build_feature_the_cpu_lacks_is_named():
    from app.doctor.checks import build_not_cpu

    info = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | AVX512 = 1 "
            "| AVX512_VNNI = 0 | LLAMAFILE = 1 | OPENMP = 1 |")  # llama_print_system_info()
    cpu = {"sse3", "ssse3", "avx", "avx2", "f16c", "fma"}  # /proc/cpuinfo of a CPU without AVX-512
    assert build_not_cpu(info, cpu) == ["AVX512"]
    assert build_not_cpu(info, cpu | {"avx512f"}) == []
    assert build_not_cpu(info, set()) == []  # no /proc/cpuinfo: nothing is claimed


def test_steer_help_names_the_doctor():
    done = subprocess.run([sys.executable, "-m", "app", "--help"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(HERE)}, timeout=60)
    assert done.returncode == 0 and "doctor" in done.stdout
    usage = doctor("--help")
    assert usage.returncode == 0 and "--skip-model" in usage.stdout and "--json" in usage.stdout
    assert "--base-url" in usage.stdout  # the provider flags of the other sub-commands
