"""The look-ups as tools a model calls: their specs (name, description, JSON-schema
parameters: neutral, each back-end wraps them in its wire format), the call's arguments read
leniently, the answer from lookup.py, and the one-line card the conversation shows.

A model's arguments are untrusted text: a call that is not JSON, names no path, or names a
tool that does not exist gets an answer saying so (the model can try again), never an
exception. Paths and patterns then go through lookup.py's rules (nothing outside the root,
no ignored or secret-looking file unless the user added it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from app.core.knowledge.lookup import Answer, Deadline, Lookup
from app.core.knowledge.render import estimate_tokens

SPECS: list[dict[str, Any]] = [
    {"name": "read",
     "description": "Read a text file of the repository (or some of its lines), as it is on "
                    "disk now. Lines come numbered. Read-only: edits are still written in the "
                    "edit format.",
     "parameters": {"type": "object", "properties": {
         "path": {"type": "string", "description": "the file, relative to the repository root"},
         "start": {"type": "integer", "description": "first line (1-based); default 1"},
         "end": {"type": "integer", "description": "last line (inclusive); default: the end"}},
         "required": ["path"], "additionalProperties": False}},
    {"name": "grep",
     "description": "Search the repository's files for a regular expression (Python syntax); "
                    "returns path:line: text for each matching line.",
     "parameters": {"type": "object", "properties": {
         "pattern": {"type": "string", "description": "the regular expression"},
         "glob": {"type": "string", "description": "only files matching this, e.g. *.py or src/*"}},
         "required": ["pattern"], "additionalProperties": False}},
    {"name": "list",
     "description": "List the files and folders directly in a folder of the repository.",
     "parameters": {"type": "object", "properties": {
         "path": {"type": "string", "description": "the folder, relative to the root; "
                                                   "empty for the root"}},
         "required": [], "additionalProperties": False}},
]
NAMES = frozenset(s["name"] for s in SPECS)


@dataclass(frozen=True)
class Done:
    """One look-up answered: what the model reads, and the card the user sees."""

    text: str
    tokens: int
    card: str
    ok: bool


def tok(n: int) -> str:
    return f"{n / 1000:.1f}k tok" if n >= 1000 else f"{n} tok"


def _args(raw: str) -> dict[str, Any] | str:
    """The call's arguments as a dict, or why not (a model may send "", or broken JSON)."""
    if not raw.strip():
        return {}
    try:
        obj = json.loads(raw)
    except ValueError:
        return f"the arguments are not valid JSON: {raw[:120]!r}"
    return obj if isinstance(obj, dict) else f"the arguments must be a JSON object, not {raw[:60]!r}"


def _int(v: object) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().isdigit():
        return int(v)
    return None


def run(lookup: Lookup, name: str, raw: str, *, user_added: Collection[str] = (),
        deadline: Deadline | None = None) -> Done:
    """Answer one call (blocking: disk and git; a caller on an event loop runs it in a
    thread). A grep stops at `deadline` (a read or a list is bounded by its limits)."""
    args = _args(raw)
    if isinstance(args, str):
        return _failed(name, args)
    if name == "read":
        path = args.get("path")
        if not isinstance(path, str) or not path.strip():
            return _failed(name, "read needs a path")
        start, end = _int(args.get("start")), _int(args.get("end"))
        ans = lookup.read(path, start, end, user_added=_added(lookup, path, user_added))
        what = ans.path or path
        if ans.ok and ans.lines:
            last = ans.first_line + len(ans.lines) - 1
            what += f" {ans.first_line}–{last}"
        return _done("read", what, ans)
    if name == "grep":
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            return _failed(name, "grep needs a pattern")
        glob = args.get("glob") if isinstance(args.get("glob"), str) else None
        ans = lookup.grep(pattern, glob or None, user_added=user_added, deadline=deadline)
        where = f" in {glob}" if glob else ""
        count = "" if ans.timed_out else f" · {len(ans.matches)} matches"
        return _done("grep", f"{pattern!r}{where}{count}", ans)
    if name == "list":
        folder = args.get("path", "")
        if not isinstance(folder, str):
            return _failed(name, "list takes a folder path")
        ans = lookup.list(folder)
        shown = (ans.path + "/" if ans.path else "/") if ans.ok else (folder or "/")
        return _done("list", f"{shown} · {len(ans.entries)} entries", ans)
    return _failed(name, f"there is no tool {name!r}; the tools are {', '.join(sorted(NAMES))}")


def _added(lookup: Lookup, path: str, user_added: Collection[str]) -> bool:
    try:
        return lookup.ws.check_path(path) in user_added
    except ValueError:
        return False


def _cut(what: str) -> str:
    """A path or a pattern on a card: one of thousands of characters would hide the rest."""
    return what if len(what) <= 100 else what[:99] + "…"


def _line(card: str) -> str:
    """A card is one line, whatever a model put in a path (the screen's boundary shows the
    rest of what it holds: app/view/outside_text.py)."""
    return " ".join(card.split())[:200]


def _done(verb: str, what: str, ans: Answer) -> Done:
    if ans.timed_out:  # "timed out after 5 s, with 40 of 900 files searched"
        first = re.split(r"\.(?:\s|$)", ans.reason or "timed out")[0]
        return Done(ans.text, ans.tokens, _line(f"{verb} {_cut(what)} · {first}"), False)
    if not ans.ok:
        reason = ans.reason or ""
        reason = re.split(r"\.(?:\s|$)", reason.split(": ", 1)[-1])[0]  # its first clause
        return Done(ans.text, ans.tokens,
                    _line(f"{verb} {_cut(ans.path or what)} · refused: {reason}"), False)
    cut = " (cut)" if ans.truncated else ""
    return Done(ans.text, ans.tokens, _line(f"{verb} {what}{cut} · {tok(ans.tokens)}"), True)


def timed_out(name: str, seconds: float) -> Done:
    """The answer for a look-up that was still running when its time was up."""
    text = (f"timed out after {seconds:g} s. Narrow the pattern or the path, or read fewer "
            "lines.")
    return Done(text, estimate_tokens(text), _line(f"{name or '?'} · timed out after "
                                                   f"{seconds:g} s"), False)


def failed(name: str, exc: BaseException) -> Done:
    """The answer for a look-up that broke: the model is told, and the turn goes on."""
    return _failed(name, f"the look-up failed ({type(exc).__name__}: {exc})")


def _failed(name: str, why: str) -> Done:
    text = f"{why}."
    return Done(text, estimate_tokens(text), _line(f"{name or '?'} · refused: {why}"), False)
