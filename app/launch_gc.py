"""No cyclic garbage collection while steer starts.

A launch builds ~110,000 objects that all live on (modules, classes, settings, widgets), and
the collector, triggered by the allocations, walks them again and again to find no garbage:
about 0.25 s of a launch here, a quarter of `steer run`'s time to its request. So `begin`
turns it off first thing, and `launched` turns it back on once the start-up is over (steer
run's request built, the app's screen mounted), freezing what start-up built out of every
later collection. Reference counting frees everything else meanwhile, as always.
"""

from __future__ import annotations

import gc


def begin() -> None:
    gc.disable()


def launched() -> None:
    """Start-up is over (idempotent; a no-op when `begin` did not run)."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()
