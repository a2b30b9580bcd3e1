"""The project's own rules, in every request: AGENTS.md and its kin.

Most agents read a file of instructions the project keeps for them (AGENTS.md; Claude Code's
CLAUDE.md, Gemini's GEMINI.md, aider's CONVENTIONS.md). steer reads, in this order:
- the user's own file in the config folder (`personal`), which applies everywhere;
- the project's at the repository root;
- those in the folders between the root and each file the request shows, nearer ones later:
  where two disagree, the one nearest the file wins (as Codex reads nested AGENTS.md).

In each folder AGENTS.md is read; only when a folder has none, the first of the others it has.
Every file goes through the workspace like any other (a symlink out of it, a FIFO, a binary
or huge file is left out and named in `skipped`), and each is cut to `PER_FILE` characters.

The rules go to the model as one item of the conversation (context.py): the same bytes while
they are unchanged, so a cached prefix stays valid, and a new item appended when they change.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from app.core.disk.workspace import Workspace
from app.core.text.textfile import MAX_BYTES, NotText, decode

NAMES = ("AGENTS.md", "CLAUDE.md", "GEMINI.md", "CONVENTIONS.md")
PER_FILE = 24_000  # characters of one file; a rules file longer than this is cut, and says so
GONE = ("(The project's rules files given earlier in this conversation are gone now: "
        "they no longer apply.)")


@dataclass
class Rules:
    sources: list[str] = field(default_factory=list)  # as the context line names them
    item: str = ""  # the conversation item ("" when there are none)
    skipped: list[str] = field(default_factory=list)  # "NAME: why" of those left out


@dataclass
class ProjectRules:
    """Where a session's rules come from (`personal`: the user's own file, if any)."""

    ws: Workspace
    personal: Path | None = None

    def read(self, paths: Iterable[str] = ()) -> Rules:
        """The rules for a request showing the files `paths` (workspace-relative)."""
        out = Rules()
        parts: list[str] = []
        if self.personal is not None:
            text = _read_personal(self.personal, out)
            if text is not None:
                out.sources.append(_tilde(self.personal))
                parts.append(_section("your own rules (" + out.sources[-1] + ")", text))
        for folder in _folders(paths):
            for name in NAMES:
                rel = f"{folder}/{name}" if folder else name
                text = self._read(rel, out)
                if text is not None:
                    out.sources.append(rel)
                    where = "the whole project" if not folder else f"files under {folder}/"
                    parts.append(_section(f"{rel} (for {where})", text))
                    break
        if parts:
            out.item = ("The project's rules for this work. Follow them. Where two disagree, "
                        "the one for the folder nearest the file wins.\n\n" + "\n\n".join(parts))
        return out

    def sources(self, paths: Iterable[str] = ()) -> list[str]:
        """The files `read` would take, by their names alone (a stat each, no read: the
        context line asks at every keystroke)."""
        found = [_tilde(self.personal)] if self.personal is not None and self.personal.is_file() else []
        for folder in _folders(paths):
            for name in NAMES:
                rel = f"{folder}/{name}" if folder else name
                if self.ws.has_file(rel):
                    found.append(rel)
                    break
        return found

    def _read(self, rel: str, out: Rules) -> str | None:
        try:
            if not self.ws.abspath(rel).exists() and not self.ws.abspath(rel).is_symlink():
                return None
            snap = self.ws.snapshot(self.ws.check_path(rel))
        except (NotText, ValueError, OSError) as exc:
            out.skipped.append(f"{rel}: {exc}")
            return None
        return "\n".join(snap.lines) if snap.exists else None


def _folders(paths: Iterable[str]) -> list[str]:
    """The root, then each folder between it and a file of `paths`, outer ones first."""
    seen: dict[str, None] = {"": None}
    for path in paths:
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            seen.setdefault("/".join(parts[:i]), None)
    return sorted(seen, key=lambda f: (f.count("/") + bool(f), f))


def _read_personal(path: Path, out: Rules) -> str | None:
    try:
        if not path.is_file():  # also: not a FIFO (it would block the read)
            return None
        with open(path, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)  # decode says "too large" past it
        lines, _fmt = decode(data, path.name)
    except (NotText, OSError) as exc:
        out.skipped.append(f"{path}: {exc}")
        return None
    return "\n".join(lines)


def _section(title: str, text: str) -> str:
    text = text.strip("\n")
    if len(text) > PER_FILE:
        text = text[:PER_FILE] + f"\n(cut here: {len(text) - PER_FILE:,} more characters)"
    return f"## {title}\n\n{text}"


def _tilde(path: Path) -> str:
    home = os.path.expanduser("~")
    text = str(path)
    return "~" + text[len(home):] if home != "/" and text.startswith(home + os.sep) else text
