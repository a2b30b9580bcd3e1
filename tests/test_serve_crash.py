"""Reading what killed `steer serve` (app/providers/serve_crash.py): the signal, from the exit
status of a server we reaped or from faulthandler's dump in its log, and the llama.cpp
function it died in; the line the user reads, also appended to the log."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from app.providers import serve_crash

DUMP = """steer serve: pid 4242 serving /m.gguf with llama-cpp-python 0.3.36, 352 MB resident
Fatal Python error: Segmentation fault

Thread 0x00007f4bcea6d6c0 (most recent call first):
  File "/v/lib/python3.11/site-packages/llama_cpp/llama_cpp.py", line 1912 in llama_decode
  File "/v/lib/python3.11/site-packages/llama_cpp/_internals.py", line 312 in decode
  File "/v/lib/python3.11/site-packages/llama_cpp/llama.py", line 640 in eval
  File "/work/app/providers/local.py", line 171 in work

Current thread 0x00007f4c00eb2b80 (most recent call first):
  File "/usr/lib/python3.11/asyncio/base_events.py", line 1922 in _run_once
"""


def test_the_signal_and_the_llama_function_are_read_from_the_dump(tmp_path):
    log = tmp_path / "serve.log"
    log.write_text("an earlier server's Fatal Python error: Aborted\n" + DUMP)
    offset = len("an earlier server's Fatal Python error: Aborted\n")
    assert serve_crash.read_fault(log, offset) == ("SIGSEGV", "llama_decode")
    line = serve_crash.diagnose(4242, log, offset)
    assert line.startswith("the embedded model crashed (SIGSEGV in llama.cpp: llama_decode); "
                           f"see {log}; use --provider or --base-url")
    assert log.read_text().endswith("the embedded model crashed (SIGSEGV in llama.cpp: "
                                    "llama_decode)\n")


def test_no_dump_and_no_status_says_so_plainly(tmp_path):
    log = tmp_path / "serve.log"
    log.write_text("steer serve: listening\n")
    assert serve_crash.read_fault(log) == (None, None)
    assert serve_crash.diagnose(99999999, log).startswith(
        "the embedded model's server ended without a word; see ")


def test_a_reaped_child_is_known_by_its_exit_status_and_is_never_a_zombie(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    serve_crash.adopt(proc)
    assert serve_crash.wait_gone(proc.pid, 10)
    assert serve_crash.signal_name(serve_crash._exits[proc.pid]) == "SIGKILL"
    line = serve_crash.diagnose(proc.pid, tmp_path / "serve.log")
    assert "killed (SIGKILL: the system may have run out of memory)" in line
    assert not os.path.exists(f"/proc/{proc.pid}"), "reaped: no zombie left"


def test_alive_counts_a_zombie_as_dead():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])  # not reaped: a zombie once done
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(f"/proc/{proc.pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.01)
    assert not serve_crash.alive(proc.pid)
    proc.wait()
