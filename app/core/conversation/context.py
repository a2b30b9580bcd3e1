"""The files a conversation shows the model: which ones, each whole or as its outline, and
what each costs in tokens (app/core/conversation/context_budget.py estimates it).

The session (app/core/conversation/session.py) holds one ContextFiles: the UI adds and
removes files, a first question snapshots them into its message, and the status line asks
what they cost before anything is sent.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from app.core.conversation import context_budget as budgets
from app.core.disk.snapshot import Snapshot
from app.core.disk.workspace import Workspace
from app.core.text.textfile import NotText


class ContextError(ValueError):
    """A file asked for as context cannot be used (outside the workspace, binary...)."""


class ContextFiles:
    """The context files of one session, in the order they were added."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.paths: list[str] = []
        self.outlined: set[str] = set()  # sent as their outline only
        self._outline_tokens: dict[tuple[str, int, int], int] = {}  # (path, mtime, size)

    def add(self, raw: str, *, outline: bool = False) -> str:
        """A file for the model to see: whole, or (`outline`) only its definitions."""
        try:
            rel = self.ws.check_path(raw)
        except ValueError as exc:
            raise ContextError(str(exc)) from None
        if not self.ws.abspath(rel).is_file():
            raise ContextError(f"{rel}: no such file")
        if outline:
            self.outlined.add(rel)
        else:
            self.outlined.discard(rel)
        if rel not in self.paths:
            self.paths.append(rel)
        return rel

    def remove(self, rel: str) -> None:
        if rel in self.paths:
            self.paths.remove(rel)
        self.outlined.discard(rel)

    def tokens(self, rel: str, *, outline: bool | None = None) -> int:
        """Estimated tokens of a context file as it would be sent (a stat, or the outline
        read once per version of the file)."""
        outline = rel in self.outlined if outline is None else outline
        try:
            st = self.ws.abspath(rel).stat()
        except OSError:
            return 0
        if not outline:
            return int(st.st_size / budgets.CHARS_PER_TOKEN) + 8
        key = (rel, st.st_mtime_ns, st.st_size)
        if key not in self._outline_tokens:
            try:
                lines = budgets.outline(self.ws.snapshot(rel))
            except (NotText, OSError):
                lines = []
            self._outline_tokens[key] = budgets.estimate_tokens("\n".join(lines)) + 16
        return self._outline_tokens[key]

    def budget(self, sent: Iterable[str], window: int | None, *, files: bool) -> budgets.Budget:
        """The next request's size against the model's context `window`: the texts it sends
        and, with `files`, the context files as they would be sent."""
        tokens = {rel: self.tokens(rel) for rel in self.paths}
        used = sum(budgets.estimate_tokens(t) for t in sent)
        return budgets.Budget(used + (sum(tokens.values()) if files else 0), window, tokens)

    def snapshots(self) -> list[Snapshot]:
        """Every context file as it is now (the bases of a new change set)."""
        snaps = []
        for rel in self.paths:
            try:
                snaps.append(self.ws.snapshot(rel).prepare())
            except NotText as exc:
                raise ContextError(str(exc)) from None
        return snaps

    def now(self, paths: Iterable[str]) -> list[Snapshot]:
        """Other files the model is shown (a retry of the edits it could not apply): those
        of `paths` that exist and read as text, as they are now."""
        snaps = []
        for path in dict.fromkeys(paths):
            with contextlib.suppress(ValueError, NotText, OSError):
                snap = self.ws.snapshot(self.ws.check_path(path))
                if snap.exists:
                    snaps.append(snap)
        return snaps

    def outlines(self, snapshots: list[Snapshot]) -> dict[str, list[str]]:
        """The outlines of the outlined files among `snapshots` (what the model gets of them)."""
        return {s.path: budgets.outline(s) for s in snapshots if s.path in self.outlined}
