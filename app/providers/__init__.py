"""Back-ends, one module each, behind one streaming interface (see base.Provider)."""

import sys
from types import ModuleType

# httpx imports its command-line client (click, and rich's console, progress and syntax,
# which bring pygments) whenever it is imported, for `httpx.main`, which steer never calls:
# about 0.15 s of every launch. An empty module in its place makes that import fail, and
# httpx then defines the `main` it keeps for a missing CLI (httpx/__init__.py's fallback).
sys.modules.setdefault("httpx._main", ModuleType("httpx._main"))
