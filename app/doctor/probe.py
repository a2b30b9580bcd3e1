"""The model check of `steer doctor`: load the GGUF and generate 8 tokens in a child process.

llama.cpp is native code: on a CPU its build does not suit, or with a broken build, it dies by
a signal (SIGILL, SIGSEGV, SIGABRT) instead of raising, and the OOM killer ends it with
SIGKILL. Run in the doctor's own process, that would take the doctor down with it, and the
user would learn nothing. So the child does the work (it is the only process that imports
llama_cpp), reports each step as a JSON line on its stdout, and runs with faulthandler on,
its stderr going to `doctor.log` in steer's state dir: when it dies, the parent knows the
signal from the exit status, the last step reached from the lines, and the llama.cpp function
on the stack from the dump (app/providers/serve_crash.py reads both, as for `steer serve`).

Run as `python -m app.doctor.probe MODEL_PATH` (the parent does that).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from app.core.disk.state_home import state_home
from app.providers import serve_crash

TIMEOUT = 180.0  # seconds; the 135M model loads and answers in about one
PROMPT = [{"role": "user", "content": "Write a Python function that adds two numbers."}]
# Exists for the test suite only (tests/test_doctor.py): the child kills itself with this
# signal (e.g. SEGV) right after the model loaded, the one real way to make a crash on demand.
TEST_SIGNAL = "STEER_DOCTOR_CHILD_SIGNAL"


def log_path() -> Path:
    return state_home() / "doctor.log"


def run(model_path: str, timeout: float = TIMEOUT) -> dict:
    """The facts of one model check, whatever became of the child; never raises for it."""
    log = log_path()
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # where the app package lives
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    facts: dict = {"path": model_path, "ok": False, "log": str(log)}
    try:
        log.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        err = open(log, "wb")
    except OSError as exc:  # steer serve could not write its log there either
        return {**facts, "error": f"cannot write {log}: {exc.strerror or exc}"}
    with err:
        try:
            done = subprocess.run([sys.executable, "-m", "app.doctor.probe", model_path],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                  env=env, timeout=timeout)
            out, code = done.stdout, done.returncode
        except subprocess.TimeoutExpired as exc:  # run() killed and reaped it
            out, code = exc.output or b"", None
    for line in out.decode("utf-8", "replace").splitlines():  # llama.cpp may print there too
        try:
            said = json.loads(line)
        except ValueError:
            continue
        facts.update(said if isinstance(said, dict) else {})
    stage = facts.get("stage", "starting")
    if code is None:
        facts["error"] = f"no answer within {timeout:g} s while {stage} (stopped)"
    elif code < 0:
        fault, where = serve_crash.read_fault(log)
        facts["signal"], facts["where"] = serve_crash.signal_name(code) or fault, where
        facts["error"] = crash_line(facts["signal"], where, stage, facts.get("llama_cpp"))
    elif code != 0:
        facts.setdefault("error", f"the check exited with code {code}: {last_line(log)}")
    elif not facts.get("tokens"):
        facts["error"] = "the model loaded but generated no token"
    else:
        facts["ok"] = True
    return facts


def crash_line(sig: str | None, where: str | None, stage: str, version: str | None) -> str:
    """The crash by name, where it happened, and what the user can do about it."""
    at = f" in llama.cpp: {where}" if where else ""
    pkg = f"llama-cpp-python{f'=={version}' if version else ''}"
    other = "or use another model with --provider/--base-url (see Models in the README)"
    if sig == "SIGILL":  # typically a wheel built on another CPU, reused from pip's cache
        why = ("llama.cpp was built for instructions this CPU lacks: rebuild it on this machine "
               f"(pip install --force-reinstall --no-cache-dir --no-deps '{pkg}'), {other}")
    elif sig == "SIGKILL":
        why = f"killed, likely out of memory: free memory or use a smaller GGUF (--model-path), {other}"
    else:
        why = f"pin another llama-cpp-python than {version or 'this one'} (pip install 'llama-cpp-python==X.Y.Z'), {other}"
    return f"the embedded model crashed ({sig or 'an unknown signal'}{at}) while {stage}; {why}"


def last_line(log: Path) -> str:
    try:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "(no output)"
    return lines[-1][:300] if lines else "(no output)"


# -- the child -----------------------------------------------------------------------------------
def _emit(**facts: object) -> None:
    sys.stdout.write(json.dumps(facts) + "\n")
    sys.stdout.flush()  # a crash right after must not lose the line


def child(model_path: str) -> int:
    import faulthandler

    faulthandler.enable(all_threads=True)  # a native crash leaves its stack in doctor.log
    _emit(stage="importing llama_cpp")
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
    _emit(llama_cpp=llama_cpp.__version__, system_info=info, stage="loading")
    try:
        with open(model_path, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        _emit(error=f"cannot read {model_path}: {exc.strerror or exc}")
        return 1
    if magic != b"GGUF":
        _emit(error=f"{model_path} is not a GGUF model (it does not start with 'GGUF')")
        return 1
    from app.providers.local import _chatml, load

    t0 = time.perf_counter()
    try:
        llm, fmt, _ = load(model_path)
    except Exception as exc:  # noqa: BLE001 - the message is the finding
        _emit(error=f"the model does not load: {exc}")
        return 1
    _emit(load_s=round(time.perf_counter() - t0, 3), stage="generating")
    sig = os.environ.get(TEST_SIGNAL)
    if sig:
        os.kill(os.getpid(), getattr(signal, "SIG" + sig.upper().removeprefix("SIG")))
    prompt = fmt(messages=PROMPT).prompt if fmt else _chatml(PROMPT)
    tokens: list[str] = []
    t0 = time.perf_counter()
    first = last = t0
    for chunk in llm.create_completion(prompt, max_tokens=8, stream=True, temperature=0.0,
                                       stop=["<|im_end|>", "<|endoftext|>"]):
        text = chunk["choices"][0].get("text") or ""
        if text:
            last = time.perf_counter()
            first = last if not tokens else first
            tokens.append(text)
    rate = (len(tokens) - 1) / (last - first) if len(tokens) > 1 and last > first else None
    _emit(tokens=tokens, first_token_s=round(first - t0, 3) if tokens else None,
          tokens_per_s=round(rate, 1) if rate else None, stage="done")
    return 0


if __name__ == "__main__":
    raise SystemExit(child(sys.argv[1]))
