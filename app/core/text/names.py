"""File names as data: how a name that is not plain text travels to a model and back.

A file name on Linux is bytes. Python holds one that is not valid UTF-8 (a latin-1 `café.py`
from an old archive) with lone surrogates (`caf\\udce9.py`, the surrogateescape convention
of os.fsdecode), which map back to the exact bytes but cannot be encoded as UTF-8: such a
name, carried raw into a request, stops it. A name may also hold a newline (which would
split a line of the map in two), a tab, a terminal control or a bidi override.

So a name goes to a model `carried`: each such character written as the same escape the
screen shows (app/view/outside_text.py: `\\udce9`, `\\x1b`, `\\u202e`, `\\t`, `\\n`),
plain ASCII the model can copy. A name the model writes back with escapes is `unescape`d to
the exact name it stands for (app/core/disk/workspace.py does it for every path it checks),
so an edit to `caf\\udce9.py` writes the file whose name is the bytes `caf\\xe9.py`.

`carried` is one to one (a backslash is doubled), so `unescape(carried(n)) == n` for every
name. A plain name (nearly all) comes back as it is: one `isascii`/`isprintable` test and a
look for a backslash. A name a model writes with a backslash that starts no such escape
(`src\\app.py`, a Windows path) stands for no name: `unescape` says None.
"""

from __future__ import annotations

import re

from app.core.text.invisible import HIDDEN

# what a carried name never holds raw, besides the hidden characters: lone surrogates, tab,
# newline, and the backslash that starts an escape
_RAW = re.compile("[\ud800-\udfff\t\n\\\\]")
_ESCAPE = re.compile(r"\\(?:(\\)|([tn])|x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8}))")


def odd(name: str) -> bool:
    """`name` is carried escaped (it holds a character a model must not be sent raw, or a
    backslash)."""
    if name.isascii() and name.isprintable():
        return "\\" in name
    return _RAW.search(name) is not None or HIDDEN.search(name) is not None


def _odd_char(ch: str) -> bool:
    return _RAW.match(ch) is not None or HIDDEN.match(ch) is not None


def _one(ch: str) -> str:
    cp = ord(ch)
    if ch == "\\":
        return "\\\\"
    if ch == "\t":
        return "\\t"
    if ch == "\n":
        return "\\n"
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"


def carried(name: str) -> str:
    """`name` as a model reads it: plain text, each odd character an escape."""
    if not odd(name):
        return name
    return "".join(_one(ch) if _odd_char(ch) else ch for ch in name)


def unescape(text: str) -> str | None:
    """The name `text` (a model's copy of a carried name) stands for: `text` itself when it
    holds no backslash; None when a backslash in it starts no escape `carried` writes."""
    if "\\" not in text:
        return text
    out: list[str] = []
    pos = 0
    for m in _ESCAPE.finditer(text):
        if m.start() != pos and "\\" in text[pos:m.start()]:
            return None
        out.append(text[pos:m.start()])
        slash, tn, x2, u4, u8 = m.groups()
        if slash:
            out.append("\\")
        elif tn:
            out.append("\t" if tn == "t" else "\n")
        else:
            out.append(chr(int(x2 or u4 or u8, 16)))
        pos = m.end()
    if "\\" in text[pos:]:
        return None
    out.append(text[pos:])
    return "".join(out)


def wire(text: str) -> str:
    """`text` safe to encode as UTF-8 for a request: each lone surrogate written as its
    escape. Names are carried before they reach a message; this is the guarantee that one
    that slipped through (a name quoted in an error, a refusal) never stops a request."""
    if text.isascii() or not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub(lambda m: _one(m.group()), text)


_SURROGATE = re.compile("[\ud800-\udfff]")
