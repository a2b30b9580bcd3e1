"""Where steer keeps, per user, what is not the user's files: `$XDG_STATE_HOME/steer`, else
`~/.local/state/steer`. The journal of a workspace outside git (app/core/disk/workspace.py),
the saved sessions (app/core/conversation/store.py), `steer serve`'s registry and log
(app/providers/serve_registry.py), `steer doctor`'s log and the UI's remembered choices live
under it; nothing is ever written into the working tree."""

from __future__ import annotations

import os
from pathlib import Path


def state_home() -> Path:
    """steer's directory in the user's state dir (read from the environment at each call:
    tests and benchmarks move it)."""
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "steer"
