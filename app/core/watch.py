"""Working-tree changes as they happen (watchfiles), as workspace-relative paths."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import watchfiles

from app.core.repo import SKIP_DIRS


def _interesting(root: Path):
    def keep(_change: watchfiles.Change, path: str) -> bool:
        rel = Path(path).relative_to(root).parts if path.startswith(str(root)) else ()
        if any(p in SKIP_DIRS for p in rel):
            return False
        return not path.endswith(".steer-tmp")  # our own atomic-write temp files
    return keep


async def changes(root: Path, stop=None) -> AsyncIterator[set[str]]:
    """Batches of changed files (debounced by watchfiles), until `stop` is set."""
    async for batch in watchfiles.awatch(root, watch_filter=_interesting(root), debounce=50,
                                         step=20, stop_event=stop, recursive=True):
        yield {str(Path(p).relative_to(root)).replace("\\", "/") for _c, p in batch}
