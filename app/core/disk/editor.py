"""The user's own editor ($VISUAL, else $EDITOR) on a piece of text: a hunk's proposed lines
to change before accepting them, or any text a front-end wants edited by hand.

The text goes to a temporary file named like the file it comes from (so the editor picks its
syntax), the editor runs on it with the terminal it inherits, and what the user saved is read
back; the temporary file is removed whatever happens. It blocks until the editor exits: a
front-end calls `edit` (a thread, off its event loop) with its terminal handed over.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import subprocess
import tempfile
from pathlib import Path


def editor_command() -> str | None:
    """The editor the user asked for, as a command line; None when neither is set."""
    return os.environ.get("VISUAL") or os.environ.get("EDITOR") or None


def edit_text(text: str, command: str, *, suffix: str = "") -> str:
    """Run `command` (a shell-like command line: `code --wait`, `vim`) on a temporary file
    holding `text`; returns the file's text when the editor exits (blocking)."""
    with tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False) as tmp:
        tmp.write(text)
    try:
        subprocess.run([*shlex.split(command), tmp.name], check=False)
        return Path(tmp.name).read_text()
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp.name)


async def edit(text: str, command: str, *, suffix: str = "") -> str:
    """`edit_text` in a thread: the caller's event loop keeps running meanwhile."""
    return await asyncio.to_thread(edit_text, text, command, suffix=suffix)


async def edit_lines(lines: list[str], command: str, *, path: str = "") -> list[str]:
    """Lines (a hunk's new side) through the editor, off the event loop; the newline the
    file ends with is no line of its own. `path`: the file they come from (its suffix)."""
    text = await edit("\n".join(lines) + "\n", command, suffix=Path(path).suffix)
    out = text.split("\n")
    if out and out[-1] == "":
        out.pop()
    return out
