"""Plain-text views of a pending diff: the unified diff `steer run` prints (names as git writes
them, so that `git apply` takes it byte for byte)."""

from __future__ import annotations

import os
import re

from app.core.edits.diff import PendingDiff
from app.core.edits.file_diff import FileDiff
from app.core.edits.hunks import Hunk


def _groups(hunks: list[Hunk], n_base: int, context: int) -> list[list[Hunk]]:
    groups: list[list[Hunk]] = []
    for h in hunks:
        if groups and h.base_start - groups[-1][-1].base_end <= 2 * context:
            groups[-1].append(h)
        else:
            groups.append([h])
    return groups


# the bytes git quotes in a name (quote_c_style): controls, DEL, '"', '\\', and (once it
# quotes) every byte past ASCII, in octal
_C_ESCAPES = {7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r",
              34: '\\"', 92: "\\\\"}
_QUOTE = re.compile("[\x00-\x1f\x7f\"\\\\\ud800-\udfff]")


def git_name(prefix: str, path: str) -> str:
    """`prefix` + `path` as git writes it in a diff header, so that `git apply` finds the
    exact bytes: a plain (or UTF-8) name as it is; one with a control character, a quote, a
    backslash or bytes that are not UTF-8 (held as surrogates) quoted C-style."""
    name = prefix + path
    if not _QUOTE.search(name):
        return name
    out = []
    for byte in os.fsencode(name):
        out.append(_C_ESCAPES.get(byte) or (chr(byte) if 0x20 <= byte < 0x7f else f"\\{byte:03o}"))
    return '"' + "".join(out) + '"'


def unified_file(fd: FileDiff, context: int = 3, hunks: list[Hunk] | None = None) -> str:
    hunks = fd.hunks if hunks is None else hunks
    if not hunks and not fd.move_to:
        return ""
    base = fd.base.lines
    a = "/dev/null" if fd.created else git_name("a/", fd.path)
    target = fd.move_to or fd.path
    b = "/dev/null" if fd.deleted else git_name("b/", target)
    out = [f"diff --git {git_name('a/', fd.path)} {git_name('b/', target)}"]
    if fd.created:
        out.append("new file mode 100644")
    elif fd.deleted:
        out.append(f"deleted file mode 100{fd.base.mode or 0o644:o}")
    if fd.move_to:
        out += [f"rename from {git_name('', fd.path)}", f"rename to {git_name('', fd.move_to)}"]
    if hunks:
        out += [f"--- {a}", f"+++ {b}"]
    shift = 0  # new-side line offset from earlier hunks
    for group in _groups(hunks, len(base), context):
        lo = max(0, group[0].base_start - context)
        hi = min(len(base), group[-1].base_end + context)
        body: list[str] = []
        pos = lo
        group_shift = 0
        for h in group:
            body += [" " + t for t in base[pos : h.base_start]]
            body += ["-" + t for t in h.old]
            body += ["+" + t for t in h.new]
            group_shift += len(h.new) - len(h.old)
            pos = h.base_end
        body += [" " + t for t in base[pos:hi]]
        old_len = hi - lo
        new_len = old_len + group_shift
        old_start = lo + 1 if old_len else lo
        new_start = lo + shift + 1 if new_len else lo + shift
        if hi == len(base) and base and not fd.base.fmt.final_newline:
            _mark_no_newline(body)
        out.append(f"@@ -{_range(old_start, old_len)} +{_range(new_start, new_len)} @@")
        out += body
        shift += group_shift
    return "\n".join(out) + "\n"


def _mark_no_newline(body: list[str]) -> None:
    """git's marker after the last line of each side when the file has no final newline."""
    old_last = max((i for i, r in enumerate(body) if r[0] in " -"), default=None)
    new_last = max((i for i, r in enumerate(body) if r[0] in " +"), default=None)
    for i in sorted({x for x in (old_last, new_last) if x is not None}, reverse=True):
        body.insert(i + 1, "\\ No newline at end of file")


def _range(start: int, length: int) -> str:
    return f"{start}" if length == 1 else f"{start},{length}"


def unified(pending: PendingDiff, context: int = 3) -> str:
    return "".join(unified_file(fd, context) for fd in pending.files.values())
