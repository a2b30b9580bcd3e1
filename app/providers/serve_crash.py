"""What became of a `steer serve` that went away, said in one line the user can act on.

The embedded model runs inside `steer serve`, so a native fault in llama.cpp (a SIGSEGV on
a CPU its build does not suit, an abort, the kernel's OOM killer) kills the server, and its
clients see only a socket closed without a close frame (1006). This module turns that into
"the embedded model crashed (SIGSEGV in llama.cpp: llama_decode); see …/serve.log; …":

- the server runs with faulthandler on (app/server/chat_server.py), so its log holds
  "Fatal Python error: Segmentation fault" and every thread's Python stack at the crash;
- the process that started the server reaps it (a thread waits on it: no zombie) and so
  knows its exit status exactly; any other client reads the signal from the log;
- the line the client reads is appended to the log too, with the exit status.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

from app.core.disk.processes import pid_alive

# what faulthandler prints for each fatal signal it catches
FAULTS = {"Segmentation fault": "SIGSEGV", "Aborted": "SIGABRT", "Bus error": "SIGBUS",
          "Floating point exception": "SIGFPE", "Illegal instruction": "SIGILL"}
_FATAL = re.compile(r"Fatal Python error: (" + "|".join(FAULTS) + ")")
_FRAME = re.compile(r'File "([^"]*)", line \d+ in (\S+)')
HINT = "use --provider or --base-url for another model (`steer doctor` checks this machine)"

_exits: dict[int, int] = {}  # pid -> returncode of the servers this process started and reaped
_children: dict[int, subprocess.Popen] = {}
_reapers: dict[int, threading.Thread] = {}


def adopt(proc: subprocess.Popen) -> None:
    """Reap a server this process started as soon as it exits (so it never lingers as a
    zombie while we run) and keep its exit status for the diagnosis."""
    _children[proc.pid] = proc

    def reap() -> None:
        _exits[proc.pid] = proc.wait()
        _children.pop(proc.pid, None)
        _reapers.pop(proc.pid, None)  # after the status is noted: wait_gone needs no join then

    reaper = _reapers[proc.pid] = threading.Thread(target=reap, name=f"steer-reap-{proc.pid}",
                                                   daemon=True)
    reaper.start()


def alive(pid: int) -> bool:
    """The process runs (a zombie, dead but not yet reaped, does not count)."""
    return pid not in _exits and pid_alive(pid)


def wait_gone(pid: int, timeout: float) -> bool:
    """True when the process is gone within `timeout` seconds. A server whose socket just
    closed is usually still tearing down (its fds close before it is marked dead)."""
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    reaper = _reapers.get(pid)
    if reaper is not None:  # reaped: /proc forgets the pid before the thread notes its status
        reaper.join(max(0.0, deadline - time.monotonic()))
    return True


def signal_name(returncode: int | None) -> str | None:
    if returncode is None or returncode >= 0:
        return None
    with contextlib.suppress(ValueError):
        return signal.Signals(-returncode).name
    return f"signal {-returncode}"


def read_fault(log: Path, offset: int = 0) -> tuple[str | None, str | None]:
    """(signal name, the innermost llama.cpp function on any thread's stack) from the
    faulthandler dump in the log after `offset`; (None, None) when there is none."""
    try:
        with open(log, "rb") as f:
            f.seek(offset)
            text = f.read(1 << 20).decode("utf-8", "replace")
    except OSError:
        return None, None
    m = _FATAL.search(text)
    if m is None:
        return None, None
    where = None
    for path, func in _FRAME.findall(text[m.end():]):  # most recent call first, per thread
        if "llama_cpp" in path.replace("\\", "/").split("/"):
            where = func
            break
    return FAULTS[m.group(1)], where


def diagnose(pid: int, log: Path, offset: int = 0) -> str:
    """The line to show for a server that is gone, and the same line appended to its log."""
    fault, where = read_fault(log, offset)
    sig = signal_name(_exits.get(pid)) or fault
    if sig in FAULTS.values():
        what = f"the embedded model crashed ({sig}{f' in llama.cpp: {where}' if where else ''})"
    elif sig == "SIGKILL":
        what = ("the embedded model's server was killed (SIGKILL: the system may have run out "
                "of memory)")
    elif sig is not None:
        what = f"the embedded model's server ended on {sig}"
    elif pid in _exits:
        what = f"the embedded model's server exited with code {_exits[pid]}"
    else:
        what = "the embedded model's server ended without a word"
    line = f"{what}; see {log}; {HINT}"
    with contextlib.suppress(OSError), open(log, "a", encoding="utf-8") as f:
        code = _exits.get(pid)
        status = f"exit status {code}" if code is not None else "exit status unknown"
        f.write(f"steer: server pid {pid} is gone ({status}{f', {sig}' if sig else ''}): "
                f"{what}\n")
    return line
