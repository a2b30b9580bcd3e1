"""Stop points for crash tests. A test sets STEER_STOP_AT to labels (comma-separated) in the
environment of a steer process; when that process first reaches one of them it stops itself
with SIGSTOP, so the test can write a file at exactly that moment or SIGKILL it there: a real
race and a real kill at a chosen instruction, not a mock. Unset (always, outside tests),
a stop point costs one set lookup.

STEER_NO_EXCHANGE=1 makes a steer process write as it does where renameat2's exchange is
not supported (check, then rename): the fallback's races are tested on any Linux, the same
switch `steer bench cas` turns (Workspace.exchange)."""

from __future__ import annotations

import os
import signal

_STOPS = set(filter(None, os.environ.get("STEER_STOP_AT", "").split(",")))


def stop_point(label: str) -> None:
    if label in _STOPS:
        _STOPS.discard(label)  # once: a retry of the same step runs on
        os.kill(os.getpid(), signal.SIGSTOP)


def exchange_off() -> bool:
    return os.environ.get("STEER_NO_EXCHANGE", "") not in ("", "0")
