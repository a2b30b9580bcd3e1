"""Garbage collection around an answer.

A full (generation 2) collection walks every object of the app: 30-60 ms here, which
lands in whatever frame is being drawn and was the largest part of the slowest frames
while a fast answer streamed. While an answer streams only the young generations are
collected (they are cheap: the answer's own short-lived objects); once it ends and the
screen has settled, one full collection runs and what survives is frozen out of later
scans (start-up objects are frozen the same way). When the app closes, both are undone:
a process that goes on after it (tests, benchmarks) would otherwise never collect full
generations again, nor anything the app froze.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

YOUNG_ONLY = 1_000_000  # generation 2 is collected after this many generation-1 collections


class AnswerGC:
    def __init__(self) -> None:
        self._saved: tuple[int, int, int] | None = None

    @property
    def deferring(self) -> bool:
        return self._saved is not None

    def streaming(self) -> None:
        """An answer starts: no full collections until it is over."""
        if self._saved is None:
            self._saved = gc.get_threshold()
            gc.set_threshold(self._saved[0], self._saved[1], YOUNG_ONLY)

    def settled(self, streaming: Callable[[], bool] | None = None) -> None:
        """The answer is over and on screen: collect fully once, then freeze the survivors
        (unless `streaming` says another answer started meanwhile)."""
        if streaming is not None and streaming():
            return
        if self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None
            gc.unfreeze()
            gc.collect()
            gc.freeze()

    def release(self) -> None:
        """The app is closing: full collections again, and what it froze collectable (the
        app's own objects among them, once it is let go)."""
        if self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None
        gc.unfreeze()
